"""Function: one ``@func`` kernel, its typed parameters and its traced HIR body."""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
import types as pytypes
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..types.dim import Dim, DimVar, dims_equal, substitute
from ..types.shard import validate_topologies
from ..types.tensor_type import TensorType
from . import backends
from .annotation import TensorSpec
from .dispatch import DimVarRangePat, check_overlap, check_partition, select_variant
from .errors import IRTypeError, MissingWeightError, ModuleDefinitionError
from .graph import Graph, Node, Value
from .source import INTERNAL_DIRS as _FRAMEWORK
from .source import SourceLoc, user_source
from .tracer import TraceContext, current_trace, emit_node, tracing
from .tree import TreeSpec, flatten, unflatten


@dataclass(frozen=True)
class Param:
    """A declared parameter: ``const`` marks a weight (ConstTensor), else an activation."""

    name: str
    type: TensorType
    const: bool

    @property
    def is_const(self) -> bool:
        """Whether this is a weight (a ConstTensor): ``const`` under the reference implementation's name."""
        return self.const

    def __str__(self) -> str:
        kind = "ConstTensor" if self.const else "Tensor"
        return f"{self.name}: {kind}{str(self.type)[len('Tensor'):]}"


class Function:
    """A HIR function built by tracing an annotated Python function.

    Calling it outside tracing evaluates it on the torch evaluator with one argument per declared
    parameter (weights included). Calling it while another ``@func`` is traced records a call.
    """

    def __init__(self, pyfunc: Callable[..., Any], *, name: str | None = None, topologies: Any = None,
                 target: Any = None, localns: Mapping[str, Any] | None = None,
                 inherited: Mapping[str, Param] | None = None) -> None:
        self.pyfunc = pyfunc
        self.name = name or pyfunc.__name__
        self.topologies = validate_topologies(topologies, f"@func {self.name}")
        self.target = target
        self.loc = _definition_loc(pyfunc)
        self.params: tuple[Param, ...] = _parse_params(pyfunc, self.name, localns, inherited)
        self.converters: dict[str, Converter] = {}
        # Dispatch variants (``@f.specialize(pattern)``); a function with variants has no body of its own.
        self.variants: list[Variant] = []
        self._graph: Graph | None = None
        self._scope: dict[str, Any] = {}
        self._tracing = False

    # -- declaration -------------------------------------------------------------------------
    @property
    def weights(self) -> tuple[Param, ...]:
        """The ConstTensor parameters, in declaration order."""
        return tuple(p for p in self.params if p.const)

    @property
    def activations(self) -> tuple[Param, ...]:
        """The Tensor (non-weight) parameters, in declaration order."""
        return tuple(p for p in self.params if not p.const)

    def declared_weights(self) -> list[tuple[Function, Param]]:
        """Every weight this function and its variants declare, with the function declaring it."""
        out = [(self, p) for p in self.weights]
        for v in self.variants:
            out.extend((v, p) for p in v.declared_params if p.const)
        return out

    def all_converters(self) -> dict[str, Converter]:
        """The converters registered on this function and on its variants, by weight name (one each)."""
        out: dict[str, Converter] = {}
        for fn in (self, *self.variants):
            for weight, conv in fn.converters.items():
                if weight in out:
                    raise ModuleDefinitionError(
                        f"weight {weight!r} has two converters ({out[weight].owner.name}.converter at "
                        f"{out[weight].loc} and {fn.name}.converter at {conv.loc}); one weight takes one converter"
                    )
                out[weight] = conv
        return out

    def fill_weights(self, where: str, acts: tuple[Any, ...], constants: Mapping[str, Any]) -> list[Any]:
        """Every declared argument, from activations alone plus weights taken by name from ``constants``.

        A runner that holds weights (a LoadedModule's, a twin's kernel) calls this; it refuses the unread
        Module's argument list (every declared parameter), naming that runner, and a wrong count.
        """
        act_names = ", ".join(p.name for p in self.activations) or "none"
        n_acts, n_all = len(self.activations), len(self.params)
        if len(acts) == n_all and n_all != n_acts:
            raise TypeError(
                f"{where} takes activations alone ({act_names}); you passed every declared parameter, the "
                f"argument list of the unread Module's runner {self.name}. The weights "
                f"({', '.join(p.name for p in self.weights)}) are filled from what load read"
            )
        if len(acts) != n_acts:
            raise TypeError(f"{where} takes {n_acts} activations ({act_names}), got {len(acts)}")
        missing = [p.name for p in self.weights if p.name not in constants]
        if missing:
            held = ", ".join(sorted(constants)) or "none"
            raise MissingWeightError(
                f"{where} needs the weight{'s' if len(missing) > 1 else ''} {', '.join(missing)}, which this reading "
                f"does not hold (it holds: {held}); read the Module with load(resource), or add "
                f"{'them' if len(missing) > 1 else 'it'} to the reading's constants"
            )
        it = iter(acts)
        return [constants[p.name] if p.const else next(it) for p in self.params]

    def select(self, acts: tuple[Any, ...] | list[Any]) -> Function:
        """The function a call with activations ``acts`` runs: itself, or the variant serving their extent.

        With a wrong argument list, the first variant is returned so that its own checks name the mistake.
        """
        if not self.variants:
            return self
        check_partition(self)
        dv = self.variants[0].pattern.dim_var
        if len(acts) == len(self.activations):
            for p, a in zip(self.activations, acts):
                shape = getattr(a, "shape", None)
                if shape is None or len(shape) != p.type.rank:
                    continue
                for d, n in zip(p.type.shape, shape):
                    if isinstance(d, DimVar) and d == dv:
                        return select_variant(self, int(n))
        return self.variants[0]

    def dispatch_var(self) -> DimVar | None:
        """The DimVar the variants dispatch on (None without variants)."""
        return self.variants[0].pattern.dim_var if self.variants else None

    def specialize(self, pattern: DimVarRangePat) -> Callable[[Any], Variant]:
        """Declare the decorated def as the body this function runs when ``pattern``'s DimVar lies in its range.

        This function's own body must be ``pass``. The variant's parameters are this function's activations
        (same names and order; an unannotated parameter takes this function's annotation) and any weights.
        """
        if not isinstance(pattern, DimVarRangePat):
            raise TypeError(f"{self.name}.specialize takes a DimVarRangePat(dim_var, lo, hi), got {pattern!r}")
        if isinstance(self, (Variant, Converter)):
            raise ModuleDefinitionError(f"{self.name}.specialize: only a @func declares variants, not a "
                                        f"{type(self).__name__.lower()}")
        if not has_pass_body(self.pyfunc):
            raise ModuleDefinitionError(
                f"{self.name}.specialize: {self.name} has a body of its own; a function dispatching to variants "
                f"is written with the body `pass` ({self.loc})"
            )
        axes = [d for p in self.activations for d in p.type.shape if isinstance(d, DimVar)]
        named = pattern.resolved(axes)
        dv = pattern.dim_var
        if named is not None:
            pattern = named
            dv = pattern.dim_var
        if named is None or not any(d == dv for d in axes):
            raise ModuleDefinitionError(
                f"{self.name}.specialize: {dv!r} is no axis of {self.name}'s activations "
                f"({', '.join(str(p) for p in self.activations) or 'none'}); a call dispatches on the extent an "
                "activation binds"
            )

        def deco(body: Any) -> Variant:
            pyfunc = body.pyfunc if isinstance(body, Function) else body
            label = getattr(pyfunc, "__name__", "?")
            check_overlap(self, pattern, label)
            variant = Variant(pyfunc, base=self, pattern=pattern, localns=enclosing_locals())
            variant.bind_scope(self._scope)
            self.variants.append(variant)
            return variant

        return deco

    def signature(self) -> str:
        """``name(p: Tensor[...], w: ConstTensor[...])`` for messages."""
        return f"{self.name}({', '.join(str(p) for p in self.params)})"

    def converter(self, weight: str) -> Callable[[Callable[..., Any]], Converter]:
        """Register the decorated def as the converter producing weight ``weight`` from raw tensors."""
        names = [p.name for p in self.weights]
        if weight not in names:
            raise ModuleDefinitionError(
                f"{self.name}.converter({weight!r}): {self.name} declares no ConstTensor {weight!r}; "
                f"its weights are: {', '.join(names) or 'none'}"
            )
        if weight in self.converters:
            raise ModuleDefinitionError(
                f"{self.name}.converter({weight!r}) is registered twice "
                f"(first at {self.converters[weight].loc}); keep one converter per weight"
            )

        def deco(pyfunc: Callable[..., Any]) -> Converter:
            conv = Converter(pyfunc, owner=self, weight=weight, localns=enclosing_locals())
            self.converters[weight] = conv
            return conv

        return deco

    # -- body --------------------------------------------------------------------------------
    def bind_scope(self, scope: Mapping[str, Any]) -> None:
        """Names (sibling Functions, child Modules) a class-body ``@func`` (its converters and variants too)
        reaches by bare name."""
        self._scope = dict(scope)
        self._graph = None
        for dependent in (*self.converters.values(), *self.variants):
            dependent.bind_scope(scope)

    @property
    def graph(self) -> Graph:
        """The traced HIR body (traced on first use). A function with variants has none: each variant has one."""
        if self.variants:
            raise ModuleDefinitionError(
                f"{self.name} dispatches to its variants ({', '.join(v.name for v in self.variants)}) and has no "
                f"body of its own; each variant's graph is {self.name}.variants[i].graph"
            )
        if self._graph is None:
            self._graph = self._trace()
        return self._graph

    def trace_now(self) -> None:
        """Trace the body (or every variant, after checking they partition their DimVar) and the converters."""
        if self.variants:
            check_partition(self)
            for v in self.variants:
                v.trace_now()
            self.result_types()
        else:
            _ = self.graph
        for conv in self.converters.values():
            _ = conv.graph

    def result_types(self) -> tuple[list[TensorType], TreeSpec]:
        """The result leaf types and the nesting spec; for variants, theirs (which must agree)."""
        if not self.variants:
            leaves, spec = flatten(self.graph.outputs, lambda v: isinstance(v, Value))
            return [v.type for v in leaves], spec
        check_partition(self)
        first = self.variants[0]
        types, spec = first.result_types()
        for v in self.variants[1:]:
            other, other_spec = v.result_types()
            if other_spec != spec or len(other) != len(types) or not all(
                    a.same_as(b) for a, b in zip(types, other)):
                raise ModuleDefinitionError(
                    f"{self.name}: variants {first.name} and {v.name} return different types "
                    f"({', '.join(map(str, types))} vs {', '.join(map(str, other))}); a call's result type must not "
                    "depend on the variant chosen"
                )
        return types, spec

    @property
    def output_types(self) -> Any:
        """Result types, nested like the result."""
        types, spec = self.result_types()
        return unflatten(spec, types)

    def _trace(self) -> Graph:
        if self._tracing:
            raise ModuleDefinitionError(f"{self.name} calls itself: recursion cannot be traced ({self.loc})")
        params = tuple(Value(p.type, param=p.name) for p in self.params)
        graph = Graph(params)
        fn = self.pyfunc
        if self._scope:
            env = dict(fn.__globals__)
            env.update(self._scope)
            fn = pytypes.FunctionType(fn.__code__, env, fn.__name__, fn.__defaults__, fn.__closure__)
        self._tracing = True
        try:
            with tracing(TraceContext(graph, self.name)):
                out = fn(*params)
        finally:
            self._tracing = False
        try:
            leaves, spec = flatten(out, lambda v: isinstance(v, Value))
        except TypeError as e:
            raise ModuleDefinitionError(f"@func {self.name} must return tensors or tuples of them: {e}") from None
        if not leaves:
            hint = (f"; its body is `pass`: declare its variants with @{self.name}.specialize(DimVarRangePat(...)) "
                    "or write the body") if has_pass_body(self.pyfunc) else ""
            raise ModuleDefinitionError(f"@func {self.name} returns nothing ({self.loc}){hint}")
        graph.outputs = unflatten(spec, leaves)
        return graph

    # -- calls -------------------------------------------------------------------------------
    def __call__(self, *args: Any) -> Any:
        if current_trace() is not None:
            return self.record_call("call", args, self.params, {"function": self.name})
        if self.weights and len(args) == len(self.activations):
            raise TypeError(
                f"{self.name} takes every declared parameter ({', '.join(p.name for p in self.params)}) because a "
                f"Module holds no weights; you passed activations alone, the argument list of the LoadedModule "
                f"runner: call mod.load(resource).{self.name}(...) instead"
            )
        return backends.evaluate(self, *args)

    def record_call(self, op: str, args: tuple[Any, ...], expected: tuple[Param, ...],
                    attrs: dict[str, Any]) -> Any:
        """Record a call of this function taking ``expected`` params; returns its (nested) results."""
        loc = user_source()
        arg_types = [a.type for a in args if isinstance(a, Value)]
        if len(args) != len(expected):
            raise IRTypeError(
                f"call {self.name}", arg_types,
                f"takes {len(expected)} arguments ({', '.join(p.name for p in expected)}), got {len(args)}", loc,
            )
        binding: dict[DimVar, Dim] = {}
        for p, a in zip(expected, args):
            if not isinstance(a, Value):
                raise IRTypeError(f"call {self.name}", arg_types, f"argument {p.name} is not a tensor: {a!r}", loc)
            reason = _unify(p.type, a.type, binding)
            if reason:
                raise IRTypeError(f"call {self.name}", arg_types, f"argument {p.name}: {reason}", loc)
        leaf_types, spec = self.result_types()
        out_types = tuple(substituted(t, binding) for t in leaf_types)
        node = Node(op, tuple(args), dict(attrs, structure=spec), loc=loc, callee=self)
        emit_node(node, out_types)
        return unflatten(spec, list(node.outputs))

    def __repr__(self) -> str:
        return f"<Function {self.signature()}>"


class Variant(Function):
    """One specialised body of a dispatching ``@func``, serving the extents ``pattern`` covers.

    Its parameters are the base's activations (same names, order and types; an unannotated one takes the
    base's annotation) and its own weights. Inside it, the pattern's DimVar is narrowed to the pattern's
    range (same name), so ``params`` carry the narrowed types and ``declared_params`` the authored ones.
    """

    def __init__(self, pyfunc: Callable[..., Any], *, base: Function, pattern: DimVarRangePat,
                 localns: Mapping[str, Any] | None = None) -> None:
        super().__init__(pyfunc, localns=localns, inherited={p.name: p for p in base.params})
        self.base = base
        self.pattern = pattern
        self.declared_params = self.params
        acts, base_acts = self.activations, base.activations
        if [p.name for p in acts] != [p.name for p in base_acts]:
            raise ModuleDefinitionError(
                f"{base.name}.specialize: variant {self.name} takes the activations "
                f"({', '.join(p.name for p in acts) or 'none'}), but {base.name} takes "
                f"({', '.join(p.name for p in base_acts) or 'none'}); a variant takes the base's activations, in order "
                "(its weights are its own)"
            )
        for p, q in zip(acts, base_acts):
            if not p.type.same_as(q.type):
                raise ModuleDefinitionError(
                    f"{base.name}.specialize: variant {self.name} declares {p}, {base.name} declares {q}; an "
                    "activation keeps the base's type (the variant's range narrows the DimVar by itself)"
                )
        narrowed = {pattern.dim_var: pattern.narrowed()}
        self.params = tuple(Param(p.name, substituted(p.type, narrowed), p.const) for p in self.params)

    def result_types(self) -> tuple[list[TensorType], TreeSpec]:
        """The result types with the narrowed DimVar named back as the base's."""
        types, spec = super().result_types()
        back = {self.pattern.narrowed(): self.pattern.dim_var}
        return [substituted(t, back) for t in types], spec


def substituted(t: TensorType, mapping: Mapping[DimVar, Dim]) -> TensorType:
    """``t`` with each DimVar in ``mapping`` replaced in its shape."""
    return TensorType(tuple(substitute(d, mapping) for d in t.shape), t.dtype, t.layout, t.storage)


def has_pass_body(pyfunc: Callable[..., Any]) -> bool:
    """True when the function's body is only ``pass`` / ``...`` (after an optional docstring)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(pyfunc)))
    except (OSError, TypeError, SyntaxError):
        return False
    defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if not defs:
        return False
    body = defs[0].body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(
            body[0].value.value, str):
        body = body[1:]
    return all(isinstance(n, ast.Pass) or (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
                                           and n.value.value is Ellipsis) for n in body)


class Converter(Function):
    """A weight converter: params are raw checkpoint names; it returns the declared weight exactly."""

    def __init__(self, pyfunc: Callable[..., Any], *, owner: Function, weight: str,
                 localns: Mapping[str, Any] | None = None) -> None:
        super().__init__(pyfunc, localns=localns)
        self.owner = owner
        self.weight = weight

    @property
    def weight_type(self) -> TensorType:
        """The declared type of the weight this converter produces."""
        return next(p.type for p in self.owner.weights if p.name == self.weight)


def _unify(declared: TensorType, actual: TensorType, binding: dict[DimVar, Dim]) -> str | None:
    """Bind declared DimVars to the actual dims; a reason string when the types disagree."""
    if declared.dtype != actual.dtype:
        return f"dtype {actual.dtype} where {declared} is declared"
    if declared.rank != actual.rank:
        return f"rank {actual.rank} ({actual}) where {declared} is declared"
    for d, a in zip(declared.shape, actual.shape):
        if isinstance(d, DimVar) and d not in binding:
            if isinstance(a, int) and not d.contains(a):
                return f"extent {a} is outside {d.name}'s range [{d.lo}, {d.hi})"
            binding[d] = a
        elif not dims_equal(substitute(d, binding), a):
            return f"shape {actual} does not match declared {declared}"
    return None


def _definition_loc(pyfunc: Callable[..., Any]) -> SourceLoc | None:
    try:
        lines, lineno = inspect.getsourcelines(pyfunc)
        return SourceLoc(inspect.getsourcefile(pyfunc) or "?", lineno, lines[0].strip())
    except (OSError, TypeError):
        return user_source()


def enclosing_locals() -> dict[str, Any]:
    """Locals of the frames around an authored definition (class bodies, enclosing functions).

    String annotations (``from __future__ import annotations``) may name such locals, e.g. a dtype
    chosen by a factory function; Python itself only evaluates them against module globals.
    """
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_FRAMEWORK):
        frame = frame.f_back
    chain: list[dict[str, Any]] = []
    while frame is not None and frame.f_locals is not frame.f_globals:
        chain.append(dict(frame.f_locals))
        frame = frame.f_back
    merged: dict[str, Any] = {}
    for scope in reversed(chain):
        merged.update(scope)
    return merged


def _parse_params(pyfunc: Callable[..., Any], name: str, localns: Mapping[str, Any] | None,
                  inherited: Mapping[str, Param] | None = None) -> tuple[Param, ...]:
    if not callable(pyfunc) or not isinstance(pyfunc, pytypes.FunctionType):
        raise TypeError(f"@func decorates a Python function, got {type(pyfunc).__name__}")
    try:
        annotations = inspect.get_annotations(pyfunc, eval_str=True, locals=dict(localns or {}))
    except Exception as e:  # noqa: BLE001 - any failure evaluating annotations is the author's to fix
        raise ModuleDefinitionError(f"@func {name}: could not evaluate its annotations: {e}") from e
    params = []
    for p in inspect.signature(pyfunc).parameters.values():
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            raise ModuleDefinitionError(f"@func {name}: parameter {p.name} must be positional (no *args/**kwargs)")
        ann = annotations.get(p.name)
        if ann is None and inherited and p.name in inherited:
            params.append(inherited[p.name])
            continue
        if not isinstance(ann, TensorSpec):
            raise ModuleDefinitionError(
                f"@func {name}: parameter {p.name} needs a Tensor[(dims), \"dtype\"] or "
                f"ConstTensor[(dims), \"dtype\"] annotation, got {ann!r}"
            )
        params.append(Param(p.name, ann.type, ann.const))
    return tuple(params)

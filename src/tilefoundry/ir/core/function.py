"""Function: one ``@func`` kernel, its typed parameters and its traced HIR body."""

from __future__ import annotations

import inspect
import sys
import types as pytypes
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..types.dim import Dim, DimVar, dims_equal, substitute
from ..types.tensor_type import TensorType
from . import backends
from .annotation import TensorSpec
from .errors import IRTypeError, ModuleDefinitionError
from .graph import Graph, Node, Value
from .source import INTERNAL_DIRS as _FRAMEWORK
from .source import SourceLoc, user_source
from .tracer import TraceContext, current_trace, emit_node, tracing
from .tree import flatten, unflatten


@dataclass(frozen=True)
class Param:
    """A declared parameter: ``const`` marks a weight (ConstTensor), else an activation."""

    name: str
    type: TensorType
    const: bool

    def __str__(self) -> str:
        kind = "ConstTensor" if self.const else "Tensor"
        return f"{self.name}: {kind}{str(self.type)[len('Tensor'):]}"


class Function:
    """A HIR function built by tracing an annotated Python function.

    Calling it outside tracing evaluates it on the torch evaluator with one argument per declared
    parameter (weights included). Calling it while another ``@func`` is traced records a call.
    """

    def __init__(self, pyfunc: Callable[..., Any], *, name: str | None = None, topologies: Any = None,
                 target: Any = None, localns: Mapping[str, Any] | None = None) -> None:
        self.pyfunc = pyfunc
        self.name = name or pyfunc.__name__
        self.topologies = topologies
        self.target = target
        self.loc = _definition_loc(pyfunc)
        self.params: tuple[Param, ...] = _parse_params(pyfunc, self.name, localns)
        self.converters: dict[str, Converter] = {}
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
        it = iter(acts)
        return [constants[p.name] if p.const else next(it) for p in self.params]

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
        """Names (sibling Functions, child Modules) a class-body ``@func`` reaches by bare name."""
        self._scope = dict(scope)
        self._graph = None

    @property
    def graph(self) -> Graph:
        """The traced HIR body (traced on first use)."""
        if self._graph is None:
            self._graph = self._trace()
        return self._graph

    @property
    def output_types(self) -> Any:
        """Result types, nested like the result."""
        leaves, spec = flatten(self.graph.outputs, lambda v: isinstance(v, Value))
        return unflatten(spec, [v.type for v in leaves])

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
            raise ModuleDefinitionError(f"@func {self.name} returns nothing ({self.loc})")
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
        leaves, spec = flatten(self.graph.outputs, lambda v: isinstance(v, Value))
        out_types = tuple(
            TensorType(tuple(substitute(d, binding) for d in v.type.shape), v.type.dtype, v.type.layout,
                       v.type.storage)
            for v in leaves
        )
        node = Node(op, tuple(args), dict(attrs, structure=spec), loc=loc, callee=self)
        emit_node(node, out_types)
        return unflatten(spec, list(node.outputs))

    def __repr__(self) -> str:
        return f"<Function {self.signature()}>"


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


def _parse_params(pyfunc: Callable[..., Any], name: str, localns: Mapping[str, Any] | None) -> tuple[Param, ...]:
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
        if not isinstance(ann, TensorSpec):
            raise ModuleDefinitionError(
                f"@func {name}: parameter {p.name} needs a Tensor[(dims), \"dtype\"] or "
                f"ConstTensor[(dims), \"dtype\"] annotation, got {ann!r}"
            )
        params.append(Param(p.name, ann.type, ann.const))
    return tuple(params)

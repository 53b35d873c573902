"""``@runtime_module(sem)`` and ``@runtime_func``: generate a semantic Module's runtime twin class (spec 1.1).

::

    @runtime_module(Attention)            # Attention: the @module instance
    class AttentionTwin:
        @runtime_func                     # the @func's own signature, weights included
        def qkv(self, x, w_qkv):
            return torch.nn.functional.linear(x, w_qkv.t())

        rope = RopeKernel(entry_abi_of(Attention.functions["rope"]))   # a RuntimeFunction body
        norm = NormTwin                   # a child: a RuntimeModule subclass, not an instance

Decoration validates the class against ``sem`` strictly one-to-one and returns a RuntimeModule subclass.
What is validated is everything the class declares *or inherits*: its members are collected over its MRO,
bases before the class and the class's own definition of a name winning (what attribute lookup would find),
with ``object`` and ``RuntimeModule`` contributing nothing. A member inherited from a base is therefore held
to every rule below exactly like one written in the class body: an inherited matching kernel (or child)
counts, an inherited extra one is refused (named with the base it comes from), and a base defining
``module`` or a member the generated class provides is refused. A base may be any plain class (a mixin
sharing kernels between twins) or RuntimeModule itself, but not another RuntimeModule subclass (such as a
generated twin): its members are not a class body the decorator can validate.

* kernels: the ``@runtime_func`` methods and RuntimeFunction instances must be named exactly like sem's
  functions; a missing and an extra kernel are both named in the refusal. A ``@runtime_func`` takes the
  ``@func``'s parameters, in order, after ``self`` (or ``self, *args``, receiving them positionally); a
  RuntimeFunction's ``type`` must equal ``entry_abi_of`` of the function, and it is called with one argument
  per parameter.
* children: an attribute per sem child, named like it, holding a RuntimeModule subclass that accepts the
  ``ir=`` constructor keyword (every ``@runtime_module`` result does). A tuple of such classes covers, in
  order, the sem children no attribute names (the mirror of ``layers = tuple(Layer.renamed(...))``).
* ``module`` is reserved both ways: a semantic Module with a function, child or method called ``module`` is
  refused, and so is a class defining ``module``. The class may not define ``__init__``, ``__call__``,
  ``load``, ``name``, ``entry`` or ``modules`` either: the generated class provides them.
* orchestration methods come from ``sem.methods`` verbatim (the class may not rewrite them), so inside them
  ``self.<function>`` is this twin's kernel and ``self.<child>`` its child twin. ``forward`` is the class's
  own if it defines one, else ``sem.methods["forward"]``, else a call of the entry kernel; with none of them,
  calling it is refused naming what to call instead.

The generated ``__init__(ir=None)`` (``ir`` positional or keyword) builds one child per ``ir.modules`` entry with
``child_cls(ir=<that child Module>)`` (``ir`` defaults to ``sem``; another ir must have sem's shape, e.g. a
``renamed`` copy). ``load(resource)`` reads every declared weight of the node by name, validates its shape and
dtype against the declaration, recurses into the children, and binds the whole tree only if every read
succeeded. A kernel called through the twin takes activations alone; its weights are filled by name.
"""

from __future__ import annotations

import inspect
import types as pytypes
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from ..ir.core.module import Module
from ..ir.core.weights import read_node_weights
from .abi import entry_abi_of
from .errors import NotLoadedError, TwinDefinitionError
from .function import RuntimeFunction
from .kernel import KernelSlot
from .module import RuntimeModule

__all__ = ["bound_weights", "is_twin_class", "runtime_func", "runtime_module"]

# The accessor the spec reserves on every twin.
_ACCESSOR = "module"
# What the generated class itself provides; a decorated class may not define these.
_PROVIDED = ("__init__", "__call__", "load", "name", "entry", "modules")
# Class-body entries Python puts there itself.
_PYTHON_OWN = frozenset({"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__annotations__",
                         "__firstlineno__", "__static_attributes__", "__orig_bases__"})

_TAG = "__tf_runtime_func__"


def runtime_func(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Tag a plain method of a ``@runtime_module`` class as the kernel body of the ``@func`` of its name.

    The method takes ``self`` (the twin instance) and then exactly the semantic ``@func``'s parameters, in
    order, weights included. It is returned unchanged apart from the tag; ``@runtime_module`` validates it.
    """
    if isinstance(fn, (staticmethod, classmethod)):
        raise TwinDefinitionError(
            f"@runtime_func tags a plain method (def name(self, ...)), got a {type(fn).__name__}; drop the "
            f"{type(fn).__name__} decorator"
        )
    if not isinstance(fn, pytypes.FunctionType):
        raise TwinDefinitionError(
            f"@runtime_func tags a plain method (def name(self, ...)), got {type(fn).__name__}; a heavy kernel "
            "object is assigned as a RuntimeFunction instance instead"
        )
    setattr(fn, _TAG, True)
    return fn


def runtime_module(sem: Module) -> Callable[[type], type[RuntimeModule]]:
    """Class decorator: make the decorated class the runtime twin of the semantic Module ``sem``.

    Returns the generated RuntimeModule subclass (same class name); instances are twins of ``sem`` (same
    name, child tree and entry) whose ``module`` is the authored Module they were built for. See the module
    docstring for the rules the class is validated against.

    Raises:
        TwinDefinitionError: ``sem`` is not a Module or uses the reserved name ``module``; the class breaks a
            rule (the message lists every missing and extra kernel and child, and each other problem).
    """
    if isinstance(sem, type) or not isinstance(sem, Module):
        hint = " (write @runtime_module(TheModule), with the semantic Module in parentheses)" if isinstance(
            sem, type) else ""
        raise TwinDefinitionError(
            f"@runtime_module takes the semantic Module instance (the name a @module class is bound to), got "
            f"{sem!r}{hint}"
        )
    clashes = _accessor_clashes(sem)
    if clashes:
        raise TwinDefinitionError(
            f"@runtime_module({sem.name}): {sem.name} has a {' and a '.join(clashes)} named {_ACCESSOR!r}, which "
            f"would shadow the reserved accessor twin.{_ACCESSOR} (the authored Module a twin stands for); rename "
            "it in the semantic Module"
        )

    internal = sorted(n for n in [*sem.functions, *(m.name for m in sem.modules), *sem.methods] if n in _TWIN_INTERNAL)
    if internal:
        raise TwinDefinitionError(
            f"@runtime_module({sem.name}): {sem.name}'s member {', '.join(map(repr, internal))} clashes with an "
            "internal attribute of the generated twin; rename it in the semantic Module"
        )

    def deco(cls: type) -> type[RuntimeModule]:
        return _generate(sem, cls)

    return deco


# Private names a generated twin holds itself (RuntimeModule's and the generated class's); the public ones are
# reserved on the semantic Module already (tilefoundry.ir.core.module.RESERVED_NAMES).
_TWIN_INTERNAL = frozenset(
    {n for n in vars(RuntimeModule) if n.startswith("_") and not n.startswith("__")}
    | {"_tf_sem", "_tf_kernels", "_tf_child_classes", "_tf_constants", "_tf_own_forward"}
)


def _accessor_clashes(sem: Module) -> list[str]:
    kinds = []
    if _ACCESSOR in sem.functions:
        kinds.append("function")
    if any(m.name == _ACCESSOR for m in sem.modules):
        kinds.append("child")
    if _ACCESSOR in sem.methods:
        kinds.append("method")
    return kinds


# -- generation -----------------------------------------------------------------------------------------


def _generate(sem: Module, cls: type) -> type[RuntimeModule]:
    if not isinstance(cls, type):
        raise TwinDefinitionError(f"@runtime_module({sem.name}) decorates a class, got {type(cls).__name__}")
    where = f"@runtime_module({sem.name}) class {cls.__name__}"
    problems: list[str] = []
    kernels: dict[str, KernelSlot] = {}
    named_children: dict[str, type[RuntimeModule]] = {}
    tuple_children: list[tuple[str, int, type[RuntimeModule]]] = []
    namespace: dict[str, Any] = {}
    own_forward = False
    child_names = [m.name for m in sem.modules]

    members = _collect_members(cls, problems)
    inherited_from: dict[str, str] = {}  # kernel name -> the base defining it, when not the class itself

    for attr, (value, owner) in members.items():
        who = "it" if owner is cls else f"its base {owner.__name__}"
        if attr == _ACCESSOR:
            problems.append(
                f"{who} defines {_ACCESSOR!r}, the reserved accessor for the authored Module (twin.{_ACCESSOR} is "
                f"{sem.name}); rename the member"
            )
            continue
        if attr in _PROVIDED:
            problems.append(
                f"{who} defines {attr!r}, which the generated class provides; remove it (kernel state belongs in a "
                "RuntimeFunction instance, set up at its own construction)"
            )
            continue
        if getattr(value, _TAG, False) or isinstance(value, RuntimeFunction):
            if isinstance(value, RuntimeFunction):
                problem = _body_type_problem(sem, attr, value)
            else:
                problem = _method_signature_problem(sem, attr, value)
            if problem:
                problems.append(problem if owner is cls else f"{problem} (inherited from {owner.__name__})")
            kernels[attr] = KernelSlot(attr, value)
            if owner is not cls:
                inherited_from[attr] = owner.__name__
        elif isinstance(value, type) and issubclass(value, RuntimeModule):
            named_children[attr] = value
            if owner is not cls:
                namespace[attr] = _ChildAttr()  # hide the base's class attribute behind the child lookup
        elif isinstance(value, RuntimeModule):
            problems.append(
                f"{attr} = {value!r} is a RuntimeModule instance; assign the class ({type(value).__name__}): "
                "the generated __init__ builds one instance per semantic child with ir="
            )
        elif isinstance(value, tuple) and any(_is_twin_like(v) for v in value):
            problem = _tuple_problem(attr, value, child_names)
            if problem:
                problems.append(problem)
            else:
                tuple_children.extend((attr, i, v) for i, v in enumerate(value))
                if owner is not cls:
                    namespace[attr] = _ChildAttr()
        elif attr == "forward" and isinstance(value, pytypes.FunctionType):
            own_forward = True
            namespace[attr] = value
        elif attr in sem.functions:
            problems.append(
                f"{attr} stands for the @func {attr} of {sem.name} but is a {type(value).__name__}"
                f"{'' if owner is cls else f' (in base {owner.__name__})'}; tag a method with @runtime_func, or "
                "assign a RuntimeFunction instance"
            )
        elif attr in child_names:
            problems.append(
                f"{attr} stands for the child {attr} of {sem.name} but is a {type(value).__name__}"
                f"{'' if owner is cls else f' (in base {owner.__name__})'}; assign a RuntimeModule subclass "
                "(typically another @runtime_module class)"
            )
        elif attr in sem.methods:
            problems.append(
                f"{attr}{'' if owner is cls else f' (in base {owner.__name__})'} rewrites the orchestration method "
                f"{sem.name}.{attr}, which the twin reuses verbatim (only forward may be the twin's own); remove it"
            )
        elif owner is cls:
            namespace[attr] = value  # a base's own helpers and data stay reachable through the bases

    missing = [f for f in sem.functions if f not in kernels]
    extra = [f"{k} (from {inherited_from[k]})" if k in inherited_from else k
             for k in kernels if k not in sem.functions]
    if missing or extra:
        problems.append(_set_mismatch("kernels", sem.name, "functions", list(sem.functions), missing, extra))

    children = _match_children(sem, named_children, tuple_children, problems)
    for name, child_cls in children.items():
        problem = _child_class_problem(sem._child(name), name, child_cls)
        if problem:
            problems.append(problem)

    if problems:
        raise TwinDefinitionError(f"{where} is not a twin of {sem.name}:\n  - " + "\n  - ".join(problems))

    for method_name, method in sem.methods.items():
        if method_name == "forward" and own_forward:
            continue
        namespace[method_name] = method
    if not own_forward and "forward" not in sem.methods:
        namespace["forward"] = _entry_forward(sem)

    namespace.update(kernels)
    namespace.update(
        {
            "__module__": cls.__module__,
            "__qualname__": cls.__qualname__,
            "__doc__": cls.__doc__,
            "__init__": _make_init(sem, children),
            "load": _twin_load,
            "_tf_sem": sem,
            "_tf_kernels": MappingProxyType(dict(kernels)),
            "_tf_child_classes": MappingProxyType(dict(children)),
            "_tf_constants": None,
            "_tf_own_forward": own_forward,
        }
    )
    bases = tuple(b for b in cls.__bases__ if b is not object)
    if not any(issubclass(b, RuntimeModule) for b in bases):
        bases = (*bases, RuntimeModule)
    return type(cls.__name__, bases, namespace)


def _collect_members(cls: type, problems: list[str]) -> dict[str, tuple[Any, type]]:
    """Every member the decorated class declares or inherits: name -> (value, the class defining it).

    Walks ``cls.__mro__`` from the farthest base to ``cls``, so a name redefined lower down wins (as
    attribute lookup would have it) while keeping the position of its first definition. ``object`` and
    RuntimeModule (the runtime machinery the generated class derives from anyway) contribute nothing; any
    other RuntimeModule subclass as a base is refused: its members (a generated class's kernel slots and
    ``__init__`` / ``load``, or a handwritten twin's own) are not a class body this decorator can validate.
    """
    members: dict[str, tuple[Any, type]] = {}
    for klass in reversed(cls.__mro__):
        if issubclass(RuntimeModule, klass):
            continue  # object, RuntimeModule
        if klass is not cls and issubclass(klass, RuntimeModule):
            problems.append(
                f"its base {klass.__name__} is a RuntimeModule subclass; a twin class derives from plain classes "
                "(mixins), whose members are validated like its own: move the shared kernels, children and "
                "helpers into a plain class and derive both twins from it"
            )
            continue
        for attr, value in klass.__dict__.items():
            if attr not in _PYTHON_OWN:
                members[attr] = (value, klass)
    return members


class _ChildAttr:
    """Stands, on the generated class, for a child attribute a base declared (``inner = ProjTwin``).

    The decorated class's own child attributes are not carried over to the generated class, so ``twin.inner``
    reaches the built child through RuntimeModule's lookup by name. A base's would still be found through
    the bases, answering the class instead; this slot hides it and defers to that lookup, as if the name
    were not there.
    """

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    def __get__(self, twin: RuntimeModule | None, owner: type | None = None) -> Any:
        if twin is None:
            raise AttributeError(self._name)
        return RuntimeModule.__getattr__(twin, self._name)


def _is_twin_like(value: Any) -> bool:
    return isinstance(value, RuntimeModule) or (isinstance(value, type) and issubclass(value, RuntimeModule))


def _tuple_problem(attr: str, value: tuple[Any, ...], child_names: list[str]) -> str | None:
    if attr in child_names:
        return f"{attr} is a tuple, but the child {attr} is one Module; assign one RuntimeModule subclass"
    for i, item in enumerate(value):
        if isinstance(item, RuntimeModule):
            return (f"{attr}[{i}] is a RuntimeModule instance; a tuple of children holds classes "
                    f"({type(item).__name__}), one per semantic child")
        if not (isinstance(item, type) and issubclass(item, RuntimeModule)):
            return f"{attr}[{i}] is a {type(item).__name__}; a tuple of children holds RuntimeModule subclasses only"
    return None


def _set_mismatch(what: str, sem_name: str, sem_what: str, expected: list[str], missing: list[str],
                  extra: list[str]) -> str:
    parts = []
    if missing:
        parts.append(f"missing {', '.join(missing)}")
    if extra:
        parts.append(f"extra {', '.join(extra)}")
    return (f"{what} must match the {sem_what} of {sem_name} one to one ({', '.join(expected) or 'none'}): "
            f"{'; '.join(parts)}")


def _match_children(
    sem: Module,
    named: dict[str, type[RuntimeModule]],
    tupled: list[tuple[str, int, type[RuntimeModule]]],
    problems: list[str],
) -> dict[str, type[RuntimeModule]]:
    """Sem child name -> twin class: named attributes by name, tuple members in order over the rest."""
    sem_names = [m.name for m in sem.modules]
    matched: dict[str, type[RuntimeModule]] = {n: c for n, c in named.items() if n in sem_names}
    extra = [n for n in named if n not in sem_names]
    rest = [n for n in sem_names if n not in matched]
    for name, (_attr, _i, child_cls) in zip(rest, tupled):
        matched[name] = child_cls
    missing = rest[len(tupled):]
    extra += [f"{attr}[{i}] ({c.__name__})" for attr, i, c in tupled[len(rest):]]
    if missing or extra:
        problems.append(_set_mismatch("child attributes", sem.name, "children", sem_names, missing, extra))
    return {n: matched[n] for n in sem_names if n in matched}


def _method_signature_problem(sem: Module, name: str, method: Callable[..., Any]) -> str | None:
    fn = sem.functions.get(name)
    if fn is None:
        return None  # reported as an extra kernel
    expected = ["self", *(p.name for p in fn.params)]
    params = list(inspect.signature(method).parameters.values())
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    variadic = [p.name for p in params if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if len(positional) == 1 and [p.kind for p in params[1:]] in (
            [inspect.Parameter.VAR_POSITIONAL], [inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD]):
        return None  # def k(self, *args): takes the parameters in order, whatever they are called
    if positional != expected or variadic:
        return (f"@runtime_func {name}({', '.join(positional + ['*' + v for v in variadic])}) must take the "
                f"@func's parameters in order after self: {name}({', '.join(expected)})")
    return None


def _body_type_problem(sem: Module, name: str, body: RuntimeFunction) -> str | None:
    fn = sem.functions.get(name)
    if fn is None:
        return None  # reported as an extra kernel
    want = entry_abi_of(fn)
    if body.type != want:
        return (f"{name} = {type(body).__name__}(...) has type {body.type}, but the @func {name} of {sem.name} "
                f"is {want}; build it with entry_abi_of({sem.name}.functions[{name!r}])")
    return None


def _child_class_problem(sem_child: Module, name: str, child_cls: type[RuntimeModule]) -> str | None:
    try:
        params = inspect.signature(child_cls).parameters
    except (TypeError, ValueError):
        params = {}
    takes_ir = "ir" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
    if not takes_ir:
        return (f"child {name} = {child_cls.__name__} does not accept the ir= constructor keyword; the "
                "generated __init__ builds it with child_cls(ir=<child Module>)")
    child_sem = getattr(child_cls, "_tf_sem", None)
    if isinstance(child_sem, Module):
        difference = _shape_difference(child_sem, sem_child)
        if difference:
            return (f"child {name} = {child_cls.__name__} is the twin of {child_sem.name}, which differs from "
                    f"the child {name}: {difference}")
    return None


def _shape_difference(twin_of: Module, ir: Module) -> str | None:
    """Why a twin generated for ``twin_of`` cannot stand for ``ir`` (None when it can)."""
    if set(twin_of.functions) != set(ir.functions):
        return f"functions {sorted(twin_of.functions)} vs {sorted(ir.functions)}"
    for name, fn in twin_of.functions.items():
        if entry_abi_of(fn) != entry_abi_of(ir.functions[name]):
            return f"function {name} is {entry_abi_of(fn)} vs {entry_abi_of(ir.functions[name])}"
    if sorted(m.name for m in twin_of.modules) != sorted(m.name for m in ir.modules):
        return f"children {[m.name for m in twin_of.modules]} vs {[m.name for m in ir.modules]}"
    if set(twin_of.methods) != set(ir.methods):
        return f"methods {sorted(twin_of.methods)} vs {sorted(ir.methods)}"
    if twin_of.entry != ir.entry:
        return f"entry {twin_of.entry!r} vs {ir.entry!r}"
    for child in twin_of.modules:
        difference = _shape_difference(child, ir._child(child.name))
        if difference:
            return f"in child {child.name}: {difference}"
    return None


# -- the generated members ---------------------------------------------------------------------------------


def _make_init(sem: Module, child_classes: Mapping[str, type[RuntimeModule]]) -> Callable[..., None]:
    def __init__(self: RuntimeModule, ir: Module | None = None) -> None:
        """Build this twin for ``ir`` (default: the Module the class was generated from) and its children."""
        cls_name = type(self).__name__
        if ir is None:
            ir = sem
        elif not isinstance(ir, Module):
            raise TypeError(f"{cls_name}(ir=...) takes the semantic Module this twin stands for, got {ir!r}")
        elif ir is not sem:
            difference = _shape_difference(sem, ir)
            if difference:
                raise ValueError(
                    f"{cls_name} was generated for {sem.name} and cannot stand for Module {ir.name!r}: {difference}"
                )
        children = []
        for child_ir in ir.modules:
            child = child_classes[child_ir.name](ir=child_ir)
            if not isinstance(child, RuntimeModule) or child.name != child_ir.name:
                raise ValueError(
                    f"{cls_name}: the child class {child_classes[child_ir.name].__name__} built with "
                    f"ir=<Module {child_ir.name}> gave {child!r}; a child twin is a RuntimeModule named like its "
                    "semantic child"
                )
            children.append(child)
        RuntimeModule.__init__(self, ir.name, ir.entry, children)
        self._authored = ir

    return __init__


def _twin_load(self: RuntimeModule, resource: Any) -> RuntimeModule:
    """Read, validate and bind this tree's weights from ``resource``; all or nothing.

    Each declared weight is read by name (``resource.load``) and validated against its ConstTensor
    declaration (shape, dtype, DimVar agreement); children load from ``resource.subtree(child.name)``. If any
    read fails, every generated twin of the tree keeps the weights it had before.
    """
    if not all(callable(getattr(resource, m, None)) for m in ("load", "subtree")):
        raise TypeError(
            f"{type(self).__name__}.load takes a RuntimeResource (DictResource, SafetensorsResource), got "
            f"{type(resource).__name__}"
        )
    before = [(node, node.__dict__.get("_tf_constants")) for _, node in self._walk()]
    try:
        _bind_own(self, resource)
        RuntimeModule.load(self, resource)
    except BaseException:
        for node, constants in before:
            if constants is None:
                node.__dict__.pop("_tf_constants", None)
            else:
                node.__dict__["_tf_constants"] = constants
        raise
    return self


def _bind_own(twin: RuntimeModule, resource: Any) -> None:
    ir = twin.module
    assert ir is not None
    twin.__dict__["_tf_constants"] = MappingProxyType(read_node_weights(ir, resource, twin._tree_path()))


def _entry_forward(sem: Module) -> Callable[..., Any]:
    if sem.entry is not None:

        def forward(self: RuntimeModule, *acts: Any) -> Any:
            """Run the entry kernel on activations alone (the semantic Module defines no forward method)."""
            return getattr(self, self.entry)(*acts)  # type: ignore[arg-type]

        return forward

    def no_forward(self: RuntimeModule, *acts: Any) -> Any:
        """Refused: the semantic Module has neither a forward method nor an entry function."""
        members = []
        if sem.functions:
            members.append("kernels " + ", ".join(f"{self.name}.{f}(...)" for f in sem.functions))
        if sem.modules:
            members.append("children " + ", ".join(f"{self.name}.{m.name}(...)" for m in self.modules))
        if sem.methods:
            members.append("methods " + ", ".join(f"{self.name}.{m}(...)" for m in sem.methods))
        raise TypeError(
            f"twin {self.name!r} has no step to run: {sem.name} has neither a forward method nor an entry function "
            f"and {type(self).__name__} defines no forward; call one of its members instead "
            f"({'; '.join(members)}), or declare @module(entry=...)"
        )

    no_forward.__name__ = "forward"
    return no_forward


def bound_weights(twin: RuntimeModule) -> Mapping[str, Any]:
    """The weights ``load`` bound on this node of a generated twin, by declared name (read-only).

    Only the node's own weights: a child's are ``bound_weights(twin.<child>)``. What a fast path built from
    a loaded twin (a decode engine) reads, so it never reaches into the twin's private state.

    Raises:
        TypeError: ``twin`` is not an instance of a ``@runtime_module`` class.
        NotLoadedError: the twin declares weights and ``load`` has not bound them yet.
    """
    if not is_twin_class(type(twin)):
        raise TypeError(f"bound_weights takes a generated twin (an instance of a @runtime_module class), got "
                        f"{type(twin).__name__}")
    constants = twin.__dict__.get("_tf_constants")
    if constants is None:
        declared = sorted({p.name for fn in twin.module.functions.values() for _, p in fn.declared_weights()})
        if declared:
            raise NotLoadedError(f"{type(twin).__name__} {twin._tree_path() or twin.name} has no weights bound yet "
                                 f"({', '.join(declared)}); call load(resource) on the twin (the root of its tree)")
        return MappingProxyType({})
    return constants


def is_twin_class(obj: Any) -> bool:
    """True for a class generated by ``@runtime_module``."""
    return isinstance(obj, type) and issubclass(obj, RuntimeModule) and isinstance(
        obj.__dict__.get("_tf_sem"), Module)


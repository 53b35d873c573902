"""Module: a named node of kernels (functions), child Modules and orchestration methods."""

from __future__ import annotations

import types as pytypes
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..types.shard import MeshSpec, ShardLayout, Topology, validate_topologies
from ..types.tensor_type import TensorType
from . import backends
from .errors import EntryNotFoundError, IRTypeError, ModuleDefinitionError
from .function import Converter, Function
from .source import user_source

if TYPE_CHECKING:
    from .loaded import LoadedModule

# The names a member (function, child or method) may not take: ``module`` (the accessor the spec reserves on
# every twin) and the documented public attributes that a Module, a LoadedModule (one reading of it) and a
# runtime twin answer themselves. This is the one list; docs/authoring.md shows it. ``forward`` is not here:
# it is the orchestration method a Module may define (and only as a method). Internal helpers are private
# (``_walk``, ``_child``, ...), so any other member name resolves to the member everywhere.
RESERVED_NAMES: dict[str, str] = {
    "module": "the authored Module a LoadedModule or twin stands for",
    "name": "the node's name",
    "entry": "the entry function's name",
    "functions": "the @func kernels by name",
    "modules": "the child Modules (readings, twins)",
    "methods": "the orchestration methods by name",
    "target": "the declared compile target",
    "topologies": "the declared topology levels",
    "weights": "every weight the node declares, by name",
    "constants": "the weights one reading holds",
    "load": "read the weights (Module, twin)",
    "prepare": "convert a raw checkpoint",
    "renamed": "the same Module under another name",
    "lookup": "a member by its dotted path",
    "entry_function": "the entry @func (None without one)",
    "cloned": "a copy of the Module under its own name",
}
RESERVED = frozenset(RESERVED_NAMES)


class ChildCall:
    """What a child Module's attribute name means inside a parent ``@func`` body (or a weight converter).

    ``child(...)`` calls its entry function and ``child.<function>(...)`` one of its functions, each with its
    activations alone: the child's weights come from the reading (LoadedModule) that evaluates the parent,
    or, inside a converter, from the child's prepared weights.
    """

    def __init__(self, child: Module) -> None:
        self._module = child

    def __call__(self, *args: Any) -> Any:
        child = self._module
        if child.entry is None:
            raise IRTypeError(
                f"call {child.name}", [], f"child Module {child.name!r} has no entry function; "
                f"declare @module(entry=...) on it, call one of its functions ({child.name}.<function>(...)), or "
                "call it from an orchestration method",
                user_source(),
            )
        return _record_child_call(child, child.functions[child.entry], args)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") or attr == "_module":
            raise AttributeError(attr)
        child = self._module
        if attr not in child.functions:
            raise AttributeError(f"child Module {child.name!r} has no function {attr!r}; its functions: "
                                 f"{', '.join(child.functions) or 'none'}")
        fn = child.functions[attr]
        return lambda *args: _record_child_call(child, fn, args)


def _record_child_call(child: Module, fn: Function, args: tuple[Any, ...]) -> Any:
    return fn.record_call("call_module", args, fn.activations, {"child": child.name, "function": fn.name})


class Module:
    """An IR Module: same API whether authored with ``@module`` or built directly.

    Attribute access: ``mod.<function>`` is the Function (called with every declared parameter),
    ``mod.<child>`` the child Module, ``mod.<method>`` an orchestration method bound to ``mod``.
    """

    def __init__(
        self,
        name: str,
        functions: Mapping[str, Function] | None = None,
        modules: Sequence[Module] = (),
        methods: Mapping[str, Callable[..., Any]] | None = None,
        *,
        entry: str | None = None,
        target: Any = None,
        topologies: Any = None,
    ) -> None:
        self.name = name
        self.functions: dict[str, Function] = dict(functions or {})
        self.modules: tuple[Module, ...] = tuple(modules)
        self.methods: dict[str, Callable[..., Any]] = dict(methods or {})
        self.entry = entry
        self.target = target
        self.topologies = validate_topologies(topologies, f"@module {name}")
        self._owners: list[Module] = []
        self._validate()
        self._adopt_children()
        self._bind_function_scopes()
        self.weights: dict[str, TensorType] = self._collect_weights()
        converters_of(self)  # refuses two converters for one weight now, not at prepare time
        self._check_placement()

    # -- construction ------------------------------------------------------------------------
    def _validate(self) -> None:
        where = f"@module {self.name}"
        if not (self.functions or self.modules or self.methods):
            raise ModuleDefinitionError(f"{where} is empty: declare at least one @func, child Module or method")
        seen: dict[str, str] = {}
        members = [(n, "function") for n in self.functions] + [(m.name, "child Module") for m in self.modules]
        members += [(n, "method") for n in self.methods]
        for member, kind in members:
            if member in seen:
                raise ModuleDefinitionError(
                    f"{where}: the name {member!r} is used twice at one level ({seen[member]} and {kind}); "
                    "rename one (children in a tuple take their names from .renamed(...))"
                )
            clash = reserved_clash(member)
            if clash:
                raise ModuleDefinitionError(f"{where}: {kind} {member!r} {clash}; rename the {kind}")
            seen[member] = kind
        if "forward" in self.functions or any(m.name == "forward" for m in self.modules):
            kind = "a @func" if "forward" in self.functions else "a child Module"
            raise ModuleDefinitionError(
                f"{where}: {kind} may not be named 'forward', the name of the step's orchestration method; name "
                "the kernel and declare it with @module(entry=...), or write forward as a plain method"
            )
        if self.entry is not None and self.entry not in self.functions:
            raise EntryNotFoundError(
                f"{where}: entry={self.entry!r} names no function; functions: "
                f"{', '.join(self.functions) or 'none'}"
            )

    def _adopt_children(self) -> None:
        for child in self.modules:
            child._owners.append(self)
            child._effective_topologies()  # two owners with different hierarchies are refused now

    def _effective_topologies(self) -> tuple[Topology, ...] | None:
        """The topology hierarchy this Module runs under: its own, else its owner's (None: none declares one).

        A child declaring none inherits its owner's; one reached from two owners whose hierarchies differ
        is refused (give it its own topologies=, or a copy per owner with ``.renamed(...)``).
        """
        if self.topologies is not None:
            return self.topologies
        found: tuple[Topology, ...] | None = None
        first: Module | None = None
        for owner in self._owners:
            eff = owner._effective_topologies()
            if first is None:
                found, first = eff, owner
            elif eff != found:
                raise ModuleDefinitionError(
                    f"@module {self.name} declares no topologies and is owned by {first.name} (hierarchy {found}) and "
                    f"{owner.name} (hierarchy {eff}); declare its own topologies= or give each owner its own copy "
                    "(.renamed(...))")
        return found

    def _check_placement(self) -> None:
        """Refuse a ``with Mesh(...)`` scope (or a layout) that does not fit the effective topology hierarchy.

        Runs over the functions traced so far, and over the children.
        """
        hierarchy = self._effective_topologies()
        if hierarchy is not None:
            for function in self.functions.values():
                for fn in (function, *function.variants):
                    if fn._graph is not None:
                        check_function_meshes(fn, hierarchy, self.name)
        for child in self.modules:
            child._check_placement()

    def _bind_function_scopes(self) -> None:
        scope: dict[str, Any] = dict(self.functions)
        scope.update({m.name: ChildCall(m) for m in self.modules})
        for fn in self.functions.values():
            fn.bind_scope(scope)

    def _collect_weights(self) -> dict[str, TensorType]:
        weights: dict[str, TensorType] = {}
        owner: dict[str, str] = {}
        for function in self.functions.values():
            for fn, p in function.declared_weights():
                if p.name in weights and not weights[p.name].same_as(p.type):
                    raise ModuleDefinitionError(
                        f"@module {self.name}: weight {p.name!r} is declared {weights[p.name]} in "
                        f"{owner[p.name]} and {p.type} in {fn.name}; one name is one weight"
                    )
                weights.setdefault(p.name, p.type)
                owner.setdefault(p.name, fn.name)
        return weights

    def _trace_all(self) -> None:
        """Trace every function (and child) now, so authoring errors surface at definition."""
        for fn in self.functions.values():
            fn.trace_now()
        for child in self.modules:
            child._trace_all()
        self._check_placement()

    def renamed(self, name: str) -> Module:
        """The same Module under another name: functions shared, the child tree copied, so that each copy
        has an owner of its own (from which a child without topologies inherits its hierarchy)."""
        clone = object.__new__(Module)
        clone.__dict__.update(self.__dict__)
        clone.name = name
        clone._owners = []
        clone.modules = tuple(c.renamed(c.name) for c in self.modules)
        clone._adopt_children()
        return clone

    def cloned(self) -> Module:
        """A copy of this Module under its own name (``renamed(self.name)``): functions shared, the child tree its
        own, so that the copy can be adopted by another parent or read on its own (``.cloned().load(resource)``,
        as model sources written for the reference implementation do)."""
        return self.renamed(self.name)

    # -- access ------------------------------------------------------------------------------
    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        d = self.__dict__
        if attr in d.get("functions", {}):
            return d["functions"][attr]
        for child in d.get("modules", ()):
            if child.name == attr:
                return child
        if attr in d.get("methods", {}):
            return pytypes.MethodType(d["methods"][attr], self)
        raise AttributeError(f"Module {d.get('name')!r} has no function, child or method {attr!r}; "
                             f"it has {self._member_list()}")

    def _member_list(self) -> str:
        parts = []
        if self.functions:
            parts.append("functions " + ", ".join(self.functions))
        if self.modules:
            parts.append("children " + ", ".join(m.name for m in self.modules))
        if self.methods:
            parts.append("methods " + ", ".join(self.methods))
        return "; ".join(parts) or "nothing"

    def _child(self, name: str) -> Module:
        """The child Module called ``name``."""
        for m in self.modules:
            if m.name == name:
                return m
        raise KeyError(f"Module {self.name!r} has no child {name!r}; children: "
                       f"{', '.join(m.name for m in self.modules) or 'none'}")

    def lookup(self, name: str) -> Function | Module | Callable[..., Any]:
        """Resolve a dotted path (``"layer0.attn.qkv"``, or one name: ``"self_attention"``) to a child, a function or
        a bound method. Raises KeyError naming the path's first missing member and what its parent has."""
        return self._lookup(name)

    def entry_function(self) -> Function | None:
        """The entry ``@func`` (``@module(entry=...)``), or None for a Module without one."""
        return self.functions[self.entry] if self.entry is not None else None

    def _lookup(self, name: str) -> Function | Module | Callable[..., Any]:
        """Resolve a dotted path (``"layer0.attn.qkv"``) to a child, a function or a bound method."""
        node: Module = self
        parts = name.split(".")
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if last and part in node.functions:
                return node.functions[part]
            if last and part in node.methods:
                return pytypes.MethodType(node.methods[part], node)
            try:
                node = node._child(part)
            except KeyError:
                raise KeyError(f"{name!r}: {'.'.join(parts[:i]) or node.name} has no member {part!r}; "
                               f"it has {node._member_list()}") from None
        return node

    def _walk(self, path: str = "") -> Iterator[tuple[str, Module]]:
        """Every Module of the tree with its dotted path ('' for the root), parents first."""
        yield path, self
        for m in self.modules:
            yield from m._walk(f"{path}.{m.name}" if path else m.name)

    # -- running -----------------------------------------------------------------------------
    def forward(self, *args: Any) -> Any:
        """Run the step: the ``forward`` method if defined, else the entry function (all params)."""
        if "forward" in self.methods:
            return self.methods["forward"](self, *args)
        if self.entry is not None:
            return self.functions[self.entry](*args)
        raise TypeError(
            f"Module {self.name!r} has neither a forward method nor an entry function, so it has no "
            f"step to run; call one of its members instead ({self._member_list()}), or declare "
            f"@module(entry=...)"
        )

    def __call__(self, *args: Any) -> Any:
        return self.forward(*args)

    def load(self, resource: Any) -> LoadedModule:
        """Read this tree's weights from ``resource`` into a new LoadedModule (this Module is unchanged)."""
        from .loaded import load_module

        return load_module(self, resource)

    def prepare(self, raw: Any, out_dir: str, *, device: str = "cpu",
                allow_unused: bool | Iterable[str] = False) -> None:
        """Convert raw checkpoint tensors into the clean directory ``load`` reads (spec 1.1.2).

        ``out_dir`` appears all at once and replaces only an earlier prepare's output. Every tensor ``raw``
        holds must be read by some declared weight unless ``allow_unused`` is True, or names it among its
        glob patterns of raw keys (known extras such as ``"*.rotary_emb.inv_freq"``). The work is done by
        :func:`tilefoundry.runtime.prepare.prepare_module`.
        """
        backends.prepare(self, raw, out_dir, device=device, allow_unused=allow_unused)

    def __repr__(self) -> str:
        return f"<Module {self.name}: {self._member_list()}>"


# Reserved names an authored Module's member may still take (spec 1.1): ``module`` is a LoadedModule's and a twin's
# accessor for the Module, so on a reading such a member is reached through ``lookup("module")``, and
# ``@runtime_module`` refuses to build a twin of a Module that has one.
AUTHORABLE = frozenset({"module"})


def reserved_clash(name: str) -> str | None:
    """Why a member may not be called ``name`` (None when it may): a reserved name, or an internal one."""
    if name in AUTHORABLE:
        return None
    if name in RESERVED:
        listed = ", ".join(RESERVED_NAMES)
        return (f"takes the reserved name {name!r} ({RESERVED_NAMES[name]}); every Module, LoadedModule and twin "
                f"answers these names itself: {listed}")
    if name != "forward" and any(name in vars(cls) for cls in (Module, LoadedModule)):
        return f"clashes with the internal attribute {name!r} of Module / LoadedModule"
    return None


def variant_only_weights(mod: Module) -> frozenset[str]:
    """Names of the weights only dispatch variants declare: a reading needs one only when its variant runs, so
    reading, loading and preparing take them when the checkpoint holds them and pass over them otherwise."""
    plain: set[str] = set()
    variant: set[str] = set()
    for function in mod.functions.values():
        for fn, p in function.declared_weights():
            (variant if fn is not function else plain).add(p.name)
    return frozenset(variant - plain)


def check_function_meshes(fn: Function, hierarchy: tuple[Topology, ...], module: str) -> None:
    """Every mesh a function places values over (scopes, parameter layouts) fits ``hierarchy``."""
    where = f"@module {module}: {fn.name}"
    meshes: list[tuple[MeshSpec, Any]] = []
    for p in fn.params:
        if isinstance(p.type.layout, ShardLayout):
            meshes.append((p.type.layout.mesh, f"parameter {p.name}"))
    for node in fn.graph.nodes:
        if node.meshes:
            meshes.append((MeshSpec.nest(node.meshes), node.loc))
    for mesh, at in dict.fromkeys(meshes):
        try:
            mesh.check_fits(hierarchy, where)
        except ValueError as e:
            raise ModuleDefinitionError(f"{e}\n  at {at}") from None


def converters_of(mod: Module) -> dict[str, Converter]:
    """Every weight converter registered on the Module's functions (and their variants), by weight name.

    A weight shared by two functions is one weight, so converters registered for it on both are refused.
    """
    out: dict[str, Converter] = {}
    for fn in mod.functions.values():
        try:
            converters = fn.all_converters()
        except ModuleDefinitionError as e:
            raise ModuleDefinitionError(f"@module {mod.name}: {e}") from None
        for weight, conv in converters.items():
            if weight in out:
                raise ModuleDefinitionError(
                    f"@module {mod.name}: weight {weight!r} has two converters ({out[weight].owner.name}."
                    f"converter at {out[weight].loc} and {conv.owner.name}.converter at {conv.loc}); one weight takes "
                    "one converter, so keep one"
                )
            out[weight] = conv
    return out


# LoadedModule is part of this module's public surface (``tilefoundry.ir.core.module.LoadedModule``); it
# lives in loaded.py, which builds on Module, so it is imported after Module is defined.
from .loaded import LoadedModule  # noqa: E402

__all__ = ["RESERVED_NAMES", "ChildCall", "LoadedModule", "Module", "converters_of", "reserved_clash",
           "variant_only_weights"]

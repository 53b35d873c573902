"""RuntimeModule: the runtime instance of a node, with kernel bodies instead of ``@func`` bodies (spec 1.1)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..ir.core.module import Module

__all__ = ["RuntimeModule"]


class RuntimeModule:
    """A runtime twin node: a name, an optional entry, child twins, a ``forward`` and a recursive ``load``.

    Authored like a ``torch.nn.Module``: subclass it, build the child tree in ``__init__`` (children passed
    as ``modules=``), write the composition in ``forward``. ``@runtime_module(sem)`` generates such a
    subclass mechanically from a semantic Module and is the normal path; a direct subclass is for special
    cases (a compiled entry, a hand-written composition).

    Lifecycle: construct (structure) -> ``load(resource)`` (weights) -> call. The base class holds no weights
    and no resource and never runs the HIR evaluator. A child is reachable as ``self.<child name>``.

    Args:
        name: the node name, mirroring the semantic Module's.
        entry: the semantic Module's entry function name (metadata), or None.
        modules: the child twins, each a RuntimeModule instance with a distinct name, owned by this node
            only.
    """

    name: str
    entry: str | None
    modules: tuple[RuntimeModule, ...]
    _authored: Module | None = None
    _owner: RuntimeModule | None = None

    def __init__(self, name: str, entry: str | None = None, modules: Iterable[RuntimeModule] = ()) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"RuntimeModule name must be a non-empty str, got {name!r}")
        if entry is not None and not isinstance(entry, str):
            raise TypeError(f"RuntimeModule {name!r}: entry must be a function name (str) or None, got {entry!r}")
        if isinstance(modules, RuntimeModule) or isinstance(modules, (str, bytes)):
            raise TypeError(f"RuntimeModule {name!r}: modules= takes a sequence of child RuntimeModules")
        children = tuple(modules)
        seen: set[str] = set()
        for child in children:
            if isinstance(child, type) and issubclass(child, RuntimeModule):
                raise TypeError(
                    f"RuntimeModule {name!r}: modules= holds the class {child.__name__}; construct it and pass "
                    "the instance"
                )
            if not isinstance(child, RuntimeModule):
                raise TypeError(
                    f"RuntimeModule {name!r}: modules= holds a {type(child).__name__}, not a RuntimeModule instance"
                )
            if child.name in seen:
                raise ValueError(
                    f"RuntimeModule {name!r}: two children are named {child.name!r}; children are addressed by "
                    "name (weights under resource.subtree(name)), so names must be distinct"
                )
            if child._owner is not None:
                raise ValueError(
                    f"RuntimeModule {name!r}: child {child.name!r} already belongs to {child._owner.name!r}; a twin "
                    "binds its weights in place, so construct one instance per owner"
                )
            seen.add(child.name)
        self.name = name
        self.entry = entry
        self.modules = children
        for child in children:
            child._owner = self

    @property
    def module(self) -> Module | None:
        """The authored Module this twin was generated from, or None.

        None for a node that stands for no single authored Module (a compiled entry, a hand-written
        subclass). A caller that needs the authored Module must refuse on None rather than substitute one.
        """
        return self._authored

    def lookup(self, name: str) -> Any:
        """A member by its dotted path (``"layer0.attend"``): a kernel, a child twin or a method, as attribute access
        resolves it. Raises KeyError naming the first missing member."""
        node: Any = self
        parts = name.split(".")
        for i, part in enumerate(parts):
            if part.startswith("_") or not hasattr(node, part):
                raise KeyError(f"{name!r}: {'.'.join(parts[:i]) or self.name} has no member {part!r}")
            node = getattr(node, part)
        return node

    def entry_function(self) -> Any:
        """The entry kernel (``self.<entry>``), or None for a twin without an entry."""
        return getattr(self, self.entry) if self.entry is not None else None

    def forward(self, *args: Any) -> Any:
        """The step. A subclass writes it; the base class has no composition to run."""
        raise NotImplementedError(
            f"{type(self).__name__} ({self.name!r}) defines no forward; write forward(self, *args) in the "
            "subclass, composing its kernels and children, or generate the class with @runtime_module(sem)"
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Delegates to :meth:`forward`."""
        return self.forward(*args, **kwargs)

    def load(self, resource: Any) -> RuntimeModule:
        """Bind weights from ``resource``: recurse into each child with ``resource.subtree(child.name)``.

        The base class resolves nothing itself (a node without children, such as a compiled entry, loads
        nothing). Returns ``self``, so ``Twin().load(resource)`` reads naturally.
        """
        if self.modules and not callable(getattr(resource, "subtree", None)):
            raise TypeError(
                f"{self.name}.load takes a RuntimeResource (DictResource, SafetensorsResource), got "
                f"{type(resource).__name__}"
            )
        for child in self.modules:
            child.load(resource.subtree(child.name))
        return self

    def _walk(self, path: str = "") -> Iterator[tuple[str, RuntimeModule]]:
        """Every node of this tree with its dotted path ('' for this one), parents first."""
        yield path, self
        for child in self.modules:
            yield from child._walk(f"{path}.{child.name}" if path else child.name)

    def _tree_path(self) -> str:
        """The dotted path of this node from the root of the tree it belongs to ('' for the root)."""
        parts: list[str] = []
        node: RuntimeModule | None = self
        while node is not None and node._owner is not None:
            parts.append(node.name)
            node = node._owner
        return ".".join(reversed(parts))

    def __getattr__(self, attr: str) -> Any:
        # Reached only when ordinary lookup fails: a child by name.
        if attr.startswith("__"):
            raise AttributeError(attr)
        for child in self.__dict__.get("modules", ()):
            if child.name == attr:
                return child
        children = ", ".join(c.name for c in self.__dict__.get("modules", ())) or "none"
        raise AttributeError(
            f"{type(self).__name__} ({self.__dict__.get('name', '?')!r}) has no attribute or child {attr!r}; "
            f"children: {children}"
        )

    def __repr__(self) -> str:
        kids = ", ".join(c.name for c in self.modules)
        return f"<{type(self).__name__} {self.name!r}{': children ' + kids if kids else ''}>"

"""A twin's kernel: the class-level slot a ``@runtime_func`` (or RuntimeFunction) occupies, and its bound call.

On a ``@runtime_module`` twin, ``twin.<function>`` is a :class:`BoundKernel`: the caller passes activations
alone and the weights are filled in by name from what ``twin.load`` bound, so the kernel body itself is called
with every declared parameter, in the semantic ``@func``'s order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .errors import NotLoadedError
from .function import RuntimeFunction

if TYPE_CHECKING:
    from ..ir.core.function import Function
    from .module import RuntimeModule

__all__ = ["BoundKernel", "KernelSlot"]


class KernelSlot:
    """The class attribute standing for one kernel of a generated twin class.

    Attributes:
        name: the semantic function name.
        impl: the body: the ``@runtime_func`` method (called with the twin as ``self``) or a RuntimeFunction
            instance (called without it).
    """

    def __init__(self, name: str, impl: Callable[..., Any] | RuntimeFunction) -> None:
        self.name = name
        self.impl = impl

    def __get__(self, twin: RuntimeModule | None, owner: type | None = None) -> Any:
        if twin is None:
            return self
        return BoundKernel(twin, self)

    def __repr__(self) -> str:
        kind = "RuntimeFunction" if isinstance(self.impl, RuntimeFunction) else "@runtime_func"
        return f"<kernel slot {self.name} ({kind})>"


class BoundKernel:
    """One kernel of one twin instance, called with activations alone."""

    def __init__(self, twin: RuntimeModule, slot: KernelSlot) -> None:
        self.twin = twin
        self.slot = slot

    @property
    def function(self) -> Function:
        """The semantic ``@func`` this kernel stands for (of the twin's authored Module)."""
        module = self.twin.module
        assert module is not None, "a generated twin always knows its authored Module"
        return module.functions[self.slot.name]

    def __call__(self, *acts: Any) -> Any:
        fn = self.function
        where = f"{_where(self.twin)}.{fn.name}"
        constants = self.twin._tf_constants
        if fn.weights and constants is None:
            raise NotLoadedError(
                f"{where} needs the weights {', '.join(p.name for p in fn.weights)}, which are bound by load; "
                f"call load(resource) on the twin (the root of its tree) before calling it"
            )
        args = fn.fill_weights(where, acts, constants or {})
        impl = self.slot.impl
        if isinstance(impl, RuntimeFunction):
            return impl(*args)
        return impl(self.twin, *args)

    def __repr__(self) -> str:
        return f"<kernel {_where(self.twin)}.{self.slot.name}>"


def _where(twin: RuntimeModule) -> str:
    path = twin._tree_path()
    return f"{type(twin).__name__} {path or twin.name}"

"""RuntimeFunction: the base class of a function body (spec 1.1.1)."""

from __future__ import annotations

from typing import Any

from .abi import EntryABI

__all__ = ["RuntimeFunction"]


class RuntimeFunction:
    """The base of every function body: a subclass overrides ``__call__`` with a real implementation.

    ``type`` is the body's ABI contract, an :class:`EntryABI` (for a body standing for a ``@func``,
    ``entry_abi_of(that_function)``). A torch / triton / CUDA implementation takes whatever it needs at
    construction (compiled kernels, converted tables) and returns its value(s) from ``__call__``.

    Inside a ``@runtime_module`` class, an instance assigned to a class attribute stands for the
    ``@runtime_func`` of that name: its ``type`` must equal ``entry_abi_of`` of the semantic function, and it
    is called with one positional argument per ``type.params`` entry, the weights filled in by name from
    what the twin's ``load`` bound.
    """

    def __init__(self, type: EntryABI) -> None:  # noqa: A002 - the spec names the ABI field ``type``
        if not isinstance(type, EntryABI):
            raise TypeError(
                f"{self.__class__.__name__}(type=...) takes an EntryABI, got {type.__class__.__name__}; derive one "
                "with entry_abi_of(function)"
            )
        self.type = type

    def __call__(self, *acts: Any) -> Any:
        """Run the body. The base class has none: write a subclass that overrides ``__call__``."""
        cls = self.__class__
        if cls is RuntimeFunction:
            raise NotImplementedError(
                f"RuntimeFunction is the base class and has no body for {self.type.name!r}; write a subclass "
                f"(class {_camel(self.type.name)}Body(RuntimeFunction)) whose __call__(self, *acts) runs the "
                "torch / triton / CUDA implementation, and instantiate that"
            )
        raise NotImplementedError(
            f"{cls.__name__} does not override __call__, so it has no body for {self.type.name!r}; define "
            f"{cls.__name__}.__call__(self, *acts) returning the value(s) of {self.type.name}"
        )

    def __repr__(self) -> str:
        return f"<{self.__class__.__name__} {self.type}>"


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_")) or "Kernel"

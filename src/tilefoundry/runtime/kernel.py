"""A twin's kernel: the class-level slot a ``@runtime_func`` (or RuntimeFunction) occupies, and its bound call.

On a ``@runtime_module`` twin, ``twin.<function>`` is a :class:`BoundKernel`: the caller passes activations
alone and the weights are filled in by name from what ``twin.load`` bound, so the kernel body itself is called
with every declared parameter, in the semantic ``@func``'s order.

A twin is held to its ``@func``'s declaration exactly as the reference runner is: before the body runs, every
argument is bound against its declared type by the evaluator's own binding routine (dtype, rank, static
extents, DimVar ranges and agreement; the message names the kernel and the parameter), and what the body
returns must be the declared structure: the same nesting of tuples, a tensor of the declared dtype and rank
at every leaf, and the declared extents wherever the arguments fix them. Anything else is refused naming the
kernel, rather than passed on to torch or to the caller.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from ..evaluator.run import bind_inputs
from ..ir.types.tensor_type import TensorType
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
        bindings: dict[str, int] = {}
        try:
            args = bind_inputs(fn, fn.params, args, bindings)
        except (TypeError, ValueError) as error:
            raise type(error)(f"{where}: {error}") from None
        impl = self.slot.impl
        result = impl(*args) if isinstance(impl, RuntimeFunction) else impl(self.twin, *args)
        problem = _result_problem(result, fn.output_types, "output", bindings)
        if problem is not None:
            raise TypeError(
                f"{where} returned {problem}; a kernel returns what @func {fn.name} declares: "
                f"{_declared_text(fn.output_types)}"
            )
        return result

    def __repr__(self) -> str:
        return f"<kernel {_where(self.twin)}.{self.slot.name}>"


def _where(twin: RuntimeModule) -> str:
    path = twin._tree_path()
    return f"{type(twin).__name__} {path or twin.name}"


def _result_problem(value: Any, declared: Any, path: str, bindings: dict[str, int]) -> str | None:
    """Where ``value`` first departs from the declared (nested) result types, or None when it matches."""
    if isinstance(declared, TensorType):
        if not isinstance(value, torch.Tensor):
            return f"{_kind(value)} at {path}, where a tensor ({declared}) is declared"
        if value.dtype != declared.dtype.torch_dtype or value.dim() != declared.rank:
            return f"a {value.dtype} tensor of shape {tuple(value.shape)} at {path}, declared {declared}"
        try:
            want = declared.concrete_shape(bindings)
        except KeyError:  # an extent no argument fixes
            return None
        if tuple(value.shape) != want:
            return f"a tensor of shape {tuple(value.shape)} at {path}, declared {declared} = {want}"
        return None
    if not isinstance(value, tuple) or len(value) != len(declared):
        return f"{_kind(value)} at {path}, where a tuple of {len(declared)} is declared"
    for i, (item, want) in enumerate(zip(value, declared)):
        problem = _result_problem(item, want, f"{path}[{i}]", bindings)
        if problem is not None:
            return problem
    return None


def _kind(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return "a tensor"
    if isinstance(value, tuple):
        return f"a tuple of {len(value)}"
    if value is None:
        return "None"
    return f"a {type(value).__name__}"


def _declared_text(declared: Any) -> str:
    if isinstance(declared, TensorType):
        return str(declared)
    return "(" + ", ".join(_declared_text(d) for d in declared) + ("," if len(declared) == 1 else "") + ")"

"""Buffers (named tensors in gmem / smem / rmem with a layout) and literals, the operands of TIR calls."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from ..ir.types.dim import Dim, product
from ..ir.types.dtype import DType
from ..ir.types.storage import Storage
from .layout import TLayout


@dataclass(eq=False)
class Buffer:
    """A named tensor of the lowered program.

    Attributes:
        name: the identifier generated code declares it under.
        dtype: element type.
        storage: gmem (a parameter's memory), smem (shared by a CTA's threads) or rmem (one instance's
            registers).
        shape: the logical shape the program sees (for a row-wise program: one row's).
        layout: how its elements are laid out and distributed (the ShardLayout generated code builds).
    """

    name: str
    dtype: DType
    storage: Storage
    shape: tuple[Dim, ...]
    layout: TLayout

    def local_size(self) -> Dim:
        """Elements one instance allocates: the product of the modes whose stride is not 0 (an rmem buffer's
        split modes have stride 0: each instance stores only its part)."""
        return product(d for d, s in zip(self.layout.shape, self.layout.stride) if not _is_zero(s))

    def __str__(self) -> str:
        dims = ", ".join(str(d) for d in self.shape)
        return f"{self.name}: {self.storage} {self.dtype}[{dims}] {self.layout}"


def _is_zero(d: Dim) -> bool:
    return isinstance(d, int) and d == 0


@dataclass(frozen=True)
class Literal:
    """A scalar operand, emitted in ``dtype`` (never a wider type: no promotion to double)."""

    value: float | int | bool
    dtype: DType

    def __str__(self) -> str:
        return f"{self.value!r}:{self.dtype}"


Operand = Union[Buffer, Literal]  # noqa: UP007 - a runtime alias, read on Python 3.10 too

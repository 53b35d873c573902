"""TensorType: the type every HIR value and parameter carries."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .dim import Dim, check_dim, dims_equal, dimvars_of, evaluate_dim
from .dim import DimVar as DimVar
from .dtype import DType, dtype_of
from .storage import Storage, storage_of


@dataclass(frozen=True)
class TensorType:
    """Shape (ints and DimVar expressions), element type, optional layout and storage kind."""

    shape: tuple[Dim, ...]
    dtype: DType
    layout: Any = None
    storage: Storage = field(default=Storage.gmem)

    def __init__(
        self,
        shape: Sequence[Dim],
        dtype: str | DType,
        layout: Any = None,
        storage: str | Storage = Storage.gmem,
    ) -> None:
        if isinstance(shape, (int, str)) or not isinstance(shape, Sequence):
            raise TypeError(f"shape must be a tuple of dims, got {shape!r}")
        dims = tuple(check_dim(d, f"shape {tuple(shape)!r}") for d in shape)
        object.__setattr__(self, "shape", dims)
        object.__setattr__(self, "dtype", dtype_of(dtype))
        object.__setattr__(self, "layout", layout)
        object.__setattr__(self, "storage", storage_of(storage))

    @property
    def rank(self) -> int:
        """Number of axes."""
        return len(self.shape)

    def with_(self, **changes: Any) -> TensorType:
        """A copy with some fields replaced."""
        fields = {"shape": self.shape, "dtype": self.dtype, "layout": self.layout, "storage": self.storage}
        fields.update(changes)
        return TensorType(**fields)

    def dimvars(self) -> set[DimVar]:
        """Every DimVar the shape mentions."""
        return dimvars_of(self.shape)

    def concrete_shape(self, bindings: Mapping[str, int]) -> tuple[int, ...]:
        """The shape with DimVars replaced by their bound extents."""
        return tuple(evaluate_dim(d, bindings) for d in self.shape)

    def same_as(self, other: TensorType) -> bool:
        """Equal shape (canonical dims) and dtype; layout and storage ignored."""
        return (
            self.dtype == other.dtype
            and self.rank == other.rank
            and all(dims_equal(a, b) for a, b in zip(self.shape, other.shape))
        )

    def __str__(self) -> str:
        dims = ", ".join(str(d) for d in self.shape)
        if len(self.shape) == 1:
            dims += ","
        extra = "" if self.storage is Storage.gmem else f", {self.storage}"
        if self.layout is not None:
            text = getattr(self.layout, "canonical_text", None)
            extra += f", layout={text() if callable(text) else self.layout}"
        return f"Tensor[({dims}), {self.dtype}{extra}]"

"""Shared pieces of type rules: dtype agreement, broadcasting and axis normalisation."""

from __future__ import annotations

from collections.abc import Sequence

from ..core.errors import OpTypeError
from ..types.dim import Dim, dims_equal
from ..types.dtype import DType
from ..types.tensor_type import TensorType


def same_dtype(types: Sequence[TensorType]) -> DType:
    """The one dtype all operands share; there is no implicit promotion."""
    dtypes = {t.dtype for t in types}
    if len(dtypes) != 1:
        names = " vs ".join(str(t.dtype) for t in types)
        raise OpTypeError(f"operand dtypes disagree ({names}); no implicit promotion, use tf.cast")
    return types[0].dtype


def require_float(t: TensorType, what: str = "operand") -> None:
    """Refuse a non-floating operand."""
    if not t.dtype.is_float:
        raise OpTypeError(f"{what} must be a floating-point tensor, got {t.dtype}")


def require_int(t: TensorType, what: str) -> None:
    """Refuse a non-integer operand (index tensors)."""
    if not t.dtype.is_int:
        raise OpTypeError(f"{what} must be an integer tensor, got {t.dtype}")


def require_rank(t: TensorType, rank: int | tuple[int, ...], what: str = "operand") -> None:
    """Refuse an operand of another rank."""
    ranks = (rank,) if isinstance(rank, int) else rank
    if t.rank not in ranks:
        want = " or ".join(str(r) for r in ranks)
        raise OpTypeError(f"{what} must have rank {want}, got rank {t.rank} {t}")


def broadcast(shapes: Sequence[tuple[Dim, ...]]) -> tuple[Dim, ...]:
    """Numpy-style broadcast of symbolic shapes: dims agree or one of them is 1."""
    rank = max(len(s) for s in shapes)
    out: list[Dim] = []
    for i in range(rank):
        dim: Dim = 1
        for s in shapes:
            j = i - (rank - len(s))
            if j < 0:
                continue
            d = s[j]
            if dims_equal(d, 1):
                continue
            if dims_equal(dim, 1):
                dim = d
            elif not dims_equal(dim, d):
                raise OpTypeError(f"shapes do not broadcast: axis {i} has extents {dim} and {d}")
        out.append(dim)
    return tuple(out)


def norm_axis(axis: int, rank: int, what: str = "axis") -> int:
    """A non-negative axis index, refusing one out of range."""
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise OpTypeError(f"{what} must be an int, got {axis!r}")
    if not -rank <= axis < rank:
        raise OpTypeError(f"{what} {axis} is out of range for rank {rank}")
    return axis % rank


def check_dims_equal(a: Dim, b: Dim, what: str) -> None:
    """Refuse two extents that are not provably equal."""
    if not dims_equal(a, b):
        raise OpTypeError(f"{what}: extents {a} and {b} differ")

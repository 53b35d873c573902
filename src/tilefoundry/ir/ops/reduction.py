"""Reductions along axes: reduce, softmax, argmax, topk."""

from __future__ import annotations

from enum import Enum
from typing import Any

from ..core.errors import OpTypeError
from ..core.op import register_op
from ..types.dtype import i64
from ..types.tensor_type import TensorType
from .rules import norm_axis, require_float


class ReduceKind(str, Enum):
    """How ``reduce`` combines the elements of its axes; ``tf.reduce(kind=...)`` takes these or their names.

    Over an axis of extent 0 each kind gives its identity: sum 0, mean NaN (as torch), max the lowest value
    (-inf, or the dtype's lowest where it has no infinity), min the highest, abs_max 0.
    """

    sum = "sum"
    mean = "mean"
    max = "max"
    min = "min"
    abs_max = "abs_max"
    # The same members under upper-case names (model sources written for the reference implementation use them):
    # aliases, so ReduceKind.ABS_MAX is ReduceKind.abs_max.
    SUM = "sum"
    MEAN = "mean"
    MAX = "max"
    MIN = "min"
    ABS_MAX = "abs_max"

    def __str__(self) -> str:
        return self.value


REDUCE_KINDS = tuple(k.value for k in ReduceKind)


def reduce_kind(kind: Any) -> str:
    """The canonical attribute (the plain name) of a ReduceKind member or a kind name; OpTypeError otherwise."""
    if isinstance(kind, ReduceKind):
        return kind.value
    if isinstance(kind, str) and kind.lower() in REDUCE_KINDS:
        return kind.lower()  # "ABS_MAX", as the member's upper-case name, too
    raise OpTypeError(f"unknown reduce kind {kind!r}; valid: {', '.join(REDUCE_KINDS)} (names in either case, or "
                      "ReduceKind members)")


@register_op("reduce", "reduction")
def _reduce(types: tuple[TensorType, ...], attrs: dict[str, Any]) -> TensorType:
    (x,) = types
    kind = reduce_kind(attrs.get("kind"))
    attrs["kind"] = kind
    if x.dtype.is_bool:
        raise OpTypeError("reduce is not defined on bool tensors")
    if kind == "mean":
        require_float(x, "a mean's operand")
    axes = attrs.get("axes")
    if isinstance(axes, int):
        axes = (axes,)
    if not axes:
        raise OpTypeError("axes must name at least one axis")
    norm = tuple(sorted({norm_axis(a, x.rank) for a in axes}))
    if len(norm) != len(axes):
        raise OpTypeError(f"axes {axes} name one axis twice")
    attrs["axes"] = norm
    keep = bool(attrs.get("keepdim", True))
    attrs["keepdim"] = keep
    shape = tuple((1 if keep else None) if i in norm else d for i, d in enumerate(x.shape))
    return TensorType(tuple(d for d in shape if d is not None), x.dtype)


@register_op("softmax", "reduction")
def _softmax(types: tuple[TensorType, ...], attrs: dict[str, Any]) -> TensorType:
    (x,) = types
    require_float(x)
    attrs["axis"] = norm_axis(attrs.get("axis", -1), x.rank)
    return TensorType(x.shape, x.dtype)


@register_op("argmax", "reduction")
def _argmax(types: tuple[TensorType, ...], attrs: dict[str, Any]) -> TensorType:
    (x,) = types
    if x.dtype.is_bool:
        raise OpTypeError("argmax is not defined on bool tensors")
    axis = norm_axis(attrs.get("axis", -1), x.rank)
    attrs["axis"] = axis
    return TensorType(x.shape[:axis] + x.shape[axis + 1:], i64)


@register_op("topk", "reduction")
def _topk(types: tuple[TensorType, ...], attrs: dict[str, Any]) -> tuple[TensorType, TensorType]:
    (x,) = types
    if x.dtype.is_bool:
        raise OpTypeError("topk is not defined on bool tensors")
    axis = norm_axis(attrs.get("axis", -1), x.rank)
    attrs["axis"] = axis
    k = attrs.get("k")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise OpTypeError(f"k must be a positive int, got {k!r}")
    if isinstance(x.shape[axis], int) and k > x.shape[axis]:
        raise OpTypeError(f"k={k} exceeds the extent {x.shape[axis]} of axis {axis}")
    shape = x.shape[:axis] + (k,) + x.shape[axis + 1:]
    return TensorType(shape, x.dtype), TensorType(shape, i64)

"""Ops that create tensors: arange, zeros, full_like."""

from __future__ import annotations

from typing import Any

from ..core.errors import OpTypeError
from ..core.op import register_op
from ..types.dim import check_dim, floordiv
from ..types.dtype import dtype_of
from ..types.tensor_type import TensorType


def _dtype(attrs: dict[str, Any]) -> None:
    try:
        attrs["dtype"] = dtype_of(attrs["dtype"])
    except TypeError as e:
        raise OpTypeError(str(e)) from None


@register_op("arange", "creation")
def _arange(types: tuple[TensorType, ...], attrs: dict[str, Any]) -> TensorType:
    _dtype(attrs)
    try:
        start = check_dim(attrs["start"], "arange start")
        end = check_dim(attrs["end"], "arange end")
    except (TypeError, ValueError) as e:
        raise OpTypeError(str(e)) from None
    step = attrs["step"]
    if isinstance(step, bool) or not isinstance(step, int) or step < 1:
        raise OpTypeError(f"step must be a positive int, got {step!r}")
    attrs.update(start=start, end=end)
    length = floordiv(end - start + (step - 1), step)
    if isinstance(length, int) and length < 0:
        raise OpTypeError(f"end {end} is below start {start}")
    return TensorType((length,), attrs["dtype"])


@register_op("zeros", "creation")
def _zeros(types: tuple[TensorType, ...], attrs: dict[str, Any]) -> TensorType:
    _dtype(attrs)
    try:
        return TensorType(tuple(attrs["shape"]), attrs["dtype"])
    except (TypeError, ValueError) as e:
        raise OpTypeError(str(e)) from None


@register_op("full_like", "creation")
def _full_like(types: tuple[TensorType, ...], attrs: dict[str, Any]) -> TensorType:
    (x,) = types
    value = attrs.get("value")
    if isinstance(value, bool) != x.dtype.is_bool or not isinstance(value, (int, float)):
        raise OpTypeError(f"fill value {value!r} does not suit a {x.dtype} tensor")
    if isinstance(value, float) and not x.dtype.is_float:
        raise OpTypeError(f"float fill value {value} on a {x.dtype} tensor")
    return TensorType(x.shape, x.dtype)

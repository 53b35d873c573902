"""Placement ops: reshard and local change where data lives, never its value."""

from __future__ import annotations

from typing import Any

from ..core.errors import OpTypeError
from ..core.op import register_op
from ..types.dim import dims_equal
from ..types.storage import storage_of
from ..types.tensor_type import TensorType


@register_op("reshard", "placement")
def _reshard(types: tuple[TensorType, ...], attrs: dict[str, Any]) -> TensorType:
    (x,) = types
    try:
        storage = storage_of(attrs.get("storage", x.storage))
    except ValueError as e:
        raise OpTypeError(str(e)) from None
    attrs["storage"] = storage
    target = attrs.get("shape_or_layout")
    if isinstance(target, tuple) and all(isinstance(d, int) or hasattr(d, "evaluate") for d in target):
        if len(target) != x.rank or not all(dims_equal(a, b) for a, b in zip(target, x.shape)):
            raise OpTypeError(f"reshard keeps the global shape {x.shape}; got {target}")
        layout = x.layout
    else:
        layout = target
    return TensorType(x.shape, x.dtype, layout, storage)


@register_op("local", "placement")
def _local(types: tuple[TensorType, ...], attrs: dict[str, Any]) -> TensorType:
    (x,) = types
    return TensorType(x.shape, x.dtype, x.layout, x.storage)

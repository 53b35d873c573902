"""Placement ops: reshard and local change where data lives, never its value."""

from __future__ import annotations

from typing import Any

from ..core.errors import OpTypeError
from ..core.op import register_op
from ..types.dim import dims_equal
from ..types.shard import MeshSpec, ShardLayout, has_splits
from ..types.storage import storage_of
from ..types.tensor_type import TensorType


def _scope_mesh(target: tuple[Any, ...]) -> MeshSpec | None:
    """The nested mesh of the scopes open around the op, when every split in ``target`` names one of its axes."""
    from ..core.tracer import current_trace

    ctx = current_trace()
    if ctx is None or not ctx.mesh_stack:
        return None
    mesh = MeshSpec.nest(tuple(ctx.mesh_stack))
    layout = ShardLayout.from_shape(target)[1]
    return mesh if set(layout.mesh.names) <= set(mesh.names) else None


@register_op("reshard", "placement")
def _reshard(types: tuple[TensorType, ...], attrs: dict[str, Any]) -> TensorType:
    """x with a new layout and / or storage; the global shape stays.

    ``shape_or_layout`` is None (keep the layout), the global shape (keep it), a shape written with
    ``N @ mesh.axis`` splits (spread over the mesh scopes open around the op), or a ShardLayout.
    """
    (x,) = types
    try:
        storage = storage_of(attrs.get("storage") or x.storage)
    except ValueError as e:
        raise OpTypeError(str(e)) from None
    attrs["storage"] = storage
    target = attrs.get("shape_or_layout")
    if target is None:
        layout = x.layout
    elif isinstance(target, ShardLayout):
        layout = target
        if len(target.layout) != x.rank:
            raise OpTypeError(f"reshard to {target}: it lays out {len(target.layout)} axes, x has {x.rank}")
    elif isinstance(target, (tuple, list)) and has_splits(target):
        try:
            shape, layout = ShardLayout.from_shape(tuple(target), _scope_mesh(tuple(target)))
        except (TypeError, ValueError) as e:
            raise OpTypeError(str(e)) from None
        if len(shape) != x.rank or not all(dims_equal(a, b) for a, b in zip(shape, x.shape)):
            raise OpTypeError(f"reshard keeps the global shape {x.shape}; the layout describes {shape}")
        attrs["shape_or_layout"] = layout
    elif isinstance(target, (tuple, list)) and all(isinstance(d, int) or hasattr(d, "evaluate") for d in target):
        if len(target) != x.rank or not all(dims_equal(a, b) for a, b in zip(target, x.shape)):
            raise OpTypeError(f"reshard keeps the global shape {x.shape}; got {tuple(target)}")
        attrs["shape_or_layout"] = tuple(target)
        layout = x.layout
    else:
        raise OpTypeError(f"shape_or_layout must be None, the global shape, a shape with N @ mesh.axis splits or a "
                          f"ShardLayout; got {target!r}")
    return TensorType(x.shape, x.dtype, layout, storage)


@register_op("local", "placement")
def _local(types: tuple[TensorType, ...], attrs: dict[str, Any]) -> TensorType:
    (x,) = types
    return TensorType(x.shape, x.dtype, x.layout, x.storage)

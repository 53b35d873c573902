"""Shape ops: reshape, transpose, slice, concat, stack, split, index_select, repeat_interleave."""

from __future__ import annotations

from typing import Any

from ..core.errors import OpTypeError
from ..core.op import register_op
from ..types.dim import Dim, check_dim, dims_equal, floordiv, product, total
from ..types.tensor_type import TensorType
from .rules import check_dims_equal, norm_axis, require_int, require_rank, same_dtype


def _dims(values: Any, what: str) -> tuple[Dim, ...]:
    if isinstance(values, (int, str)) or not isinstance(values, (tuple, list)):
        raise OpTypeError(f"{what} must be a tuple, got {values!r}")
    try:
        return tuple(check_dim(v, what) for v in values)
    except (TypeError, ValueError) as e:
        raise OpTypeError(str(e)) from None


@register_op("reshape", "tensor")
def _reshape(types: tuple[TensorType, ...], attrs: dict[str, Any]) -> TensorType:
    (x,) = types
    raw = attrs.get("new_shape")
    if not isinstance(raw, (tuple, list)):
        raise OpTypeError(f"new_shape must be a tuple, got {raw!r}")
    holes = [i for i, d in enumerate(raw) if isinstance(d, int) and not isinstance(d, bool) and d == -1]
    if len(holes) > 1:
        raise OpTypeError(f"new_shape {tuple(raw)} has more than one -1")
    known = _dims([d for i, d in enumerate(raw) if i not in holes], "new_shape")
    old = product(x.shape)
    shape = list(known)
    if holes:
        inferred = floordiv(old, product(known))
        shape.insert(holes[0], inferred)
    if not dims_equal(product(shape), old):
        raise OpTypeError(f"cannot reshape {x.shape} ({old} elements) to {tuple(raw)} ({product(shape)} elements)")
    attrs["new_shape"] = tuple(shape)
    return TensorType(tuple(shape), x.dtype)


@register_op("transpose", "tensor")
def _transpose(types: tuple[TensorType, ...], attrs: dict[str, Any]) -> TensorType:
    (x,) = types
    perm = attrs.get("perm")
    if not isinstance(perm, (tuple, list)) or sorted(norm_axis(p, x.rank, "perm entry") for p in perm) != list(
        range(x.rank)
    ):
        raise OpTypeError(f"perm {perm!r} is not a permutation of the {x.rank} axes")
    perm = tuple(norm_axis(p, x.rank) for p in perm)
    attrs["perm"] = perm
    return TensorType(tuple(x.shape[p] for p in perm), x.dtype)


@register_op("slice", "tensor")
def _slice(types: tuple[TensorType, ...], attrs: dict[str, Any]) -> TensorType:
    (x,) = types
    starts = _dims(attrs.get("starts"), "starts")
    sizes = _dims(attrs.get("sizes"), "sizes")
    strides = attrs.get("strides") or (1,) * x.rank
    if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in strides):
        raise OpTypeError(f"strides must be positive ints, got {strides!r}")
    if not (len(starts) == len(sizes) == len(strides) == x.rank):
        raise OpTypeError(f"starts/sizes/strides need one entry per axis ({x.rank}), got "
                          f"{len(starts)}/{len(sizes)}/{len(strides)}")
    for axis, (st, sz, sd, ext) in enumerate(zip(starts, sizes, strides, x.shape)):
        if all(isinstance(v, int) for v in (st, sz, ext)) and sz > 0 and st + (sz - 1) * sd >= ext:
            raise OpTypeError(f"axis {axis}: start {st}, size {sz}, stride {sd} run past extent {ext}")
    attrs.update(starts=starts, sizes=sizes, strides=tuple(strides))
    return TensorType(sizes, x.dtype)


def _joined(types: tuple[TensorType, ...], what: str) -> None:
    if not types:
        raise OpTypeError(f"{what} needs at least one tensor")
    same_dtype(types)
    if len({t.rank for t in types}) != 1:
        raise OpTypeError(f"{what} operands differ in rank: {[t.rank for t in types]}")


@register_op("concat", "tensor")
def _concat(types: tuple[TensorType, ...], attrs: dict[str, Any]) -> TensorType:
    _joined(types, "concat")
    axis = norm_axis(attrs.get("axis", 0), types[0].rank)
    attrs["axis"] = axis
    for t in types[1:]:
        for i, (a, b) in enumerate(zip(types[0].shape, t.shape)):
            if i != axis:
                check_dims_equal(a, b, f"concat axis {i}")
    shape = list(types[0].shape)
    shape[axis] = total(t.shape[axis] for t in types)
    return TensorType(tuple(shape), types[0].dtype)


@register_op("stack", "tensor")
def _stack(types: tuple[TensorType, ...], attrs: dict[str, Any]) -> TensorType:
    _joined(types, "stack")
    axis = norm_axis(attrs.get("axis", 0), types[0].rank + 1)
    attrs["axis"] = axis
    for t in types[1:]:
        for i, (a, b) in enumerate(zip(types[0].shape, t.shape)):
            check_dims_equal(a, b, f"stack axis {i}")
    shape = list(types[0].shape)
    shape.insert(axis, len(types))
    return TensorType(tuple(shape), types[0].dtype)


@register_op("split", "tensor")
def _split(types: tuple[TensorType, ...], attrs: dict[str, Any]) -> tuple[TensorType, ...]:
    (x,) = types
    axis = norm_axis(attrs.get("axis", 0), x.rank)
    n = attrs.get("num_splits")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise OpTypeError(f"num_splits must be a positive int, got {n!r}")
    part = floordiv(x.shape[axis], n)
    if not dims_equal(product([part, n]), x.shape[axis]):
        raise OpTypeError(f"axis {axis} extent {x.shape[axis]} does not split into {n} equal parts")
    attrs["axis"] = axis
    shape = x.shape[:axis] + (part,) + x.shape[axis + 1:]
    return tuple(TensorType(shape, x.dtype) for _ in range(n))


@register_op("index_select", "tensor")
def _index_select(types: tuple[TensorType, ...], attrs: dict[str, Any]) -> TensorType:
    x, index = types
    require_int(index, "index")
    require_rank(index, 1, "index")
    dim = norm_axis(attrs.get("dim", 0), x.rank, "dim")
    attrs["dim"] = dim
    return TensorType(x.shape[:dim] + (index.shape[0],) + x.shape[dim + 1:], x.dtype)


@register_op("repeat_interleave", "tensor")
def _repeat_interleave(types: tuple[TensorType, ...], attrs: dict[str, Any]) -> TensorType:
    (x,) = types
    repeats = attrs.get("repeats")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise OpTypeError(f"repeats must be a positive int, got {repeats!r}")
    axis = norm_axis(attrs.get("axis", 0), x.rank)
    attrs["axis"] = axis
    shape = list(x.shape)
    shape[axis] = product([shape[axis], repeats])
    return TensorType(tuple(shape), x.dtype)


def _index_update(types: tuple[TensorType, ...], attrs: dict[str, Any], op: str) -> TensorType:
    """x: any shape; index: (n,) integers; source: x's shape with n on axis ``dim``. The result is x's type."""
    x, index, source = types
    require_int(index, "index")
    require_rank(index, 1, "index")
    same_dtype((x, source))
    if op == "index_add" and x.dtype.is_bool:
        raise OpTypeError("index_add adds, which is not defined on bool tensors; index_copy writes bools")
    dim = norm_axis(attrs.get("dim", 0), x.rank, "dim")
    attrs["dim"] = dim
    if source.rank != x.rank:
        raise OpTypeError(f"source must have x's rank {x.rank}, got {source}")
    check_dims_equal(source.shape[dim], index.shape[0], f"source axis {dim} vs the index length")
    for i, (a, b) in enumerate(zip(x.shape, source.shape)):
        if i != dim:
            check_dims_equal(a, b, f"source axis {i} vs x axis {i}")
    if op == "index_add":
        alpha = attrs.get("alpha", 1)
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
            raise OpTypeError(f"alpha must be a number, got {alpha!r}")
        if isinstance(alpha, float) and not x.dtype.is_float:
            raise OpTypeError(f"float alpha {alpha} on a {x.dtype} tensor")
        attrs["alpha"] = alpha
    return TensorType(x.shape, x.dtype)


@register_op("index_add", "tensor")
def _index_add(types: tuple[TensorType, ...], attrs: dict[str, Any]) -> TensorType:
    """torch.index_add: x with ``alpha * source[i]`` added at position ``index[i]`` of axis ``dim``."""
    return _index_update(types, attrs, "index_add")


@register_op("index_copy", "tensor")
def _index_copy(types: tuple[TensorType, ...], attrs: dict[str, Any]) -> TensorType:
    """torch.index_copy: x with ``source[i]`` written at position ``index[i]`` of axis ``dim``."""
    return _index_update(types, attrs, "index_copy")

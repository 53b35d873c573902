"""Neural-network ops: matmul, rms_norm, layer_norm, rope."""

from __future__ import annotations

from typing import Any

from ..core.errors import OpTypeError
from ..core.op import register_op
from ..types.tensor_type import TensorType
from .rules import broadcast, check_dims_equal, norm_axis, require_float, require_int, require_rank, same_dtype


@register_op("matmul", "nn")
def _matmul(types: tuple[TensorType, ...], attrs: dict[str, Any]) -> TensorType:
    """torch.matmul's shapes: ``(..., M, K) @ (..., K, N)`` with broadcast batch axes; a 1-D ``a`` is a row
    ``(1, K)`` and a 1-D ``b`` a column ``(K, 1)``, the added axis dropped from the result (``w @ x``)."""
    a, b = types
    dt = same_dtype(types)
    if dt.is_bool:
        raise OpTypeError("matmul is not defined on bool tensors")
    if a.rank < 1 or b.rank < 1:
        raise OpTypeError(f"matmul operands need rank >= 1 (a 0-d operand is a scalar: multiply with * instead), "
                          f"got ranks {a.rank} and {b.rank}")
    a_shape = (1, *a.shape) if a.rank == 1 else a.shape
    b_shape = (*b.shape, 1) if b.rank == 1 else b.shape
    check_dims_equal(a_shape[-1], b_shape[-2], "contracted axis (a's last, b's second to last)")
    batch = broadcast([a_shape[:-2], b_shape[:-2]])
    rows = () if a.rank == 1 else (a_shape[-2],)
    cols = () if b.rank == 1 else (b_shape[-1],)
    return TensorType(batch + rows + cols, dt)


def _eps(attrs: dict[str, Any]) -> None:
    eps = attrs.get("eps")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or eps < 0:
        raise OpTypeError(f"eps must be a non-negative number, got {eps!r}")
    attrs["eps"] = float(eps)


@register_op("rms_norm", "nn")
def _rms_norm(types: tuple[TensorType, ...], attrs: dict[str, Any]) -> TensorType:
    """x normalised over its last axis in f32, cast to the weight's dtype, times the weight, cast to x's dtype.

    The weight may have another float dtype than x: a bf16 weight on bf16 x rounds as Hugging Face's
    Llama / Qwen RMSNorm does (before the multiply), an f32 weight keeps the product in f32.
    """
    x, w = types
    require_float(x)
    require_float(w, "weight")
    require_rank(w, 1, "weight")
    check_dims_equal(x.shape[-1], w.shape[0], "weight length vs the normalised (last) axis")
    _eps(attrs)
    return TensorType(x.shape, x.dtype)


@register_op("layer_norm", "nn")
def _layer_norm(types: tuple[TensorType, ...], attrs: dict[str, Any]) -> TensorType:
    x, w, b = types
    require_float(x)
    same_dtype(types)
    axis = norm_axis(attrs.get("axis", -1), x.rank)
    attrs["axis"] = axis
    for name, t in (("weight", w), ("bias", b)):
        require_rank(t, 1, name)
        check_dims_equal(x.shape[axis], t.shape[0], f"{name} length vs axis {axis}")
    _eps(attrs)
    return TensorType(x.shape, x.dtype)


@register_op("rope", "nn")
def _rope(types: tuple[TensorType, ...], attrs: dict[str, Any]) -> tuple[TensorType, TensorType]:
    """q, k: (..., seq, heads, head_dim); cos/sin caches: (max_pos, head_dim); pos_ids: (seq,) integers.

    The cache rows at pos_ids broadcast over every other axis (batch, heads); q and k may differ in their
    head count and leading axes. The results keep q's and k's types.
    """
    q, k, cos, sin, pos = types
    require_float(q, "q")
    same_dtype((q, k))
    same_dtype((cos, sin))
    require_float(cos, "cos_cache")
    require_int(pos, "pos_ids")
    for name, t in (("q", q), ("k", k)):
        if t.rank < 3:
            raise OpTypeError(f"{name} must be laid out (..., seq, heads, head_dim), rank >= 3, got {t}")
    require_rank(cos, 2, "cos_cache")
    require_rank(sin, 2, "sin_cache")
    if pos.rank != 1:
        raise OpTypeError(f"pos_ids must be (seq,), one position per sequence entry, got {pos}")
    head_dim = q.shape[-1]
    check_dims_equal(k.shape[-1], head_dim, "k head_dim vs q head_dim")
    check_dims_equal(cos.shape[1], head_dim, "cos_cache columns vs head_dim")
    check_dims_equal(sin.shape[1], head_dim, "sin_cache columns vs head_dim")
    check_dims_equal(cos.shape[0], sin.shape[0], "cos_cache rows vs sin_cache rows")
    if isinstance(head_dim, int) and head_dim % 2:
        raise OpTypeError(f"head_dim {head_dim} must be even to rotate halves")
    for name, t in (("q", q), ("k", k)):
        check_dims_equal(t.shape[-3], pos.shape[0], f"{name} seq axis (-3 of (..., seq, heads, head_dim)) vs pos_ids")
    return TensorType(q.shape, q.dtype), TensorType(k.shape, k.dtype)

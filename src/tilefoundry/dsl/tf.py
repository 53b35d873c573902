"""The ``tf`` op namespace: every HIR op under the spelling models call it by.

Each function records one typed node into the ``@func`` body being traced. Operands share a dtype
(no implicit promotion); a Python number next to a tensor adopts the tensor's dtype.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..ir.core.graph import Value
from ..ir.core.tracer import emit, lift_scalars, require_trace
from ..ir.types.dim import Dim

__all__ = [
    "abs", "add", "arange", "argmax", "cache_update", "cast", "clamp", "concat", "div", "eq", "exp", "full_like",
    "ge", "gelu", "gt", "index_select", "layer_norm", "le", "local", "log", "lt", "matmul", "max", "min", "mul",
    "ne", "neg", "pow", "reduce", "relu", "repeat_interleave", "reshape", "reshard", "rms_norm", "rope", "rsqrt",
    "sigmoid", "silu", "slice", "softmax", "split", "sqrt", "square", "stack", "sub", "tanh", "topk",
    "transpose", "where", "zeros",
]

_builtin_slice = slice


def _bin(op: str, a: Any, b: Any) -> Value:
    require_trace(op)  # before lifting scalars, so a call outside @func gets that error, not a scalar one
    return emit(op, lift_scalars(op, a, b))


def add(a: Any, b: Any) -> Value:
    """Elementwise ``a + b`` with broadcasting."""
    return _bin("add", a, b)


def sub(a: Any, b: Any) -> Value:
    """Elementwise ``a - b`` with broadcasting."""
    return _bin("sub", a, b)


def mul(a: Any, b: Any) -> Value:
    """Elementwise ``a * b`` with broadcasting."""
    return _bin("mul", a, b)


def div(a: Any, b: Any) -> Value:
    """Elementwise ``a / b`` (integer operands truncate toward zero)."""
    return _bin("div", a, b)


def max(a: Any, b: Any) -> Value:  # noqa: A001 - the DSL spelling
    """Elementwise maximum."""
    return _bin("max", a, b)


def min(a: Any, b: Any) -> Value:  # noqa: A001 - the DSL spelling
    """Elementwise minimum."""
    return _bin("min", a, b)


def pow(a: Any, b: Any) -> Value:  # noqa: A001 - the DSL spelling
    """Elementwise ``a ** b``."""
    return _bin("pow", a, b)


def lt(a: Any, b: Any) -> Value:
    """Elementwise ``a < b`` (bool)."""
    return _bin("lt", a, b)


def le(a: Any, b: Any) -> Value:
    """Elementwise ``a <= b`` (bool)."""
    return _bin("le", a, b)


def gt(a: Any, b: Any) -> Value:
    """Elementwise ``a > b`` (bool)."""
    return _bin("gt", a, b)


def ge(a: Any, b: Any) -> Value:
    """Elementwise ``a >= b`` (bool)."""
    return _bin("ge", a, b)


def eq(a: Any, b: Any) -> Value:
    """Elementwise ``a == b`` (bool)."""
    return _bin("eq", a, b)


def ne(a: Any, b: Any) -> Value:
    """Elementwise ``a != b`` (bool)."""
    return _bin("ne", a, b)


def neg(x: Value) -> Value:
    """``-x``."""
    return emit("neg", (x,))


def abs(x: Value) -> Value:  # noqa: A001 - the DSL spelling
    """``|x|``."""
    return emit("abs", (x,))


def exp(x: Value) -> Value:
    """``e**x``."""
    return emit("exp", (x,))


def log(x: Value) -> Value:
    """Natural logarithm."""
    return emit("log", (x,))


def rsqrt(x: Value) -> Value:
    """``1 / sqrt(x)``."""
    return emit("rsqrt", (x,))


def sqrt(x: Value) -> Value:
    """Square root."""
    return emit("sqrt", (x,))


def square(x: Value) -> Value:
    """``x * x``."""
    return emit("square", (x,))


def sigmoid(x: Value) -> Value:
    """Logistic sigmoid."""
    return emit("sigmoid", (x,))


def tanh(x: Value) -> Value:
    """Hyperbolic tangent."""
    return emit("tanh", (x,))


def silu(x: Value) -> Value:
    """``x * sigmoid(x)``."""
    return emit("silu", (x,))


def relu(x: Value) -> Value:
    """``max(x, 0)``."""
    return emit("relu", (x,))


def gelu(x: Value, approximate: str = "none") -> Value:
    """GELU, exact (``"none"``) or with the tanh approximation (``"tanh"``)."""
    return emit("gelu", (x,), {"approximate": approximate})


def cast(x: Value, dtype: str = "f32") -> Value:
    """``x`` converted to ``dtype``."""
    return emit("cast", (x,), {"dtype": dtype})


def clamp(x: Value, min_val: float | int | None = None, max_val: float | int | None = None) -> Value:
    """``x`` limited to ``[min_val, max_val]`` (either bound may be None)."""
    return emit("clamp", (x,), {"min_val": min_val, "max_val": max_val})


def where(condition: Value, input: Any, other: Any) -> Value:  # noqa: A002 - the DSL spelling
    """``input`` where ``condition`` holds, else ``other`` (broadcasting)."""
    require_trace("where")
    a, b = lift_scalars("where", input, other)
    return emit("where", (condition, a, b))


def reduce(x: Value, axes: int | Sequence[int] = (-1,), keepdim: bool = True, kind: str = "sum") -> Value:
    """Reduce ``axes`` with ``kind`` in sum, mean, max, min, abs_max."""
    return emit("reduce", (x,), {"axes": tuple(axes) if not isinstance(axes, int) else (axes,),
                                 "keepdim": keepdim, "kind": kind})


def matmul(a: Value, b: Value) -> Value:
    """Batched matrix product with broadcasting batch axes: (..., M, K) @ (..., K, N)."""
    return emit("matmul", (a, b))


def softmax(x: Value, axis: int = -1) -> Value:
    """Softmax along ``axis`` (computed in f32, returned in x's dtype)."""
    return emit("softmax", (x,), {"axis": axis})


def rms_norm(x: Value, weight: Value, eps: float) -> Value:
    """RMSNorm over the last axis, in f32 through the weight multiply, returned in x's dtype."""
    return emit("rms_norm", (x, weight), {"eps": eps})


def layer_norm(x: Value, weight: Value, bias: Value, axis: int = -1, eps: float = 1e-5) -> Value:
    """LayerNorm along ``axis`` (f32 inside), returned in x's dtype."""
    return emit("layer_norm", (x, weight, bias), {"axis": axis, "eps": eps})


def rope(q: Value, k: Value, cos_cache: Value, sin_cache: Value, pos_ids: Value) -> tuple[Value, Value]:
    """Rotary embedding (rotate-half, f32 inside) of q and k at positions ``pos_ids``.

    q, k: (..., seq, head_dim); caches: (max_pos, head_dim); pos_ids: (seq,) or (batch, seq).
    """
    return emit("rope", (q, k, cos_cache, sin_cache, pos_ids))


def reshape(x: Value, new_shape: Sequence[Dim]) -> Value:
    """``x`` viewed with ``new_shape`` (one entry may be -1)."""
    return emit("reshape", (x,), {"new_shape": tuple(new_shape)})


def transpose(x: Value, perm: Sequence[int]) -> Value:
    """Axes of ``x`` permuted by ``perm``."""
    return emit("transpose", (x,), {"perm": tuple(perm)})


def slice(x: Value, starts: Sequence[Dim], sizes: Sequence[Dim],  # noqa: A001 - the DSL spelling
          strides: Sequence[int] | None = None) -> Value:
    """``sizes[i]`` elements of each axis from ``starts[i]``, every ``strides[i]``-th."""
    return emit("slice", (x,), {"starts": tuple(starts), "sizes": tuple(sizes),
                                "strides": tuple(strides) if strides is not None else None})


def concat(inputs: Sequence[Value], axis: int) -> Value:
    """Join tensors along an existing axis."""
    return emit("concat", tuple(inputs), {"axis": axis})


def stack(inputs: Sequence[Value], axis: int) -> Value:
    """Join equal-shape tensors along a new axis."""
    return emit("stack", tuple(inputs), {"axis": axis})


def split(x: Value, axis: int, num_splits: int) -> tuple[Value, ...]:
    """``num_splits`` equal parts of ``x`` along ``axis``."""
    return emit("split", (x,), {"axis": axis, "num_splits": num_splits})


def index_select(x: Value, index: Value, dim: int = 0) -> Value:
    """Rows (along ``dim``) of ``x`` at the integer positions ``index`` (rank 1)."""
    return emit("index_select", (x, index), {"dim": dim})


def repeat_interleave(x: Value, repeats: int, axis: int) -> Value:
    """Each element along ``axis`` repeated ``repeats`` times in place."""
    return emit("repeat_interleave", (x,), {"repeats": repeats, "axis": axis})


def topk(x: Value, k: int, axis: int = -1, largest: bool = True, sorted: bool = True) -> tuple[Value, Value]:  # noqa: A002
    """The ``k`` largest (or smallest) values along ``axis`` and their i64 indices."""
    return emit("topk", (x,), {"k": k, "axis": axis, "largest": largest, "sorted": sorted})


def argmax(x: Value, axis: int = -1) -> Value:
    """i64 position of the maximum along ``axis`` (the axis is removed)."""
    return emit("argmax", (x,), {"axis": axis})


def arange(start: Dim, end: Dim | None = None, step: int = 1, dtype: str = "i64") -> Value:
    """``[start, end)`` every ``step``; ``arange(n)`` is ``[0, n)``. Bounds may be DimVars."""
    if end is None:
        start, end = 0, start
    return emit("arange", (), {"start": start, "end": end, "step": step, "dtype": dtype})


def zeros(shape: Sequence[Dim], dtype: str = "f32") -> Value:
    """A zero tensor."""
    return emit("zeros", (), {"shape": tuple(shape), "dtype": dtype})


def full_like(x: Value, value: float | int | bool) -> Value:
    """A tensor shaped and typed like ``x``, filled with ``value``."""
    return emit("full_like", (x,), {"value": value})


def cache_update(cache: Value, cur_pos: Value, s: Value, new: Value) -> Value:
    """A new cache: ``cache`` with ``new[:, :s]`` written at ``cur_pos`` on axis 1 (cache unchanged)."""
    return emit("cache_update", (cache, cur_pos, s, new))


def reshard(x: Value, shape_or_layout: Any = None, storage: str | None = None) -> Value:
    """Move ``x`` to another layout / storage; the value is unchanged."""
    attrs: dict[str, Any] = {"shape_or_layout": shape_or_layout}
    if storage is not None:
        attrs["storage"] = storage
    return emit("reshard", (x,), attrs)


def local(x: Value) -> Value:
    """This execution instance's part of ``x``; the evaluator returns the value unchanged."""
    return emit("local", (x,))

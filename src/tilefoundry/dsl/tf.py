"""The ``tf`` op namespace: every HIR op under the spelling models call it by.

Each function records one typed node into the ``@func`` body being traced. Operands share a dtype
(no implicit promotion); a Python number next to a tensor adopts the tensor's dtype.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..ir.core.errors import IRTypeError
from ..ir.core.graph import Value
from ..ir.core.source import user_source
from ..ir.core.tracer import emit, lift_scalars, require_trace
from ..ir.ops.reduction import ReduceKind
from ..ir.types.dim import Dim

__all__ = [
    "abs", "add", "arange", "argmax", "cache_update", "cast", "ceil", "clamp", "concat", "div", "eq", "exp", "exp2",
    "floor", "floor_div", "full_like", "ge", "gelu", "gt", "index_add", "index_copy", "index_select", "layer_norm",
    "le", "local", "log", "log2", "logical_and", "logical_not", "logical_or", "lt", "matmul", "max", "maximum",
    "min", "minimum", "mod", "mul", "ne", "neg", "pow", "reduce", "relu", "repeat_interleave", "reshape", "reshard",
    "rms_norm", "rope", "round", "rsqrt", "sigmoid", "silu", "slice", "softmax", "softplus", "split", "sqrt",
    "square", "stack", "sub", "tanh", "topk", "transpose", "where", "zeros",
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


def maximum(a: Any, b: Any) -> Value:
    """Elementwise maximum, as ``torch.maximum`` (a NaN in either operand gives NaN); records ``max``."""
    return _bin("max", a, b)


def minimum(a: Any, b: Any) -> Value:
    """Elementwise minimum, as ``torch.minimum`` (a NaN in either operand gives NaN); records ``min``."""
    return _bin("min", a, b)


def pow(a: Any, b: Any) -> Value:  # noqa: A001 - the DSL spelling
    """Elementwise ``a ** b``."""
    return _bin("pow", a, b)


def floor_div(a: Any, b: Any) -> Value:
    """Elementwise ``torch.floor_divide``: the quotient rounded toward -inf (``a // b``)."""
    return _bin("floor_div", a, b)


def mod(a: Any, b: Any) -> Value:
    """Elementwise ``torch.remainder``: ``a - floor_div(a, b) * b``, with the sign of the divisor (``a % b``)."""
    return _bin("mod", a, b)


def logical_and(a: Any, b: Any) -> Value:
    """Elementwise ``a and b`` of bool tensors (broadcasting)."""
    return _bin("logical_and", a, b)


def logical_or(a: Any, b: Any) -> Value:
    """Elementwise ``a or b`` of bool tensors (broadcasting)."""
    return _bin("logical_or", a, b)


def logical_not(x: Value) -> Value:
    """Elementwise ``not x`` of a bool tensor."""
    return emit("logical_not", (x,))


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


def exp2(x: Value) -> Value:
    """``2**x``."""
    return emit("exp2", (x,))


def log2(x: Value) -> Value:
    """Base-2 logarithm."""
    return emit("log2", (x,))


def ceil(x: Value) -> Value:
    """The least integer >= x (an integer tensor is returned unchanged)."""
    return emit("ceil", (x,))


def floor(x: Value) -> Value:
    """The greatest integer <= x (an integer tensor is returned unchanged)."""
    return emit("floor", (x,))


def round(x: Value) -> Value:  # noqa: A001 - the DSL spelling
    """x rounded to the nearest integer, ties to even (``torch.round``)."""
    return emit("round", (x,))


def softplus(x: Value, beta: float = 1.0, threshold: float = 20.0) -> Value:
    """``log(1 + exp(beta * x)) / beta``, and x itself where ``beta * x > threshold`` (``torch.nn.functional``)."""
    return emit("softplus", (x,), {"beta": beta, "threshold": threshold})


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


def reduce(x: Value, axes: int | Sequence[int] = (-1,), keepdim: bool = True,
           kind: str | ReduceKind = "sum") -> Value:
    """Reduce ``axes`` with ``kind``: sum, mean, max, min or abs_max (a name or a ReduceKind member).

    Over an axis of extent 0 the result is the kind's identity: sum and abs_max 0, mean NaN, max -inf
    (the dtype's lowest where it has no infinity), min +inf (the highest).
    """
    return emit("reduce", (x,), {"axes": tuple(axes) if not isinstance(axes, int) else (axes,),
                                 "keepdim": keepdim, "kind": kind})


def matmul(a: Value, b: Value) -> Value:
    """Batched matrix product with broadcasting batch axes: (..., M, K) @ (..., K, N)."""
    return emit("matmul", (a, b))


def softmax(x: Value, axis: int = -1) -> Value:
    """Softmax along ``axis`` (computed in f32, returned in x's dtype)."""
    return emit("softmax", (x,), {"axis": axis})


def rms_norm(x: Value, weight: Value, eps: float = 1e-6) -> Value:
    """RMSNorm over the last axis: normalised in f32, cast to the weight's dtype, times the weight, in x's dtype.

    With a bf16 weight on bf16 x this rounds as Hugging Face's Llama / Qwen RMSNorm; an f32 weight keeps
    the multiply in f32.
    """
    return emit("rms_norm", (x, weight), {"eps": eps})


def layer_norm(x: Value, weight: Value, bias: Value, axis: int = -1, eps: float = 1e-5) -> Value:
    """LayerNorm along ``axis`` (f32 inside), returned in x's dtype."""
    return emit("layer_norm", (x, weight, bias), {"axis": axis, "eps": eps})


def rope(q: Value, k: Value, cos_cache: Value, sin_cache: Value, pos_ids: Value) -> tuple[Value, Value]:
    """Rotary embedding (rotate-half, f32 inside, results in q's dtype) of q and k at positions ``pos_ids``.

    q, k: ``(..., seq, heads, head_dim)`` (what ``q_proj(x).view(B, S, H, D)`` gives); caches:
    ``(max_pos, head_dim)``; pos_ids: ``(seq,)`` integers. The cache rows at pos_ids broadcast over every
    other axis, as Hugging Face's ``apply_rotary_pos_emb`` for Llama / Qwen.
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


def concat(*inputs: Any, axis: int | None = None) -> Value:
    """Join tensors along an existing axis: ``concat(a, b, ..., axis=-1)`` or ``concat([a, b], axis)``.

    ``axis`` defaults to -1 in both spellings.
    """
    if len(inputs) in (1, 2) and isinstance(inputs[0], (list, tuple)):
        tensors = tuple(inputs[0])
        if len(inputs) == 2:
            if axis is not None:
                raise IRTypeError("concat", _types(tensors), f"axis given twice ({inputs[1]!r} and axis={axis!r})",
                                  user_source())
            axis = inputs[1]
    else:
        tensors = inputs
        for i, t in enumerate(tensors):
            if not isinstance(t, Value):
                raise IRTypeError(
                    "concat", _types(tensors),
                    f"argument {i} is {type(t).__name__} {t!r}: pass tensors, then axis= by keyword "
                    "(concat(a, b, axis=-1)), or a list and the axis (concat([a, b], -1))", user_source())
    return emit("concat", tensors, {"axis": -1 if axis is None else axis})


def _types(values: Sequence[Any]) -> list[Any]:
    return [v.type for v in values if isinstance(v, Value)]


def stack(inputs: Sequence[Value], axis: int) -> Value:
    """Join equal-shape tensors along a new axis."""
    if isinstance(inputs, Value):
        raise IRTypeError("stack", [inputs.type], "takes a list or tuple of tensors, got one tensor", user_source())
    return emit("stack", tuple(inputs), {"axis": axis})


def split(x: Value, axis: int, num_splits: int) -> tuple[Value, ...]:
    """``num_splits`` equal parts of ``x`` along ``axis``."""
    return emit("split", (x,), {"axis": axis, "num_splits": num_splits})


def index_select(x: Value, *args: Any, dim: int | None = None) -> Value:
    """Rows (along ``dim``) of ``x`` at the integer positions ``index`` (rank 1).

    Spelled ``index_select(x, index, dim=0)`` or in torch's order ``index_select(x, dim, index)``.
    """
    def is_int(a: Any) -> bool:
        return isinstance(a, int) and not isinstance(a, bool)

    if len(args) == 2 and is_int(args[0]) and not is_int(args[1]) and dim is None:
        index, d = args[1], args[0]
    elif len(args) == 2 and dim is None:
        index, d = args[0], args[1]
    elif len(args) == 1:
        index, d = args[0], 0 if dim is None else dim
    else:
        raise IRTypeError("index_select", _types((x, *args)), f"takes (x, index, dim=0) or torch's order (x, dim, "
                          f"index); got {len(args) + 1} positional arguments{' and dim=' if dim is not None else ''}",
                          user_source())
    return emit("index_select", (x, index), {"dim": d})


def _index_args(op: str, x: Value, args: tuple[Any, ...], dim: int | None) -> tuple[Value, Value, int]:
    """(index, source, dim) from ``op(x, index, source, dim=0)`` or torch's order ``op(x, dim, index, source)``."""
    if len(args) == 3 and isinstance(args[0], int) and not isinstance(args[0], bool) and dim is None:
        return args[1], args[2], args[0]
    if len(args) == 3 and dim is None:
        return args[0], args[1], args[2]
    if len(args) == 2:
        return args[0], args[1], 0 if dim is None else dim
    raise IRTypeError(op, _types((x, *args)), f"takes (x, index, source, dim=0) or torch's order (x, dim, index, "
                      f"source); got {len(args) + 1} positional arguments{' and dim=' if dim is not None else ''}",
                      user_source())


def index_add(x: Value, *args: Any, dim: int | None = None, alpha: float | int = 1) -> Value:
    """``torch.index_add``: x with ``alpha * source`` added at rows ``index`` of axis ``dim`` (repeats accumulate).

    Spelled ``index_add(x, index, source, dim=0)`` or in torch's order ``index_add(x, dim, index, source)``;
    index is (n,) integers and source x's shape with n on axis ``dim``.
    """
    index, source, d = _index_args("index_add", x, args, dim)
    return emit("index_add", (x, index, source), {"dim": d, "alpha": alpha})


def index_copy(x: Value, *args: Any, dim: int | None = None) -> Value:
    """``torch.index_copy``: x with source written at rows ``index`` of axis ``dim``.

    Spelled like :func:`index_add`. With repeated indices, which write wins is unspecified (as in torch).
    """
    index, source, d = _index_args("index_copy", x, args, dim)
    return emit("index_copy", (x, index, source), {"dim": d})


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

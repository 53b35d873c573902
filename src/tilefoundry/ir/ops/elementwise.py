"""Elementwise ops: binary arithmetic and comparisons, unary math, cast, clamp, where, constants."""

from __future__ import annotations

from typing import Any

from ..core.errors import OpTypeError
from ..core.op import register_op
from ..types.dtype import bool_, dtype_of
from ..types.tensor_type import TensorType
from .rules import broadcast, require_float, same_dtype

# floor_div is torch.floor_divide (rounds toward -inf), mod is torch.remainder (the sign of the divisor).
BINARY_ARITHMETIC = ("add", "sub", "mul", "div", "max", "min", "pow", "floor_div", "mod")
COMPARISONS = ("lt", "le", "gt", "ge", "eq", "ne")
# ceil / floor / round (half to even) return an integer operand unchanged, as torch does.
UNARY_MATH = ("neg", "abs", "exp", "log", "rsqrt", "sqrt", "square", "sigmoid", "tanh", "silu", "relu", "exp2",
              "log2", "ceil", "floor", "round")
# Unary ops that only make sense on floating-point values.
_FLOAT_ONLY = {"exp", "log", "rsqrt", "sqrt", "sigmoid", "tanh", "silu", "exp2", "log2"}
LOGICAL_BINARY = ("logical_and", "logical_or")


def _binary_rule(types: tuple[TensorType, ...], attrs: dict[str, Any]) -> TensorType:
    dt = same_dtype(types)
    if dt.is_bool:
        raise OpTypeError("arithmetic on bool tensors is not defined; cast first")
    return TensorType(broadcast([t.shape for t in types]), dt)


def _compare_rule(types: tuple[TensorType, ...], attrs: dict[str, Any]) -> TensorType:
    same_dtype(types)
    return TensorType(broadcast([t.shape for t in types]), bool_)


for _name in BINARY_ARITHMETIC:
    register_op(_name, "math")(_binary_rule)
for _name in COMPARISONS:
    register_op(_name, "math")(_compare_rule)


def _make_unary_rule(name: str):  # noqa: ANN202 - returns a TypeRule
    def rule(types: tuple[TensorType, ...], attrs: dict[str, Any]) -> TensorType:
        (x,) = types
        if name in _FLOAT_ONLY:
            require_float(x)
        elif x.dtype.is_bool:
            raise OpTypeError(f"{name} is not defined on bool tensors")
        return TensorType(x.shape, x.dtype)

    return rule


for _name in UNARY_MATH:
    register_op(_name, "math")(_make_unary_rule(_name))


def _logical_rule(types: tuple[TensorType, ...], attrs: dict[str, Any]) -> TensorType:
    for i, t in enumerate(types):
        if not t.dtype.is_bool:
            raise OpTypeError(f"operand {i} must be bool, got {t.dtype}; compare (x != 0) or tf.cast to bool first")
    return TensorType(broadcast([t.shape for t in types]), bool_)


for _name in LOGICAL_BINARY:
    register_op(_name, "math")(_logical_rule)
register_op("logical_not", "math")(_logical_rule)


@register_op("softplus", "math")
def _softplus(types: tuple[TensorType, ...], attrs: dict[str, Any]) -> TensorType:
    """torch's softplus: ``log1p(exp(beta * x)) / beta``, and x itself where ``beta * x > threshold``."""
    (x,) = types
    require_float(x)
    for key in ("beta", "threshold"):
        v = attrs.get(key)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise OpTypeError(f"{key} must be a number, got {v!r}")
        attrs[key] = float(v)
    if attrs["beta"] == 0:
        raise OpTypeError("beta must not be 0")
    return TensorType(x.shape, x.dtype)


@register_op("gelu", "math")
def _gelu(types: tuple[TensorType, ...], attrs: dict[str, Any]) -> TensorType:
    (x,) = types
    require_float(x)
    if attrs.get("approximate") not in ("none", "tanh"):
        raise OpTypeError(f"approximate must be 'none' or 'tanh', got {attrs.get('approximate')!r}")
    return TensorType(x.shape, x.dtype)


@register_op("cast", "math")
def _cast(types: tuple[TensorType, ...], attrs: dict[str, Any]) -> TensorType:
    (x,) = types
    try:
        attrs["dtype"] = dtype_of(attrs["dtype"])
    except TypeError as e:
        raise OpTypeError(str(e)) from None
    return TensorType(x.shape, attrs["dtype"])


@register_op("clamp", "math")
def _clamp(types: tuple[TensorType, ...], attrs: dict[str, Any]) -> TensorType:
    (x,) = types
    if x.dtype.is_bool:
        raise OpTypeError("clamp is not defined on bool tensors")
    lo, hi = attrs.get("min_val"), attrs.get("max_val")
    if lo is None and hi is None:
        raise OpTypeError("clamp needs min_val, max_val or both")
    for bound in (lo, hi):
        if bound is not None and (isinstance(bound, bool) or not isinstance(bound, (int, float))):
            raise OpTypeError(f"clamp bounds must be numbers, got {bound!r}")
        if isinstance(bound, float) and not x.dtype.is_float:
            raise OpTypeError(f"float bound {bound} on a {x.dtype} tensor")
    if lo is not None and hi is not None and lo > hi:
        raise OpTypeError(f"min_val {lo} is greater than max_val {hi}")
    return TensorType(x.shape, x.dtype)


@register_op("where", "math")
def _where(types: tuple[TensorType, ...], attrs: dict[str, Any]) -> TensorType:
    cond, a, b = types
    if not cond.dtype.is_bool:
        raise OpTypeError(f"condition must be bool, got {cond.dtype}")
    dt = same_dtype((a, b))
    return TensorType(broadcast([cond.shape, a.shape, b.shape]), dt)


@register_op("constant", "math")
def _constant(types: tuple[TensorType, ...], attrs: dict[str, Any]) -> TensorType:
    return TensorType((), attrs["dtype"])

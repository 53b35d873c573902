"""Which runtime op family and tag computes each elementwise HIR op, and literals in an operand's type."""

from __future__ import annotations

import math

import torch

from ..ir.types.dtype import DType
from ..tir.buffer import Literal
from ..tir.stmt import Tag

UNARY_TAGS = {
    "neg": "neg_op", "abs": "abs_op", "exp": "exp_op", "log": "log_op", "rsqrt": "rsqrt_op", "sqrt": "sqrt_op",
    "square": "square_op", "sigmoid": "sigmoid_op", "tanh": "tanh_op", "silu": "silu_op", "relu": "relu_op",
}
BINARY_TAGS = {
    "add": "add_op", "sub": "sub_op", "mul": "mul_op", "div": "div_op", "max": "max_op", "min": "min_op",
    "pow": "pow_op", "lt": "lt_op", "le": "le_op", "gt": "gt_op", "ge": "ge_op", "eq": "eq_op", "ne": "ne_op",
}
REDUCE_TAGS = {"sum": "sum_op", "mean": "mean_op", "max": "max_op", "min": "min_op", "abs_max": "absmax_op"}

# Element types the generated code computes in (8-bit floats have no arithmetic in the runtime yet).
COMPILED_DTYPES = frozenset({"f32", "f16", "bf16", "i8", "i32", "i64", "bool"})


def literal(value: float | int | bool, dtype: DType) -> Literal:
    """``value`` as the ``dtype`` value torch makes of it (a bf16 literal is the bf16 number, exactly)."""
    if dtype.is_bool:
        return Literal(bool(value), dtype)
    if dtype.is_int:
        return Literal(int(value), dtype)
    if math.isnan(value) or math.isinf(value):
        return Literal(float(value), dtype)
    return Literal(float(torch.tensor(float(value), dtype=dtype.torch_dtype).item()), dtype)


# Ops with a faster form for a result that is rounded to a 16-bit float before anything reads it (or that
# feeds only such a result: softmax's exponentials, marked ``rounded`` by its expansion). The runtime's
# ``*_rounded_op`` computes e^x with the hardware's base-2 exponential, whose error is far below the
# 16-bit rounding (unary_ops.h); an f32 result keeps the exact form.
ROUNDED_TAGS = {"exp": "exp_rounded_op", "sigmoid": "sigmoid_rounded_op", "silu": "silu_rounded_op"}


def is_16_bit_float(dtype: DType) -> bool:
    """Whether ``dtype`` is bf16 or f16: a value rounded to it may come from ROUNDED_TAGS' forms."""
    return dtype.is_float and dtype.bits == 16


def unary_tag(op: str, attrs: dict, dtype: DType, result: DType) -> Tag:
    """The unary-family tag of ``op`` on ``dtype`` giving ``result`` (``cast`` is the identity: the conversion is
    the store). exp, sigmoid and silu take their rounded form where ``result`` is a 16-bit float or the op is
    marked ``rounded`` (it feeds only such a result)."""
    if op in ROUNDED_TAGS and (attrs.get("rounded") or is_16_bit_float(result)):
        return Tag(ROUNDED_TAGS[op])
    if op == "cast":
        return Tag("cast_op")
    if op == "gelu":
        return Tag("gelu_tanh_op" if attrs.get("approximate") == "tanh" else "gelu_op")
    if op == "clamp":
        lo, hi = attrs.get("min_val"), attrs.get("max_val")
        low = literal(lo, dtype) if lo is not None else _extreme(dtype, low=True)
        high = literal(hi, dtype) if hi is not None else _extreme(dtype, low=False)
        return Tag("clamp_op", (low, high))
    return Tag(UNARY_TAGS[op])


def _extreme(dtype: DType, *, low: bool) -> Literal:
    if dtype.is_float:
        return Literal(-math.inf if low else math.inf, dtype)
    info = torch.iinfo(dtype.torch_dtype)
    return Literal(info.min if low else info.max, dtype)

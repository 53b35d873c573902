"""Which runtime op family and tag computes each elementwise HIR op, and literals in an operand's type."""

from __future__ import annotations

import math

import torch

from ..ir.types.dtype import DType, f32
from ..tir.buffer import Literal
from ..tir.stmt import Tag

UNARY_TAGS = {
    "neg": "neg_op", "abs": "abs_op", "exp": "exp_op", "log": "log_op", "rsqrt": "rsqrt_op", "sqrt": "sqrt_op",
    "square": "square_op", "sigmoid": "sigmoid_op", "tanh": "tanh_op", "silu": "silu_op", "relu": "relu_op",
    "exp2": "exp2_op", "log2": "log2_op", "ceil": "ceil_op", "floor": "floor_op", "round": "round_op",
    "logical_not": "logical_not_op",
}
# floor_div and mod of integers give 0 for a zero divisor (torch raises, which a kernel cannot; math.h).
BINARY_TAGS = {
    "add": "add_op", "sub": "sub_op", "mul": "mul_op", "div": "div_op", "max": "max_op", "min": "min_op",
    "pow": "pow_op", "lt": "lt_op", "le": "le_op", "gt": "gt_op", "ge": "ge_op", "eq": "eq_op", "ne": "ne_op",
    "floor_div": "floor_div_op", "mod": "mod_op", "logical_and": "logical_and_op", "logical_or": "logical_or_op",
}
# Every op of the unary family: the tagged ones and those whose tag unary_tag builds from attributes.
UNARY_OPS = frozenset(UNARY_TAGS) | {"cast", "gelu", "clamp", "softplus"}
# Every elementwise op both lowerings (rowwise.py, meshwise.py) compile: the result is aligned with its
# operands by broadcasting (right-aligned axes). reshard and local are aliases of their operand.
ELEMENTWISE_OPS = UNARY_OPS | frozenset(BINARY_TAGS) | {"where", "full_like", "zeros", "reshard", "local"}
REDUCE_TAGS = {"sum": "sum_op", "mean": "mean_op", "max": "max_op", "min": "min_op", "abs_max": "absmax_op"}

# Element types the generated code stores (8-bit floats computed in float, converted as torch converts them:
# numeric.h's fp8_of, on either target).
COMPILED_DTYPES = frozenset({"f32", "f16", "bf16", "fp8e4m3", "fp8e5m2", "i8", "i32", "i64", "bool"})


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


def fill_literal(attrs: dict, op: str, dtype: DType) -> Literal:
    """What ``full_like`` (its ``value``) or ``zeros`` (0) fills its ``dtype`` tensor with."""
    return literal(attrs["value"] if op == "full_like" else 0, dtype)


def is_16_bit_float(dtype: DType) -> bool:
    """Whether ``dtype`` is bf16 or f16: a value rounded to it may come from ROUNDED_TAGS' forms."""
    return dtype.is_float and dtype.bits == 16


def unary_tag(op: str, attrs: dict, dtype: DType, result: DType) -> Tag:
    """The unary-family tag of ``op`` on ``dtype`` giving ``result`` (``cast`` is the identity: the conversion is
    the store; clamp and softplus carry their attributes as the tag's literals). exp, sigmoid and silu take their
    rounded form where ``result`` is a 16-bit float or the op is marked ``rounded`` (it feeds only such a
    result)."""
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
    if op == "softplus":  # beta and threshold in f32, the compute type of every float (torch's opmath)
        return Tag("softplus_op", (Literal(float(attrs["beta"]), f32), Literal(float(attrs["threshold"]), f32)))
    return Tag(UNARY_TAGS[op])


def elementwise_call(op: str, attrs: dict, dtype: DType, result: DType) -> tuple[str, Tag]:
    """The runtime family (``unary``, ``binary``, ``ternary``) and tag computing the elementwise ``op`` on
    ``dtype`` (its first operand's) giving ``result``: a tensor op's (``ops::<family>``) and an epilogue's
    element (``ops::scalar::<family>``) alike."""
    if op in BINARY_TAGS:
        return "binary", Tag(BINARY_TAGS[op])
    if op == "where":
        return "ternary", Tag("select_op")
    return "unary", unary_tag(op, attrs, dtype, result)


def _extreme(dtype: DType, *, low: bool) -> Literal:
    if dtype.is_float:
        return Literal(-math.inf if low else math.inf, dtype)
    info = torch.iinfo(dtype.torch_dtype)
    return Literal(info.min if low else info.max, dtype)

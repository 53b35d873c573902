"""The kernels the compile-path tests jit for the CPU, defined once so that a test session builds each once.

Row counts are DimVars (``rows`` from 0), so one build serves every row count a test runs, a row count
that is a multiple of nothing (7, 13) and no rows at all included; ``reductions`` also has a DimVar last
axis (``cols`` from 0), so an empty reduction is one call away.
"""

from __future__ import annotations

from tilefoundry import func
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, tf

ROWS = DimVar("rows", 0, 1 << 20)
COLS = DimVar("cols", 0, 4096)
HIDDEN = 96
FFN = 80


@func
def rms_norm(x: Tensor[(ROWS, HIDDEN), "bf16"], weight: ConstTensor[(HIDDEN,), "bf16"]):
    y = tf.rms_norm(x, weight, 1e-6)
    return y


@func
def rms_norm_written_out(x: Tensor[(ROWS, HIDDEN), "f32"], weight: ConstTensor[(HIDDEN,), "f32"]):
    mean_square = tf.reduce(x * x, axes=(-1,), keepdim=True, kind="mean")
    y = x * tf.rsqrt(mean_square + 1e-5) * weight
    return y


@func
def softmax(x: Tensor[(2, ROWS, HIDDEN), "f32"]):
    y = tf.softmax(x, axis=-1)
    return y


@func
def softmax_written_out(x: Tensor[(ROWS, HIDDEN), "bf16"]):
    xf = tf.cast(x, "f32")
    e = tf.exp(xf - tf.reduce(xf, axes=(-1,), kind="max"))
    p = e / tf.reduce(e, axes=(-1,), kind="sum")
    return tf.cast(p, "bf16")


@func
def swiglu(gate: Tensor[(ROWS, FFN), "bf16"], up: Tensor[(ROWS, FFN), "bf16"]):
    h = tf.silu(gate) * up
    return h


@func
def residual_rms_norm(x: Tensor[(ROWS, HIDDEN), "bf16"], residual: Tensor[(ROWS, HIDDEN), "bf16"],
                      weight: ConstTensor[(HIDDEN,), "bf16"]):
    h = x + residual
    y = tf.rms_norm(h, weight, 1e-6)
    return y, h


@func
def reductions(x: Tensor[(ROWS, COLS), "f32"]):
    total = tf.reduce(x, axes=(-1,), keepdim=False, kind="sum")
    largest = tf.reduce(x, axes=(-1,), keepdim=True, kind="max")
    mean = tf.reduce(x, axes=(-1,), keepdim=False, kind="mean")
    return total, largest, mean


@func
def cast_chain(x: Tensor[(ROWS, HIDDEN), "f32"]):
    narrow = tf.cast(tf.cast(x, "bf16"), "f16")
    back = tf.cast(narrow, "f32") * 3.0
    whole = tf.cast(tf.cast(back, "i32"), "f32")
    return back, whole, tf.cast(x, "bf16")


@func
def elementwise(x: Tensor[(ROWS, HIDDEN), "f32"], y: Tensor[(ROWS, HIDDEN), "f32"]):
    positive = x > 0.0
    leaky = tf.where(positive, x, x * 0.125)
    bounded = tf.clamp(leaky + tf.tanh(y), -1.5, 2.0)
    mixed = tf.max(bounded, tf.gelu(y, approximate="tanh")) - tf.abs(tf.min(x, y)) / (tf.exp(y) + 1.0)
    return mixed, positive, tf.sigmoid(x) * tf.sqrt(tf.square(y) + 1.0)


ACCEPTANCE = (rms_norm, rms_norm_written_out, softmax, softmax_written_out, swiglu, residual_rms_norm,
              reductions, cast_chain, elementwise)

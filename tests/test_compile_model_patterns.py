"""Patterns model sources are written with compile and match the evaluator: a sliding-window causal mask from two
aranges and a logical_and, Gemma's logit soft-capping, ALiBi's per-head position bias, an interleaved rotate-half
(pairs split and swapped through reshapes), the last token's row, a strided slice, a softmax over a transposed axis,
an outer product, and a MoE gate (softmax, top-2, renormalised). Jitted for the CPU (the compiled code alone: the
evaluator patched to raise, outputs handed in filled with NaN) at several lengths of one build; the same module built
with nvcc in tests/test_compile_cuda_build.py.

Tolerances: f32; exact where each element is one op of both sides; 1e-6 where a sum or a transcendental function may
round differently (softmax, tanh), or a multiply and an add may be fused into one rounding (ALiBi's bias).
"""

from __future__ import annotations

import pytest
import torch

from tests.compile_kernels import compiled_only, output_paths
from tilefoundry import func, jit, module
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, tf
from tilefoundry.runtime.check import allclose, check, equal

pytestmark = pytest.mark.usefixtures("compile_cache")

S = DimVar("s", 2, 64)
WINDOW = 4


@module(entry="sliding_window")
class Patterns:
    @func
    def sliding_window(x: Tensor[(S, S), "f32"]):
        """Each query sees itself and the WINDOW - 1 keys before it."""
        rows = tf.reshape(tf.arange(x.shape[0]), (x.shape[0], 1))
        cols = tf.reshape(tf.arange(x.shape[0]), (1, x.shape[0]))
        visible = tf.logical_and(cols <= rows, cols > rows - WINDOW)
        return tf.softmax(tf.where(visible, x, float("-inf")), -1)

    @func
    def soft_capped(x: Tensor[(S, 64), "f32"]):
        return tf.tanh(x / 30.0) * 30.0

    @func
    def alibi(x: Tensor[(4, S, S), "f32"], slopes: ConstTensor[(4,), "f32"]):
        keys = tf.cast(tf.reshape(tf.arange(x.shape[2]), (1, 1, x.shape[2])), "f32")
        return x + tf.reshape(slopes, (4, 1, 1)) * keys

    @func
    def rotate_pairs(x: Tensor[(S, 8), "f32"]):
        pairs = tf.reshape(x, (x.shape[0], 4, 2))
        a, b = tf.split(pairs, -1, 2)
        return tf.reshape(tf.concat([-b, a], -1), (x.shape[0], 8))

    @func
    def last_token(x: Tensor[(2, S, 16), "f32"]):
        return x[:, -1] * 2.0

    @func
    def every_other(x: Tensor[(S, 16), "f32"]):
        return x[:, ::2] + 1.0

    @func
    def softmax_transposed(x: Tensor[(2, S, 16), "f32"]):
        return tf.softmax(tf.transpose(x, (0, 2, 1)), -1)

    @func
    def outer(a: Tensor[(S,), "f32"], b: Tensor[(16,), "f32"]):
        return tf.reshape(a, (a.shape[0], 1)) * tf.reshape(b, (1, 16))

    @func
    def top2_gate(x: Tensor[(S, 8), "f32"]):
        weights, experts = tf.topk(tf.softmax(x, -1), 2)
        return weights / tf.reduce(weights, axes=(-1,), keepdim=True, kind="sum"), experts


CLOSE = allclose(atol=1e-6, rtol=1e-6)
EXPECT = {"sliding_window": CLOSE, "soft_capped": CLOSE, "softmax_transposed": CLOSE, "top2_gate": CLOSE,
          "alibi": CLOSE}


def _inputs(name: str, s: int, seed: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    fn = Patterns.functions[name]
    out = []
    for p in fn.params:
        shape = tuple(d if isinstance(d, int) else s for d in p.type.shape)
        out.append(torch.randn(shape, generator=g) * (20.0 if name == "soft_capped" else 1.0))
    return tuple(out)


@pytest.mark.parametrize("name", sorted(Patterns.functions))
def test_model_patterns_match_the_evaluator(name: str) -> None:
    fn = Patterns.functions[name]
    compiled = jit(Patterns, target="cpu").functions[name]
    paths = output_paths(fn)
    for s in (2, 7, 40):
        predicate = EXPECT.get(name, equal())
        expect = {p: [equal() if p == "output[1]" else predicate] for p in paths}  # top2's experts: exact
        report = check(compiled_only(compiled), fn, _inputs(name, s, s), expect=expect)
        assert report.passed, f"{name} at {s}:\n{report}"

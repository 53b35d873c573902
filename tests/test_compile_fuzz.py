"""Random chains of ops, as model sources outside this repository combine them, lower for every target.

Each seed builds a function of 2 to 7 steps, each step one of 26 kinds over a ``(s, 16)`` f32 value (``s`` a DimVar)
and the values before it: matmuls with the weight read either way, rms_norm and layer_norm, softmax along either
axis, reductions of several kinds along either axis, head reshapes and transposes, rows picked by ``index_select``,
concat and stack of slices, split, repeat_interleave, index_add and index_copy, bf16 round trips, ``where`` over
comparisons, ``arange``, clamp, gelu, top-k and argmax. Some functions return an intermediate value too. Every seed
lowers for the CPU, sm_90a and sm_86 with no error at all: neither a crash of the compiler nor a refusal (a view a
kernel cannot read is copied first, ``lower/stages.py``). A few seeds that pick rows run jitted for the CPU against
the evaluator. (Found this way: an arange in the stage after a fused argmax crashed the lowering; rows picked and
then sliced, reshaped, picked again or softmaxed along their picked axis were refused; and an index_copy of one
source row wrote it at row 0 whatever its position said.)
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import torch

from tests.compile_kernels import compiled_only, output_paths
from tilefoundry import func, jit, lower
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, tf
from tilefoundry.ir.core.function import Function
from tilefoundry.runtime.check import allclose, check
from tilefoundry.target import CudaTarget

pytestmark = pytest.mark.usefixtures("compile_cache")

S = DimVar("s", 1, 65)
H = 16
KINDS = 26
BF16_ROUND_TRIP = 9  # the kind whose bf16 rounding may fall either side of an f32 sum summed in another order
PICK = 7  # the kind that picks rows by index_select
SEEDS = range(300)


def _step(kind: int, a: Any, b: Any, w: Any, g: Any, ids: Any) -> Any:
    """One step of a chain: a value of ``(S, H)`` f32 made from the last value ``a`` and an earlier one ``b``."""
    half = H // 2
    if kind == 0:
        return tf.exp(a * 0.1)
    if kind == 1:
        return tf.silu(a) + b
    if kind == 2:
        return tf.matmul(a, tf.transpose(w, (1, 0)))
    if kind == 3:
        return tf.rms_norm(a, g, 1e-6)
    if kind == 4:
        return tf.softmax(a)
    if kind == 5:
        return a - tf.reduce(a, axes=(-1,), keepdim=True, kind="max")
    if kind == 6:
        return tf.reshape(tf.transpose(tf.reshape(a, (S, 2, half)), (0, 2, 1)), (S, H))
    if kind == PICK:
        return tf.index_select(a, ids, 0)
    if kind == 8:
        return tf.concat([tf.slice(a, (0, half), (S, half)), tf.slice(a, (0, 0), (S, half))], 1)
    if kind == BF16_ROUND_TRIP:
        return tf.cast(tf.cast(a, "bf16"), "f32")
    if kind == 10:
        return tf.where(a > 0.0, a, b)
    if kind == 11:
        return a + tf.reshape(tf.cast(tf.arange(H), "f32"), (1, H)) * 0.01
    if kind == 12:
        return tf.transpose(tf.matmul(w, tf.transpose(a, (1, 0))), (1, 0))
    if kind == 13:
        return tf.layer_norm(a, g, g, eps=1e-5)
    if kind == 14:
        return tf.clamp(a, min_val=0.0) + tf.gelu(b)
    if kind == 15:
        top, _ = tf.topk(a, 4)
        chosen = tf.cast(tf.reshape(tf.argmax(a, -1), (S, 1)), "f32")
        return a * tf.reshape(tf.reduce(top, axes=(-1,), keepdim=False, kind="mean"), (S, 1)) + chosen
    if kind == 16:
        return tf.reshape(tf.repeat_interleave(tf.slice(a, (0, 0), (S, half)), 2, 1), (S, H))
    if kind == 17:
        return tf.reshape(tf.stack([tf.slice(a, (0, 0), (S, half)), tf.slice(b, (0, half), (S, half))], 1), (S, H))
    if kind == 18:
        first, second = tf.split(a, 1, 2)
        return tf.concat([second * tf.sigmoid(first), first], 1)
    if kind == 19:
        return tf.index_add(a, 0, ids, b * 0.5)
    if kind == 20:
        return tf.index_copy(a, 0, tf.slice(ids, (0,), (1,)), tf.slice(b, (0, 0), (1, H)))
    if kind == 21:
        return tf.where(tf.logical_and(a > 0.0, b < 0.5), tf.floor(a * 4.0), tf.round(b))
    if kind == 22:
        largest = tf.reduce(tf.reshape(a, (S, 4, 4)), axes=(1,), keepdim=False, kind="abs_max")
        return a + tf.repeat_interleave(largest, 4, 1)
    if kind == 23:
        return tf.transpose(tf.softmax(tf.transpose(a, (1, 0)), axis=-1), (1, 0))
    if kind == 24:
        return a * tf.rsqrt(tf.reduce(tf.square(a), axes=(0,), keepdim=True, kind="mean") + 1.0)
    return tf.full_like(a, 0.5) + tf.softplus(a)


def chain(seed: int) -> tuple[Function, list[int]]:
    """The function of ``seed`` and its steps' kinds."""
    rnd = random.Random(seed)
    kinds = [rnd.randrange(KINDS) for _ in range(rnd.randint(2, 7))]
    also_middle = rnd.random() < 0.3

    @func
    def chained(x: Tensor[(S, H), "f32"], y: Tensor[(S, H), "f32"], w: ConstTensor[(H, H), "f32"],
                g: ConstTensor[(H,), "f32"], ids: Tensor[(S,), "i64"]):
        values = [x, y]
        for kind in kinds:
            values.append(_step(kind, values[-1], values[(7 * kind + len(values)) % len(values)], w, g, ids))
        return (values[-1], values[len(values) // 2]) if also_middle else values[-1]

    chained.name = f"chain{seed}"
    return chained, kinds


def _inputs(seed: int, s: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed * 100 + s)
    return (torch.randn(s, H, generator=g), torch.randn(s, H, generator=g), torch.randn(H, H, generator=g) * 0.25,
            1 + 0.1 * torch.randn(H, generator=g), torch.randint(0, s, (s,), generator=g))


def test_every_chain_lowers_for_every_target_without_an_error() -> None:
    failures = []
    for seed in SEEDS:
        fn, kinds = chain(seed)
        for target in ("cpu", CudaTarget("sm_90a"), CudaTarget("sm_86")):
            try:
                lower(fn, target)
            except Exception as e:  # noqa: BLE001 - every error is a finding, reported with its seed
                failures.append(f"seed {seed} {kinds} for {target}: {type(e).__name__}: {str(e).splitlines()[0]}")
    assert not failures, "\n".join(failures[:10])


def _picking_seeds(count: int) -> list[int]:
    """The first seeds that pick rows and round nothing to bf16 (their results then agree to 1e-4)."""
    return [seed for seed in SEEDS if PICK in chain(seed)[1] and BF16_ROUND_TRIP not in chain(seed)[1]][:count]


@pytest.mark.parametrize("seed", _picking_seeds(3))
def test_chains_that_pick_rows_match_the_evaluator_on_the_cpu(seed: int) -> None:
    fn, kinds = chain(seed)
    compiled = jit(fn, target="cpu")
    for s in (1, 5, 40):
        report = check(compiled_only(compiled), fn, _inputs(seed, s),
                       expect={p: [allclose(atol=1e-4, rtol=1e-4)] for p in output_paths(fn)})
        assert report.passed, f"seed {seed} {kinds} at s = {s}:\n{report}"

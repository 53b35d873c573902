"""A reduction over several axes compiles one axis after the other (``lower/reduce_axis.py``'s
``split_reductions``): the innermost first, the last axis in a row-wise kernel, the others folding rows of memory;
a sum or mean of bf16 values accumulates in f32 from the first axis to the last and is rounded once. Jitted for the
CPU against the evaluator (the compiled code alone: the evaluator patched to raise, outputs handed in filled with
NaN), built with nvcc in tests/test_compile_cuda_build.py.

Tolerances: the largest, smallest and largest magnitude are exact; f32 sums differ in order only (1e-5); a bf16 mean
rounds once on both sides but may land on the other side of a rounding boundary (one bf16 ulp, 2**-7).
"""

from __future__ import annotations

import pytest
import torch

from tests.compile_kernels import compiled_only
from tilefoundry import func, jit, lower, module
from tilefoundry.dsl import DimVar, Tensor, tf
from tilefoundry.runtime.check import allclose, check, equal

pytestmark = pytest.mark.usefixtures("compile_cache")

S = DimVar("s", 1, 64)


@module(entry="total")
class Reductions:
    @func
    def total(x: Tensor[(4, 8), "f32"]):
        """The whole tensor's sum."""
        return tf.reduce(x, axes=(0, 1), kind="sum")

    @func
    def largest(x: Tensor[(S, 8), "f32"]):
        """The largest value, keeping both axes, at a row count known at launch."""
        return tf.reduce(x, axes=(0, 1), keepdim=True, kind="max")

    @func
    def mean_bf16(x: Tensor[(3, 5, 8), "bf16"]):
        """A bf16 mean over the two inner axes: accumulated in f32, rounded once."""
        return tf.reduce(x, axes=(1, 2), keepdim=False, kind="mean")

    @func
    def outer(x: Tensor[(3, 5, 8), "f32"]):
        """The smallest over the two outer axes: rows folded twice, the last axis kept."""
        return tf.reduce(x, axes=(0, 1), keepdim=False, kind="min")

    @func
    def every_axis(x: Tensor[(2, 3, 4), "f32"]):
        return tf.reduce(x, axes=(0, 1, 2), keepdim=True, kind="abs_max")


CASES = {
    "total": ((4, 8), torch.float32, allclose(atol=1e-5, rtol=1e-5)),
    "largest": ((7, 8), torch.float32, equal()),
    "mean_bf16": ((3, 5, 8), torch.bfloat16, allclose(atol=2**-7, rtol=2**-7)),
    "outer": ((3, 5, 8), torch.float32, equal()),
    "every_axis": ((2, 3, 4), torch.float32, equal()),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_reduction_over_several_axes_matches_the_evaluator(name: str) -> None:
    shape, dtype, predicate = CASES[name]
    fn = Reductions.functions[name]
    compiled = jit(Reductions, target="cpu").functions[name]
    for seed in range(2):
        x = torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)
        report = check(compiled_only(compiled), fn, (x,), expect={"output": [predicate]})
        assert report.passed, f"{name}, seed {seed}:\n{report}"


def test_the_axes_are_reduced_innermost_first_and_a_bf16_sum_stays_in_f32_between_them() -> None:
    tir = lower(Reductions, "cpu")
    assert [s.fn.schedule.placement for s in tir.functions["outer"].stages] == ["reduce_axis", "reduce_axis"]
    total = tir.functions["total"]
    # axis 1 along the rows (row-wise), then axis 0 of the (4, 1) sums kept: rows folded
    assert [s.fn.schedule.placement == "reduce_axis" for s in total.stages] == [False, True], str(total)
    mean = str(tir.functions["mean_bf16"])
    assert "f32" in mean and mean.count("cast") >= 2, mean  # widened before the first, narrowed after the last

"""``concat`` and ``stack`` compile: each operand copied into its place in the result by a row-wise kernel of its
own, written through the result's strides from where its part starts (after the parts before it along the axis, or
at its index along the new axis). Jitted for the CPU against the evaluator (the compiled code alone: the evaluator
patched to raise, outputs handed in filled with NaN), their CUDA source built with nvcc in
tests/test_compile_cuda_build.py. A stack along the last axis interleaves its operands' elements: each operand's rows
written a stride apart.

Tolerances: the parts are copies of values computed elementwise, the same ops as the evaluator's: 1e-6.
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


@module(entry="rows")
class Joins:
    @func
    def rows(x: Tensor[(2, 8), "f32"], y: Tensor[(3, 8), "f32"]):
        """Computed operands joined along the rows."""
        return tf.concat([x * 2.0, y + 1.0], axis=0)

    @func
    def columns(x: Tensor[(S, 8), "f32"], y: Tensor[(S, 4), "f32"]):
        """Joined along the last axis at any row count, then an op over the result."""
        return tf.concat(x, y, axis=-1) * 3.0

    @func
    def middle(x: Tensor[(2, 3, 4), "bf16"], y: Tensor[(2, 5, 4), "bf16"], z: Tensor[(2, 1, 4), "bf16"]):
        """Three parameters joined along a middle axis, returned as they are."""
        return tf.concat([x, y, z], axis=1)

    @func
    def rotate_half(x: Tensor[(S, 16), "f32"]):
        """The families' rotate-half: two parts of a split, swapped, one negated."""
        a, b = tf.split(x, -1, 2)
        return tf.concat([-b, a], axis=-1)

    @func
    def stacked(x: Tensor[(2, 8), "f32"], y: Tensor[(2, 8), "f32"]):
        """Stacked along a new first axis, then an op over the result."""
        return tf.stack([x, y + 1.0], axis=0) + 1.0

    @func
    def stacked_middle(x: Tensor[(2, 8), "bf16"], y: Tensor[(2, 8), "bf16"]):
        """Stacked along a new middle axis."""
        return tf.stack([x, y], axis=1)

    @func
    def interleaved(x: Tensor[(S, 8), "bf16"], y: Tensor[(S, 8), "bf16"], z: Tensor[(S, 8), "bf16"]):
        """Stacked along a new last axis: the three operands' elements interleaved."""
        return tf.stack([x, y, z], axis=-1)


def _inputs(name: str, g: torch.Generator) -> tuple[torch.Tensor, ...]:
    fn = Joins.functions[name]
    rows = 5
    out = []
    for p in fn.params:
        shape = tuple(rows if not isinstance(d, int) else d for d in p.type.shape)
        out.append(torch.randn(shape, generator=g).to(p.type.dtype.torch_dtype))
    return tuple(out)


@pytest.mark.parametrize("name", sorted(Joins.functions))
def test_joined_operands_match_the_evaluator(name: str) -> None:
    fn = Joins.functions[name]
    compiled = jit(Joins, target="cpu").functions[name]
    close = equal() if "middle" in name or name == "interleaved" else allclose(atol=1e-6, rtol=1e-6)
    for seed in range(2):
        report = check(compiled_only(compiled), fn, _inputs(name, torch.Generator().manual_seed(seed)),
                       expect={"output": [close]})
        assert report.passed, f"{name}, seed {seed}:\n{report}"


def test_each_operand_is_written_where_its_part_starts() -> None:
    tir = lower(Joins, "cpu")
    rows = tir.functions["rows"]
    # two row-wise kernels computing the operands, then one copy each into the result: rows 0-1, then 2-4
    assert [s.fn.name for s in rows.stages][-2:] == ["rows_stage2_part0", "rows_stage2_part1"], str(rows)
    assert "out[16 + row * 8:]" in str(rows.stages[-1].fn), str(rows.stages[-1].fn)
    middle = str(tir.functions["middle"])  # the parts start 3 and 8 rows of 4 into each batch element's 9
    assert "out[12 + " in middle and "out[32 + " in middle, middle


def test_a_stack_along_the_last_axis_writes_each_operand_a_stride_apart() -> None:
    fn = lower(Joins, "cpu").functions["interleaved"]
    parts = [str(s.fn) for s in fn.stages]
    assert len(parts) == 3 and all(f"out[{i} + row * 24:]" in p or (i == 0 and "out[row * 24:]" in p)
                                   for i, p in enumerate(parts)), "\n".join(parts)
    assert all(":(3, 3, 3)" in p for p in parts), "\n".join(parts)  # the row's elements 3 apart

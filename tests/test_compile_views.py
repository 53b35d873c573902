"""Views read by row-wise ops compile as strides, not copies: jitted for the CPU against the evaluator.

A slice from a non-zero start (MoE's k-th largest routing weight), a transposed tensor whose rows stay
contiguous (a head-major view of a token-major tensor), per-row scalars read through a transpose, and a
result returned through a reshape, each at several row counts from one build. Rows read across a transpose:
tests/test_compile_other_axes.py.
"""

from __future__ import annotations

import pytest
import torch

from tests.compile_kernels import compiled_only
from tilefoundry import func, jit, lower, module
from tilefoundry.codegen import generate
from tilefoundry.dsl import DimVar, Tensor, tf
from tilefoundry.runtime.check import allclose, check

pytestmark = pytest.mark.usefixtures("compile_cache")

S = DimVar("s", 1, 256)
F32 = allclose(atol=1e-6, rtol=1e-6)


@module(entry="kth_weights")
class Views:
    @func
    def kth_weights(top: Tensor[(S, 4), "f32"], probs: Tensor[(S, 8), "f32"]):
        kth = tf.slice(top, (0, 3), (S, 1))
        return tf.where(probs >= kth, probs, 0.0)

    @func
    def head_major(x: Tensor[(S, 4, 16), "f32"]):
        return tf.exp(tf.transpose(x, (1, 0, 2))) * 2.0  # (heads, s, d): rows of d stay contiguous

    @func
    def per_row_scalars(w: Tensor[(S, 8), "f32"], y: Tensor[(8, S, 16), "f32"]):
        return y * tf.reshape(tf.transpose(w, (1, 0)), (8, S, 1))

    @func
    def heads_merged(x: Tensor[(S, 4, 8), "f32"]):
        """(s, heads, d) read head-major and merged to (heads, s * d): no strides say that, so a copy first."""
        return tf.reshape(tf.transpose(x, (1, 0, 2)), (4, S * 8)) + 1.0

    @func
    def reshaped_result(x: Tensor[(S, 64), "f32"]):
        return tf.reshape(tf.sigmoid(x), (S, 4, 16))

    @func
    def repeated_rows(x: Tensor[(2, S, 4), "f32"]):
        """A DimVar axis repeated: rows numbered over (2, 2*s), each offset divided by 2*s (a compound divisor: the
        generated C++ once read it as row / 2 * s, writing outside the result)."""
        return tf.repeat_interleave(x, 2, 1) * 2.0


def _inputs(name: str, s: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(s)
    shapes = {"kth_weights": [(s, 4), (s, 8)], "head_major": [(s, 4, 16)], "per_row_scalars": [(s, 8), (8, s, 16)],
              "reshaped_result": [(s, 64)], "heads_merged": [(s, 4, 8)], "repeated_rows": [(2, s, 4)]}[name]
    return tuple(torch.randn(shape, generator=g) for shape in shapes)


@pytest.mark.parametrize("name", sorted(Views.functions))
def test_a_view_read_by_row_wise_ops_matches_the_evaluator(name: str) -> None:
    compiled = jit(Views, target="cpu").functions[name]
    fn = Views.functions[name]
    for s in (1, 7, 130):
        report = check(compiled_only(compiled), fn, _inputs(name, s), expect={"output": [F32]})
        assert report.passed, f"{name} at {s} rows:\n{report}"


def test_a_compound_divisor_of_the_row_index_is_parenthesised() -> None:
    tir = lower(Views, "cpu")
    text = str(tir.functions["repeated_rows"])
    assert "(row / (2*s))" in text and "(row % (2*s))" in text, text
    source = generate(tir).source
    assert "(row / (2 * s))" in source and "(row % (2 * s))" in source


def test_the_views_are_strides_not_copies() -> None:
    tir = lower(Views, "cpu")
    head_major = tir.functions["head_major"]
    assert len(head_major.stages) == 1 and not head_major.temps  # read in place, written once
    assert "transpose[(row / s) * 16 + (row % s) * 64:]" in str(head_major)  # x, read head-major
    assert "kth[3 + row * 4:]" in str(tir.functions["kth_weights"])  # top[:, 3]


def test_a_reshape_no_strides_express_reads_a_contiguous_copy() -> None:
    fn = lower(Views, "cpu").functions["heads_merged"]
    assert [s.fn.schedule.placement for s in fn.stages] == ["rows", "rows"] and len(fn.temps) == 1

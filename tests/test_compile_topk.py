"""What the compiled topk kernels give where torch leaves the answer open, and what the lowering refuses.

The kernels (tests/compile_kernels.py: topk_rows, topk_any_width, topk_wide) match the evaluator with ``check``
in tests/test_compile_kernels.py on rows whose values are distinct. Here the rows have ties, several NaNs and
signed zeros: torch.topk does not say in which order equal values come, so the compiled values must equal
torch's exactly, the compiled indices must pick them from the row (no position twice), equal values must come
in the order of their positions (what the kernels state), and where a value occurs once in its row its index
must be torch's (``topk_disagreements``). sorted=False gives the sorted order (torch leaves that order open).
tests/gpu/test_compile_topk.py runs the same on CUDA.
"""

from __future__ import annotations

import pytest
import torch

from tests import compile_kernels as K
from tests.compile_kernels import compiled_only, topk_disagreements
from tilefoundry import func, jit, lower
from tilefoundry.dsl import DimVar, Tensor, tf
from tilefoundry.lower import LoweringError

pytestmark = pytest.mark.usefixtures("compile_cache")
ROWS = DimVar("rows", 0, 1 << 20)

# (output of values, input, k, largest) of each topk of the kernels, in their order of results
PICKS = {
    "topk_rows": ((0, 0, 8, True), (2, 0, 1, True), (4, 0, 2, False), (6, 1, 2, True), (8, 1, 8, False)),
    "topk_any_width": ((0, 0, 2, True), (2, 1, 8, False)),
    "topk_wide": ((0, 0, 8, True), (2, 0, 1, False)),
}


def tied_rows(shape: tuple[int, ...], seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """f32 and bf16 rows of few distinct values (-3 to 3, as floats: many ties), with rows all equal, rows of
    several NaNs (one of all NaN), of +0 and -0 only, and infinities."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(-3, 4, shape, generator=g).float()
    rows = x.reshape(-1, shape[-1])
    if rows.shape[0] > 6:
        cols = shape[-1]
        rows[1, :] = 0.5
        rows[2, ::3] = float("nan")
        rows[3, :] = float("nan")
        rows[4, :] = torch.where(torch.arange(cols) % 2 == 0, 0.0, -0.0)
        rows[5, 1::4], rows[5, 2::4] = float("inf"), float("-inf")
        rows[6, cols - 1] = float("nan")
    return x, x.bfloat16()


def disagreements(kernel_name: str, inputs: tuple[torch.Tensor, ...], outs: tuple[torch.Tensor, ...]) -> list[str]:
    """topk_disagreements of every topk of a kernel, named."""
    problems = []
    for at, source, k, largest in PICKS[kernel_name]:
        found = topk_disagreements(inputs[source], outs[at], outs[at + 1], k, largest)
        problems += [f"{kernel_name} output[{at}] (k={k}, largest={largest}): {p}" for p in found]
    return problems


@pytest.mark.parametrize("kernel", K.TOPK, ids=lambda k: k.name)
def test_ties_nans_and_signed_zeros_give_torchs_values_in_position_order(kernel) -> None:
    compiled = jit(kernel, target="cpu")
    widths = (8, 33, 200) if kernel is K.topk_any_width else (None,)
    for width in widths:
        shape = {"topk_rows": (13, K.HIDDEN), "topk_any_width": (13, width), "topk_wide": (2, 9, 2048)}[kernel.name]
        x, xb = tied_rows(shape, 31)
        inputs = (xb,) if kernel is K.topk_wide else (x, xb)
        outs = compiled_only(compiled)(*inputs)
        assert disagreements(kernel.name, inputs, outs) == []


def test_equal_values_come_in_the_order_of_their_positions_and_nan_counts_as_the_largest() -> None:
    compiled = jit(K.topk_rows, target="cpu")
    x = torch.zeros(2, K.HIDDEN)
    x[0, 90], x[0, 10], x[0, 50] = 2.0, 2.0, float("nan")
    x[1, 70], x[1, 5] = float("nan"), -1.0
    outs = compiled_only(compiled)(x, x.bfloat16())
    assert outs[1][0, :4].tolist() == [50, 10, 90, 0]  # NaN, then the two 2.0 by position, then the first 0
    assert outs[5][1].tolist() == [5, 0]  # the smallest: -1, then the first 0; NaN comes last
    assert torch.isnan(outs[0][0, 0]) and outs[0][0, 1:3].tolist() == [2.0, 2.0]


def test_sorted_false_gives_the_sorted_order() -> None:
    @func
    def unsorted_topk(x: Tensor[(ROWS, 40), "f32"]):
        return tf.topk(x, 5, sorted=False)

    x = K.distinct_rows((7, 40), 32)[0]
    values, indices = compiled_only(jit(unsorted_topk, target="cpu"))(x)
    assert topk_disagreements(x, values, indices, 5, True) == []


def test_a_row_length_that_may_be_shorter_than_k_is_refused_naming_the_bound() -> None:
    short = DimVar("short", 1, 64)

    @func
    def topk_of_short_rows(x: Tensor[(ROWS, short), "f32"]):
        return tf.topk(x, 4)

    with pytest.raises(LoweringError, match=r"topk.*topk_of_short_rows.*k=4.*lower bound 1.*at least k"):
        jit(topk_of_short_rows, target="cpu")


def test_an_op_reading_topks_result_runs_in_a_stage_of_its_own() -> None:
    """topk's k picks a row reach memory first; the op reading them is the next row-wise stage."""
    @func
    def scaled_topk(x: Tensor[(ROWS, 8), "f32"]):
        values, _ = tf.topk(x, 2)
        return values * 2.0

    fn = lower(scaled_topk, "cpu").functions["scaled_topk"]
    assert len(fn.stages) == 2 and len(fn.temps) == 1
    x = K.distinct_rows((9, 8), 37)[0]
    out = compiled_only(jit(scaled_topk, target="cpu"))(x)
    torch.testing.assert_close(out, torch.topk(x, 2).values * 2.0, rtol=0.0, atol=0.0, equal_nan=True)


def test_values_returned_twice_and_a_row_independent_topk() -> None:
    """A result returned twice is computed in registers and stored to each output; a topk of a weight (the same
    for every row) is computed once, before the row loop."""
    @func
    def topk_twice_and_of_a_weight(x: Tensor[(ROWS, 40), "bf16"], w: Tensor[(40,), "bf16"]):
        values, indices = tf.topk(x, 3)
        return (values, indices, values, *tf.topk(w, 2, largest=False))

    x, w = K.distinct_rows((9, 40), 35)[1], K.distinct_rows((1, 40), 36)[1][0]
    outs = compiled_only(jit(topk_twice_and_of_a_weight, target="cpu"))(x, w)
    assert topk_disagreements(x, outs[0], outs[1], 3, True) == []
    torch.testing.assert_close(outs[2], outs[0], rtol=0.0, atol=0.0, equal_nan=True)  # NaN of row 1 included
    assert topk_disagreements(w, outs[3], outs[4], 2, False) == []

"""``index_copy`` compiles: x copied into the result, then the source's rows written at the positions the index holds
(read on the device, each checked against the axis's extent before any write), a row-wise kernel each. Jitted for the
CPU against the evaluator (the compiled code alone: the evaluator patched to raise, outputs handed in filled with NaN),
their CUDA source built with nvcc in tests/test_compile_cuda_build.py. Along the last axis, through swapped axes
(lower/gather_last.py). ``index_add``: tests/test_compile_index_add.py.

Every value is copied or computed by one elementwise op on both sides: exact.
"""

from __future__ import annotations

import pytest
import torch

from tests.compile_kernels import compiled_only
from tilefoundry import func, jit, module
from tilefoundry.dsl import DimVar, Tensor, tf
from tilefoundry.runtime.check import check, equal

pytestmark = pytest.mark.usefixtures("compile_cache")

N = DimVar("n", 1, 32)


@module(entry="rows")
class IndexCopies:
    @func
    def rows(x: Tensor[(6, 8), "f32"], idx: Tensor[(3,), "i64"], src: Tensor[(3, 8), "f32"]):
        """Rows of a matrix replaced (an expert's tokens written back)."""
        return tf.index_copy(x, idx, src)

    @func
    def middle(x: Tensor[(2, 5, 4), "bf16"], idx: Tensor[(N,), "i64"], src: Tensor[(2, N, 4), "bf16"]):
        """Along a middle axis, as many positions as the index holds at launch."""
        return tf.index_copy(x, idx, src, dim=1)

    @func
    def computed(x: Tensor[(6, 8), "f32"], idx: Tensor[(2,), "i32"], src: Tensor[(2, 8), "f32"]):
        """Computed operands, an i32 index, and an op after it."""
        return tf.index_copy(x * 2.0, idx, src + 1.0) - 1.0


CASES = {
    "rows": lambda: (torch.randn(6, 8), torch.tensor([4, 0, 2]), torch.randn(3, 8)),
    "middle": lambda: (torch.randn(2, 5, 4).bfloat16(), torch.tensor([3, 1]), torch.randn(2, 2, 4).bfloat16()),
    "computed": lambda: (torch.randn(6, 8), torch.tensor([5, 1], dtype=torch.int32), torch.randn(2, 8)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_index_copy_matches_the_evaluator(name: str) -> None:
    fn = IndexCopies.functions[name]
    compiled = jit(IndexCopies, target="cpu").functions[name]
    torch.manual_seed(7)
    report = check(compiled_only(compiled), fn, CASES[name](), expect={"output": [equal()]})
    assert report.passed, f"{name}:\n{report}"


def test_a_position_outside_the_axis_is_refused_before_anything_is_written() -> None:
    compiled = jit(IndexCopies, target="cpu").functions["rows"]
    out = torch.full((6, 8), float("nan"))
    with pytest.raises(ValueError, match=r"argument idx holds the position 9 \(element 1\), outside the 6 positions"
                                         r".*pass positions in \[0, 6\)"):
        compiled(torch.randn(6, 8), torch.tensor([4, 9, 2]), torch.randn(3, 8), out)
    assert out.isnan().all()


@pytest.mark.parametrize("vector", [False, True], ids=["rows", "vector"])
def test_a_scatter_along_the_last_axis_writes_through_swapped_axes(vector: bool) -> None:
    """index_copy along the last axis (lower/gather_last.py: the op along the axis before it, of x and the source with
    their last two axes swapped; a vector as a column)."""
    if vector:
        @func
        def within_rows(x: Tensor[(8,), "bf16"], idx: Tensor[(3,), "i64"], src: Tensor[(3,), "bf16"]):
            return tf.index_copy(x, idx, src)

        args = (torch.randn(8).bfloat16(), torch.tensor([5, 0, 7]), torch.randn(3).bfloat16())
    else:
        @func
        def within_rows(x: Tensor[(6, 8), "f32"], idx: Tensor[(3,), "i64"], src: Tensor[(6, 3), "f32"]):
            return tf.index_copy(x, idx, src, dim=1)

        args = (torch.randn(6, 8), torch.tensor([5, 0, 7]), torch.randn(6, 3))
    report = check(compiled_only(jit(within_rows, target="cpu")), within_rows, args, expect={"output": [equal()]})
    assert report.passed, str(report)

"""``index_add`` compiles: each row of the result starts from x's row and adds, in the index's order, alpha times
every source row whose index names it, rounded after each add as torch's CPU kernel does (lower/index_add.py,
``ops::index_add``): a position the index names several times sums all its rows, the same on every run. Jitted for
the CPU against the evaluator (the compiled code alone: the evaluator patched to raise, outputs handed in filled
with NaN), along the first and a middle axis, in f32, bf16 and i32, at a DimVar count of source rows; a position
outside the axis is refused before anything is written; along the last axis it is refused saying why. The CUDA
source built with nvcc in tests/test_compile_cuda_build.py and run on the H200 in tests/gpu/test_compile_stages.py.

Tolerances: exact. Each add is one rounding of the exact sum of two values (alpha 1, or 0.5: a power of two).
"""

from __future__ import annotations

import pytest
import torch

from tests.compile_kernels import compiled_only
from tilefoundry import func, jit, lower, module
from tilefoundry.dsl import DimVar, Tensor, tf
from tilefoundry.lower import LoweringError
from tilefoundry.runtime.check import check, equal

pytestmark = pytest.mark.usefixtures("compile_cache")

N = DimVar("n", 1, 64)


@module(entry="rows")
class IndexAdds:
    @func
    def rows(x: Tensor[(6, 8), "f32"], idx: Tensor[(N,), "i64"], src: Tensor[(N, 8), "f32"]):
        """Rows of the first axis, positions repeated (their rows summed in order)."""
        return tf.index_add(x, idx, src)

    @func
    def halved(x: Tensor[(6, 16), "bf16"], idx: Tensor[(N,), "i64"], src: Tensor[(N, 16), "bf16"]):
        """bf16, alpha 0.5, torch's argument order: rounded to bf16 after each add."""
        return tf.index_add(x, 0, idx, src, alpha=0.5)

    @func
    def middle(x: Tensor[(2, 5, 4), "f32"], idx: Tensor[(3,), "i32"], src: Tensor[(2, 3, 4), "f32"]):
        """Along a middle axis, an i32 index."""
        return tf.index_add(x, idx, src, dim=1)

    @func
    def counts(x: Tensor[(4, 8), "i32"], idx: Tensor[(N,), "i64"], src: Tensor[(N, 8), "i32"]):
        """Integers: a histogram of rows."""
        return tf.index_add(x, idx, src) * 2


def _inputs(name: str, n: int, seed: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    if name == "middle":
        return (torch.randn(2, 5, 4, generator=g), torch.tensor([4, 0, 4], dtype=torch.int32),
                torch.randn(2, 3, 4, generator=g))
    if name == "counts":
        return (torch.randint(-5, 5, (4, 8), generator=g, dtype=torch.int32), torch.randint(0, 4, (n,), generator=g),
                torch.randint(-9, 9, (n, 8), generator=g, dtype=torch.int32))
    dt, cols = (torch.bfloat16, 16) if name == "halved" else (torch.float32, 8)
    return (torch.randn(6, cols, generator=g).to(dt), torch.randint(0, 6, (n,), generator=g),
            torch.randn(n, cols, generator=g).to(dt))


@pytest.mark.parametrize("name", sorted(IndexAdds.functions))
def test_index_add_matches_the_evaluator(name: str) -> None:
    fn = IndexAdds.functions[name]
    compiled = jit(IndexAdds, target="cpu").functions[name]
    for n in (1, 5, 40):
        report = check(compiled_only(compiled), fn, _inputs(name, n, n), expect={"output": [equal()]})
        assert report.passed, f"{name} at n = {n}:\n{report}"


def test_a_position_named_twice_sums_both_rows_in_order() -> None:
    compiled = jit(IndexAdds, target="cpu").functions["rows"]
    x, src = torch.zeros(6, 8), torch.arange(24, dtype=torch.float32).reshape(3, 8)
    got = compiled(x, torch.tensor([2, 5, 2]), src)
    assert torch.equal(got[2], src[0] + src[2]) and torch.equal(got[5], src[1])
    assert torch.equal(got[[0, 1, 3, 4]], torch.zeros(4, 8))


def test_a_position_outside_the_axis_is_refused_before_anything_is_written() -> None:
    compiled = jit(IndexAdds, target="cpu").functions["rows"]
    out = torch.full((6, 8), float("nan"))
    with pytest.raises(ValueError, match=r"argument idx holds the position 6 \(element 1\), outside the 6 positions "
                                         r"along the indexed axis.*pass positions in \[0, 6\)"):
        compiled(torch.randn(6, 8), torch.tensor([4, 6, 2]), torch.randn(3, 8), out)
    assert out.isnan().all()


def test_along_the_last_axis_it_is_refused_saying_why() -> None:
    @func
    def within_rows(x: Tensor[(6, 8), "f32"], idx: Tensor[(3,), "i64"], src: Tensor[(6, 3), "f32"]):
        return tf.index_add(x, idx, src, dim=1)

    with pytest.raises(LoweringError, match=r"index_add in within_rows: along the last axis it adds elements within "
                                            r"each row.* index_add along an earlier axis"):
        lower(within_rows, "cpu")

"""``index_add`` compiles: each row of the result starts from x's row and adds, in the index's order, alpha times
every source row whose index names it, rounded after each add as torch's CPU kernel does (lower/index_add.py,
``ops::index_add``): a position the index names several times sums all its rows, the same on every run. Jitted for
the CPU against the evaluator (the compiled code alone: the evaluator patched to raise, outputs handed in filled
with NaN), along the first and a middle axis, in f32, bf16 and i32, at a DimVar count of source rows, and along the
last axis (through swapped axes); a position outside the axis is refused before anything is written. The CUDA
source built with nvcc in tests/test_compile_cuda_build.py and run on the H200 in tests/gpu/test_compile_stages.py.

Tolerances: exact along a leading axis: each add is one rounding of the exact sum of two values (alpha 1, or 0.5: a
power of two), as torch's; along the last axis one unit in the last place (see that test).
"""

from __future__ import annotations

import pytest
import torch

from tests.compile_kernels import compiled_only
from tilefoundry import func, jit, module
from tilefoundry.dsl import DimVar, Tensor, tf
from tilefoundry.runtime.check import allclose, check, equal

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

    @func
    def columns(x: Tensor[(4, 8), "i32"], idx: Tensor[(N,), "i64"], src: Tensor[(4, N), "i32"]):
        """Along the last axis (through swapped axes), integers: exact in any order."""
        return tf.index_add(x, idx, src, dim=1)


def _inputs(name: str, n: int, seed: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    if name == "middle":
        return (torch.randn(2, 5, 4, generator=g), torch.tensor([4, 0, 4], dtype=torch.int32),
                torch.randn(2, 3, 4, generator=g))
    if name == "columns":
        return (torch.randint(-5, 5, (4, 8), generator=g, dtype=torch.int32), torch.randint(0, 8, (n,), generator=g),
                torch.randint(-9, 9, (4, n), generator=g, dtype=torch.int32))
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


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_along_the_last_axis_it_adds_through_swapped_axes(dtype: str) -> None:
    """index_add along the last axis (lower/gather_last.py: along the axis before it, of x and the source with their
    last two axes swapped). torch sums a position named twice along the last axis in float, rounding once, where the
    kernel rounds after each add (as torch does along a leading axis): within one unit in the last place (bf16:
    2**-7 relative; f32: 1e-6)."""
    @func
    def within_rows(x: Tensor[(2, 4, 8), dtype], idx: Tensor[(5,), "i64"], src: Tensor[(2, 4, 5), dtype]):
        return tf.index_add(x, idx, src, dim=2) * 2.0

    g = torch.Generator().manual_seed(7)
    dt = torch.bfloat16 if dtype == "bf16" else torch.float32
    args = (torch.randn(2, 4, 8, generator=g).to(dt), torch.tensor([1, 1, 7, 0, 1]),
            torch.randn(2, 4, 5, generator=g).to(dt))
    close = allclose(atol=1e-6, rtol=2**-7 if dtype == "bf16" else 1e-6)
    report = check(compiled_only(jit(within_rows, target="cpu")), within_rows, args, expect={"output": [close]})
    assert report.passed, str(report)

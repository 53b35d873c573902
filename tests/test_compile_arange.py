"""``arange`` compiles in a row-wise kernel: each element of the row its position times the step plus the start
(``ops::iota``, the positions ``ops::arg_reduce`` counts), the same for every row. It is returned as it is, cast,
compared with positions passed in (a causal mask), broadcast against rows, started at a DimVar, and reshaped into a
column (a per-row value: its own kernel, read by the next). Jitted for the CPU against the evaluator (the compiled
code alone: the evaluator patched to raise, outputs handed in filled with NaN); every value is exact (small integers,
in f32 too). The same functions built with nvcc in tests/test_compile_cuda_build.py and run on the H200 in
tests/gpu/test_compile_stages.py.
"""

from __future__ import annotations

import pytest
import torch

from tests.compile_kernels import compiled_only, output_paths
from tilefoundry import func, jit, module
from tilefoundry.dsl import DimVar, Tensor, tf
from tilefoundry.runtime.check import allclose, check, equal

pytestmark = pytest.mark.usefixtures("compile_cache")

S = DimVar("s", 1, 64)
C = DimVar("c", 1, 300)


@module(entry="plain")
class Aranges:
    @func
    def plain(x: Tensor[(4, 8), "f32"]):
        """Returned as it is (i64), beside a value of the row."""
        return x * 2.0, tf.arange(8)

    @func
    def scaled(x: Tensor[(4, 24), "f32"]):
        """f32 positions from 3 every 2 (a row of 24), broadcast over the rows."""
        return x + tf.arange(3, 51, 2, dtype="f32")

    @func
    def masked(x: Tensor[(S, C), "f32"], pos: Tensor[(S,), "i64"]):
        """A causal mask from positions passed in (a DimVar row), then the softmax of what it keeps."""
        visible = tf.reshape(tf.arange(C), (1, C)) <= tf.reshape(pos, (S, 1))
        return tf.softmax(tf.where(visible, x, float("-inf")), axis=-1)

    @func
    def started(x: Tensor[(S, 16), "f32"], past: Tensor[(C, 2), "f32"]):
        """Positions from a DimVar on (the tokens after a cache of c entries): arange(c, c + 16)."""
        return x * tf.arange(past.shape[0], past.shape[0] + 16, dtype="f32")

    @func
    def causal(x: Tensor[(S, S), "f32"]):
        """The square causal mask of a prompt built from two aranges (one a column: a per-row value)."""
        rows = tf.reshape(tf.arange(x.shape[0]), (x.shape[0], 1))
        cols = tf.reshape(tf.arange(x.shape[0]), (1, x.shape[0]))
        return tf.where(cols <= rows, x, 0.0)

    @func
    def long_row(x: Tensor[(2, 4096), "bf16"]):
        """A row long enough to spread over many threads (each element's place from its thread's)."""
        return tf.cast(tf.arange(4096, dtype="f32") * 0.5, "bf16") + x


CASES = {
    "plain": lambda g: (torch.randn(4, 8, generator=g),),
    "scaled": lambda g: (torch.randn(4, 24, generator=g),),
    "masked": lambda g: (torch.randn(5, 37, generator=g), torch.tensor([30, 31, 32, 33, 36])),
    "started": lambda g: (torch.randn(3, 16, generator=g), torch.randn(7, 2, generator=g)),
    "causal": lambda g: (torch.randn(6, 6, generator=g),),
    "long_row": lambda g: (torch.zeros(2, 4096, dtype=torch.bfloat16),),
}

# Sums of exponentials (the softmax's) differ from the evaluator's in order only.
CLOSE = {"masked": 1e-6}


@pytest.mark.parametrize("name", sorted(CASES))
def test_arange_matches_the_evaluator(name: str) -> None:
    fn = Aranges.functions[name]
    compiled = jit(Aranges, target="cpu").functions[name]
    paths = output_paths(fn)
    predicate = allclose(atol=CLOSE[name], rtol=CLOSE[name]) if name in CLOSE else equal()
    report = check(compiled_only(compiled), fn, CASES[name](torch.Generator().manual_seed(3)),
                   expect={p: [predicate] for p in paths})
    assert report.passed, f"{name}:\n{report}"

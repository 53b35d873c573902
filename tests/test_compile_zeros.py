"""``zeros`` compiles as ``full_like`` does: a fill of the row-wise kernel's registers with 0 of its dtype, read by the
ops after it (broadcast against them, or wider than them) or returned as it is. Jitted for the CPU against the
evaluator (the compiled code alone: the evaluator patched to raise, outputs handed in filled with NaN); every value
is exact (adding or taking the larger of 0).
"""

from __future__ import annotations

import pytest
import torch

from tests.compile_kernels import compiled_only, output_paths
from tilefoundry import func, jit, module
from tilefoundry.dsl import DimVar, Tensor, tf
from tilefoundry.runtime.check import check, equal

pytestmark = pytest.mark.usefixtures("compile_cache")

S = DimVar("s", 1, 64)


@module(entry="added")
class Zeros:
    @func
    def added(x: Tensor[(2, 8), "f32"]):
        return x + tf.zeros((2, 8), "f32")

    @func
    def wider(x: Tensor[(8,), "f32"]):
        """Zeros of more rows than x: x broadcast over them."""
        return tf.zeros((3, 8), "f32") + x

    @func
    def returned(x: Tensor[(2, 8), "f32"]):
        return x * 2.0, tf.zeros((2, 8), "bf16")

    @func
    def relu(x: Tensor[(S, 8), "f32"]):
        """At a row count known at launch."""
        return tf.maximum(x, tf.zeros((S, 8), "f32"))

    @func
    def integers(x: Tensor[(2, 8), "i32"]):
        return x + tf.zeros((2, 8), "i32")


CASES = {
    "added": lambda g: (torch.randn(2, 8, generator=g),),
    "wider": lambda g: (torch.randn(8, generator=g),),
    "returned": lambda g: (torch.randn(2, 8, generator=g),),
    "relu": lambda g: (torch.randn(5, 8, generator=g),),
    "integers": lambda g: (torch.randint(-5, 5, (2, 8), generator=g, dtype=torch.int32),),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_zeros_match_the_evaluator(name: str) -> None:
    fn = Zeros.functions[name]
    compiled = jit(Zeros, target="cpu").functions[name]
    paths = output_paths(fn)
    report = check(compiled_only(compiled), fn, CASES[name](torch.Generator().manual_seed(3)),
                   expect={p: [equal()] for p in paths})
    assert report.passed, f"{name}:\n{report}"

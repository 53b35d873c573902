"""``split`` compiles as views: each part of a split is a slice of the memory it splits (an offset along the split
axis), read by the ops after it, never a copy; a part a function returns is copied to its output as a slice is.
Jitted for the CPU against the evaluator (the compiled code alone: the evaluator patched to raise, outputs handed
in filled with NaN), their CUDA source built with nvcc in tests/test_compile_cuda_build.py.

Tolerances: f32 results differ from torch's only in the order of a sum (a norm's, a matmul's): 1e-5 relative plus
1e-5 absolute; bf16 parts are copied, exactly.
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
F32 = allclose(atol=1e-5, rtol=1e-5)


@module(entry="columns")
class Splits:
    @func
    def columns(x: Tensor[(S, 8), "f32"]):
        """Two halves of each row, at any row count."""
        a, b = tf.split(x, 1, 2)
        return a * 2.0 + b

    @func
    def rows(x: Tensor[(4, 8), "f32"]):
        """The first two rows against the last two."""
        a, b = tf.split(x, 0, 2)
        return a - b

    @func
    def normed(x: Tensor[(3, 8), "f32"], w: Tensor[(8,), "f32"]):
        """Four parts of a computed value (the norm's result, stored first), along the last axis as -1."""
        y = tf.rms_norm(x, w, 1e-6)
        a, b, c, d = tf.split(y, -1, 4)
        return tf.silu(a) * b + c - d

    @func
    def returned(x: Tensor[(3, 12), "bf16"]):
        """Parts returned as they are, in another order: copies of their slices."""
        a, _, c = tf.split(x, 1, 3)
        return c, a

    @func
    def qkv(x: Tensor[(S, 32), "f32"], w: Tensor[(48, 32), "f32"]):
        """A packed projection's result split into q, k and v (the families' packed q/k/v)."""
        y = tf.matmul(x, tf.transpose(w, (1, 0)))
        q, k, v = tf.split(y, 1, 3)
        return q * k + v


CASES = {
    "columns": lambda g: (torch.randn(5, 8, generator=g),),
    "rows": lambda g: (torch.randn(4, 8, generator=g),),
    "normed": lambda g: (torch.randn(3, 8, generator=g), torch.randn(8, generator=g)),
    "returned": lambda g: (torch.randn(3, 12, generator=g).bfloat16(),),
    "qkv": lambda g: (torch.randn(17, 32, generator=g), torch.randn(48, 32, generator=g)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_split_parts_match_the_evaluator(name: str) -> None:
    fn = Splits.functions[name]
    compiled = jit(Splits, target="cpu").functions[name]
    expect = ({"output[0]": [equal()], "output[1]": [equal()]} if name == "returned" else {"output": [F32]})
    for seed in range(2):
        report = check(compiled_only(compiled), fn, CASES[name](torch.Generator().manual_seed(seed)), expect=expect)
        assert report.passed, f"{name}, seed {seed}:\n{report}"


def test_split_parts_are_offsets_into_the_memory_they_split_not_copies() -> None:
    tir = lower(Splits, "cpu")
    columns = tir.functions["columns"]
    assert len(columns.stages) == 1, str(columns)  # the parts read x itself, in the one row-wise kernel
    text = str(columns)
    assert "split[row * 8:]" in text and "split_1[4 + row * 8:]" in text, text
    qkv = str(tir.functions["qkv"])  # the matmul's result in a temporary, its three parts read from it
    assert "split_1[16 + row * 48:]" in qkv and "split_2[32 + row * 48:]" in qkv, qkv
    rows = str(tir.functions["rows"])  # the second part two rows of 8 later
    assert "split_1[16 + row * 8:]" in rows and len(tir.functions["rows"].stages) == 1, rows

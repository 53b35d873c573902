"""Chains of elementwise ops run as one call on the CPU target (``codegen/cpu/chains.py``): a unary op that reads
only the result of the elementwise call before it is applied inside that call, when skipping the buffer between
them changes nothing a later statement reads and rounds nothing (the buffer holds 32-bit floats). A softmax then
makes two passes over its row fewer. Values against the evaluator; the CUDA source keeps its calls apart (nvcc
keeps a thread's elements in registers from op to op already)."""

from __future__ import annotations

import pytest
import torch

from tests.compile_kernels import compiled_only
from tilefoundry import func, jit, lower
from tilefoundry.codegen import generate
from tilefoundry.dsl import DimVar, Tensor, tf
from tilefoundry.runtime.check import allclose, check

pytestmark = pytest.mark.usefixtures("compile_cache")
ROWS = DimVar("rows", 0, 1 << 20)


@func
def softmax_rows(x: Tensor[(ROWS, 96), "bf16"]):
    return tf.softmax(x, axis=-1)


@func
def reread(x: Tensor[(ROWS, 64), "f32"]):
    """x * 2 is read again after its exponential: the exponential stays a call of its own."""
    t = x * 2.0
    return tf.exp(t) + t


@func
def rounded(x: Tensor[(ROWS, 64), "bf16"]):
    """x * 3 is rounded to bf16 before its exponential reads it: folding would skip that rounding."""
    return tf.exp(x * 3.0)


def _calls(fn: object, target: str) -> list[str]:
    lines = generate(lower(fn, target)).source.splitlines()
    return [line.strip() for line in lines if line.strip().startswith("ops::")]


def test_a_softmax_subtracts_and_exponentiates_in_one_call_and_scales_into_its_output_in_another() -> None:
    calls = _calls(softmax_rows, "cpu")
    assert "ops::binary(ops::then(ops::sub_op{}, ops::exp_rounded_op{}), softmax_x, softmax_max, softmax_exp);" in calls
    assert "ops::binary(ops::then(ops::mul_op{}, ops::cast_op{}), softmax_exp, softmax_inv_sum, out);" in calls
    assert len(calls) == 6  # load, max, subtract + exp, sum, reciprocal, scale + store: eight calls unfused
    assert not any("ops::then" in c for c in _calls(softmax_rows, "cuda:sm_90a"))
    compiled = jit(softmax_rows, target="cpu")
    x = torch.randn(37, 96).bfloat16() * 4
    report = check(compiled_only(compiled), softmax_rows, (x,), expect={"output": [allclose(atol=2**-8, rtol=2**-7)]})
    assert report.passed, report


@pytest.mark.parametrize(("fn", "dtype", "close"), [(reread, torch.float32, allclose(atol=1e-5, rtol=1e-5)),
                                                     (rounded, torch.bfloat16, allclose(atol=2**-8, rtol=2**-7))],
                         ids=["read-again", "rounded-between"])
def test_a_chain_whose_buffer_is_read_again_or_rounded_keeps_its_calls_apart(fn: object, dtype: torch.dtype,
                                                                              close: object) -> None:
    assert not any("ops::then" in c for c in _calls(fn, "cpu"))
    compiled = jit(fn, target="cpu")
    x = torch.randn(5, 64).to(dtype)
    report = check(compiled_only(compiled), fn, (x,), expect={"output": [close]})
    assert report.passed, report

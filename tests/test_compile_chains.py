"""Chains of elementwise ops run as one call on the CPU target (``codegen/cpu/chains.py``): a unary op that reads
only the result of the elementwise call before it is applied inside that call, when skipping the buffer between
them changes nothing a later statement reads and rounds nothing (the buffer holds 32-bit floats). A softmax then
makes two passes over its row fewer. A reduction of the result of the elementwise call just before it is folded into
that call (``ops::fold``) when that result holds 32-bit floats: the softmax's sum into its exponential's pass, and in
bf16 its max into the pass casting the row to f32, two passes fewer again. Values against the evaluator; the CUDA
source keeps its calls apart (nvcc keeps a thread's elements in registers from op to op already)."""

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
def softmax_f32(x: Tensor[(ROWS, 100), "f32"]):
    return tf.softmax(x, axis=-1)


@func
def centered_exp(x: Tensor[(ROWS, 72), "f32"]):
    """The mean of a chain's result, read again after it: the mean folds into the chain's call."""
    e = tf.exp(x * 0.5)
    return e - tf.reduce(e, kind="mean")


@func
def absmax_scaled(x: Tensor[(ROWS, 80), "bf16"]):
    """The largest magnitude of the row cast to f32 folds into the cast."""
    t = tf.cast(x, "f32")
    return t / tf.reduce(t, kind="abs_max")


@func
def rounded_sum(x: Tensor[(ROWS, 64), "bf16"]):
    """x * 3 is rounded to bf16 before its sum reads it: its call stores what the sum must fold, not what it
    computed."""
    t = x * 3.0
    return t - tf.reduce(t, kind="sum")


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
    assert "ops::unary(ops::cast_op{}, x, softmax_x, ops::fold<ops::max_op, cute::seq<0, 1, 2>>(softmax_max));" in calls
    assert ("ops::binary(ops::then(ops::sub_op{}, ops::exp_rounded_op{}), softmax_x, softmax_max, softmax_exp, "
            "ops::fold<ops::sum_op, cute::seq<0, 1, 2>>(softmax_sum));") in calls
    assert "ops::binary(ops::then(ops::mul_op{}, ops::cast_op{}), softmax_exp, softmax_inv_sum, out);" in calls
    assert len(calls) == 4  # load + max, subtract + exp + sum, reciprocal, scale + store: eight calls unfused
    assert not any("ops::then" in c or "ops::fold" in c for c in _calls(softmax_rows, "cuda:sm_90a"))
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


@pytest.mark.parametrize(("fn", "hidden", "dtype", "folded", "close"), [
    (softmax_f32, 100, torch.float32,
     "ops::binary(ops::then(ops::sub_op{}, ops::exp_op{}), x, softmax_max, softmax_exp, "
     "ops::fold<ops::sum_op, cute::seq<0, 1, 2>>(softmax_sum));", allclose(atol=1e-6, rtol=1e-5)),
    (centered_exp, 72, torch.float32,
     "ops::binary(ops::then(ops::mul_op{}, ops::exp_op{}), x, 0.5f, e, "
     "ops::fold<ops::mean_op, cute::seq<0, 1, 2>>(reduce));",
     allclose(atol=1e-5, rtol=1e-5)),
    (absmax_scaled, 80, torch.bfloat16,
     "ops::unary(ops::cast_op{}, x, t, ops::fold<ops::absmax_op, cute::seq<0, 1, 2>>(reduce));",
     allclose(atol=2**-8, rtol=2**-7)),
], ids=["softmax-f32", "mean", "absmax"])
def test_a_reduction_of_a_calls_result_folds_into_that_call(fn: object, hidden: int, dtype: torch.dtype,
                                                           folded: str, close: object) -> None:
    calls = _calls(fn, "cpu")
    assert folded in calls
    kind = folded.split("ops::fold<", 1)[1].split(",", 1)[0]  # ops::sum_op: no call of its own left
    assert not any(c.startswith(f"ops::reduce<{kind}") for c in calls)
    compiled = jit(fn, target="cpu")
    x = (torch.randn(19, hidden) * 3).to(dtype)  # 72, 80, 100: no multiple of the folds' 16 or 64 floats: tails
    report = check(compiled_only(compiled), fn, (x,), expect={"output": [close]})
    assert report.passed, report


def test_a_reduction_of_a_rounded_result_keeps_its_own_call() -> None:
    calls = _calls(rounded_sum, "cpu")
    assert not any("ops::fold" in c for c in calls)
    assert any(c.startswith("ops::reduce<ops::sum_op") for c in calls)
    compiled = jit(rounded_sum, target="cpu")
    x = torch.randn(7, 64).bfloat16()
    report = check(compiled_only(compiled), rounded_sum, (x,), expect={"output": [allclose(atol=2**-4, rtol=2**-7)]})
    assert report.passed, report

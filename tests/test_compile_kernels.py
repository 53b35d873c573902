"""The acceptance kernels, jitted for the CPU, against the evaluator with ``check``.

Every kernel runs at several row counts from one build (its row count is a DimVar): none, one, a
count that is a multiple of nothing (7, 13) and more rows than a CTA takes. It must be the compiled
code that answers: the result is a CompiledModule whose library exports the entry's symbol, it runs
with every evaluator handler patched to raise, and outputs handed in filled with NaN come back with
every element written.

The inputs, tolerances and the poisoned-output call live in tests/compile_kernels.py, shared with the
GPU run (tests/gpu/test_compile_cuda.py).
"""

from __future__ import annotations

import ctypes
from typing import Any

import pytest
import torch

from tests import compile_kernels as K
from tests.compile_kernels import (
    F32,
    compiled_only,
    evaluator_refuses,
    expectations,
    inputs_for,
    output_templates,
    rand,
)
from tilefoundry import jit
from tilefoundry.runtime import CompiledModule
from tilefoundry.runtime.check import check, equal

pytestmark = pytest.mark.usefixtures("compile_cache")

ROW_COUNTS = (0, 1, 7, 13, 130)


@pytest.mark.parametrize("kernel", K.ACCEPTANCE, ids=lambda k: k.name)
def test_compiled_kernel_matches_the_evaluator_at_every_row_count(kernel: Any) -> None:
    compiled = jit(kernel, target="cpu")
    assert isinstance(compiled, CompiledModule) and compiled.module is None
    assert compiled.name == compiled.entry == kernel.name
    lib = ctypes.CDLL(str(compiled.library))
    assert lib[f"__tvm_ffi_{kernel.name}"] is not None  # the exported tvm-ffi entry symbol
    for rows in ROW_COUNTS:
        inputs = inputs_for(kernel, rows)
        report = check(compiled_only(compiled), kernel, inputs, expect=expectations(kernel))
        assert report.passed, f"{kernel.name} at {rows} rows:\n{report}"


@pytest.mark.parametrize("kernel", [K.rms_norm, K.softmax, K.reductions, K.elementwise], ids=lambda k: k.name)
def test_every_output_element_is_written(kernel: Any) -> None:
    compiled = jit(kernel, target="cpu")
    inputs = inputs_for(kernel, 13)
    outs = output_templates(compiled, inputs)
    filled = [torch.full_like(o, float("nan")) if o.dtype.is_floating_point else torch.ones_like(o) for o in outs]
    with evaluator_refuses():
        returned = compiled(*inputs, *filled)
    returned = returned if isinstance(returned, tuple) else (returned,)
    for given, back, ref in zip(filled, returned, _as_tuple(kernel(*inputs))):
        assert back is given  # pre-alloc writes and returns the caller's tensors
        if given.dtype.is_floating_point:
            assert not torch.isnan(given).any()
        else:
            assert torch.equal(given, ref)


def _as_tuple(x: Any) -> tuple:
    return x if isinstance(x, tuple) else (x,)


def test_empty_reduction_gives_each_kind_its_identity() -> None:
    compiled = jit(K.reductions, target="cpu")
    x = torch.empty(5, 0)
    with evaluator_refuses():
        total, largest, mean = compiled(x)
    assert torch.equal(total, torch.zeros(5))
    assert torch.equal(largest, torch.full((5, 1), float("-inf")))
    assert torch.isnan(mean).all()  # 0 / 0, as torch.mean of nothing
    report = check(compiled, K.reductions, (x,),  # the evaluator gives each kind's identity too
                   expect={"output[0]": [equal()], "output[1]": [equal()], "output[2]": [equal(equal_nan=True)]})
    assert report.passed, str(report)


def test_a_dimvar_axis_runs_at_two_extents_from_one_build() -> None:
    compiled = jit(K.reductions, target="cpu")
    for cols in (33, 200):
        x = rand((7, cols), torch.float32, cols)
        report = check(compiled, K.reductions, (x,), expect={f"output[{i}]": [F32] for i in range(3)})
        assert report.passed, str(report)
    assert jit(K.reductions, target="cpu") is compiled

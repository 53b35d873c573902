"""The acceptance kernels, jitted for the CPU, against the evaluator with ``check``.

Every kernel runs at several row counts from one build (its row count is a DimVar): none, one, a
count that is a multiple of nothing (7, 13) and more rows than a CTA takes. It must be the compiled
code that answers: the result is a CompiledModule whose library exports the entry's symbol, it runs
with every evaluator handler patched to raise, and outputs handed in filled with NaN come back with
every element written.

Tolerances: outputs whose computation the evaluator and the kernel perform in the same order with the
same roundings (casts, bf16 elementwise ops rounding once per op, rms_norm in f32 to one bf16 rounding)
still differ where torch's vectorised kernels round differently (a pairwise sum, a SLEEF exp); bf16
outputs are compared to two bf16 ulps (2**-6 relative: rms_norm rounds twice, before and after the
weight multiply, and a sum in another order may tip either rounding) plus an absolute floor, f32 outputs to 1e-5
relative (a few ulps accumulated over a row of at most 96 elements) plus 1e-6 absolute for values near 0.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

import pytest
import torch

from tests import compile_kernels as K
from tilefoundry import jit
from tilefoundry.evaluator import registry
from tilefoundry.runtime import CompiledModule
from tilefoundry.runtime.check import allclose, check, equal

pytestmark = pytest.mark.usefixtures("compile_cache")

ROW_COUNTS = (0, 1, 7, 13, 130)
BF16 = allclose(atol=1e-3, rtol=2**-6)
F32 = allclose(atol=1e-6, rtol=1e-5)


def _rand(shape: tuple[int, ...], dtype: torch.dtype, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(dtype)


def _inputs(kernel: Any, rows: int) -> tuple[torch.Tensor, ...]:
    bf, f = torch.bfloat16, torch.float32
    h, ffn = K.HIDDEN, K.FFN
    return {
        "rms_norm": lambda: (_rand((rows, h), bf, 1), _rand((h,), bf, 2)),
        "rms_norm_written_out": lambda: (_rand((rows, h), f, 3), _rand((h,), f, 4)),
        "softmax": lambda: (_rand((2, rows, h), f, 5) * 4,),
        "softmax_written_out": lambda: (_rand((rows, h), bf, 6) * 4,),
        "swiglu": lambda: (_rand((rows, ffn), bf, 7), _rand((rows, ffn), bf, 8)),
        "residual_rms_norm": lambda: (_rand((rows, h), bf, 9), _rand((rows, h), bf, 10), _rand((h,), bf, 11)),
        "reductions": lambda: (_rand((rows, 33), f, 12),),
        "cast_chain": lambda: (_rand((rows, h), f, 13) * 100,),
        "elementwise": lambda: (_rand((rows, h), f, 14), _rand((rows, h), f, 15)),
    }[kernel.name]()


def _expect(kernel: Any) -> dict[str, list]:
    ref = kernel.output_types
    leaves = ref if isinstance(ref, tuple) else (ref,)
    paths = ["output"] if not isinstance(ref, tuple) else [f"output[{i}]" for i in range(len(leaves))]
    out = {}
    for path, t in zip(paths, leaves):
        if t.dtype.name == "bool":
            out[path] = [equal()]
        elif kernel.name == "cast_chain":
            out[path] = [equal()]  # conversions and one multiply by 3 round identically
        else:
            out[path] = [BF16 if t.dtype.name == "bf16" else F32]
    return out


@contextmanager
def evaluator_refuses() -> Any:
    """Every evaluator handler raises while the block runs: whatever answers, it is not the evaluator."""
    saved = dict(registry.HANDLERS)

    def refuse(node: Any, *args: Any) -> Any:
        raise AssertionError(f"the evaluator ran {node.op} inside a compiled call")

    try:
        registry.HANDLERS.update({op: refuse for op in saved})
        yield
    finally:
        registry.HANDLERS.clear()
        registry.HANDLERS.update(saved)


def compiled_only(compiled: CompiledModule) -> Callable[..., Any]:
    """The compiled entry, called pre-alloc with NaN-filled outputs (all of which must be overwritten)."""

    def call(*inputs: torch.Tensor) -> Any:
        outs = [torch.full(tuple(t.shape), float("nan"), dtype=t.dtype) if t.dtype.is_floating_point
                else torch.full(tuple(t.shape), True if t.dtype == torch.bool else -7, dtype=t.dtype)
                for t in _output_templates(compiled, inputs)]
        with evaluator_refuses():
            result = compiled(*inputs, *outs)
        return result

    return call


def _output_templates(compiled: CompiledModule, inputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    with evaluator_refuses():
        made = compiled(*inputs)  # auto-alloc: shapes and dtypes from the entry's ABI
    return made if isinstance(made, tuple) else (made,)


@pytest.mark.parametrize("kernel", K.ACCEPTANCE, ids=lambda k: k.name)
def test_compiled_kernel_matches_the_evaluator_at_every_row_count(kernel: Any) -> None:
    compiled = jit(kernel, target="cpu")
    assert isinstance(compiled, CompiledModule) and compiled.module is None
    assert compiled.name == compiled.entry == kernel.name
    lib = ctypes.CDLL(str(compiled.library))
    assert lib[f"__tvm_ffi_{kernel.name}"] is not None  # the exported tvm-ffi entry symbol
    for rows in ROW_COUNTS:
        inputs = _inputs(kernel, rows)
        report = check(compiled_only(compiled), kernel, inputs, expect=_expect(kernel))
        assert report.passed, f"{kernel.name} at {rows} rows:\n{report}"


@pytest.mark.parametrize("kernel", [K.rms_norm, K.softmax, K.reductions, K.elementwise], ids=lambda k: k.name)
def test_every_output_element_is_written(kernel: Any) -> None:
    compiled = jit(kernel, target="cpu")
    inputs = _inputs(kernel, 13)
    outs = _output_templates(compiled, inputs)
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
        x = _rand((7, cols), torch.float32, cols)
        report = check(compiled, K.reductions, (x,), expect={f"output[{i}]": [F32] for i in range(3)})
        assert report.passed, str(report)
    assert jit(K.reductions, target="cpu") is compiled

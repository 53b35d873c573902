"""8-bit floats (e4m3fn, e5m2) compiled for the CPU: casts to them rounded as torch rounds them (to nearest even; past
the largest finite value NaN for e4m3fn, an infinity for e5m2: CUTLASS's own conversion saturates there), casts from
them exact, and the arithmetic around them in float. The same functions run on a GPU in
tests/gpu/test_compile_stages.py, and their CUDA source builds in tests/test_compile_cuda_build.py's one unit."""

from __future__ import annotations

import pytest
import torch

from tests.compile_kernels import compiled_only
from tilefoundry import func, jit, lower, module
from tilefoundry.codegen import generate
from tilefoundry.dsl import DimVar, Tensor, tf
from tilefoundry.runtime.check import check, equal

pytestmark = pytest.mark.usefixtures("compile_cache")

R = DimVar("r", 1, 1025)
# Rounding ties, the largest finite values and just past them, infinities, NaN, a tiny value, a negative zero.
EDGES = [464.0, 465.0, 479.0, 480.0, -465.0, 448.0, float("inf"), -float("inf"), float("nan"), 57344.0, 59391.0,
         59392.0, 61440.0, -61440.0, 1e-9, -0.0]


@module(entry="to_e4m3")
class Fp8:
    @func
    def to_e4m3(x: Tensor[(R, 64), "f32"]):
        return tf.cast(x, "fp8e4m3")

    @func
    def to_e5m2(x: Tensor[(R, 64), "bf16"]):
        return tf.cast(x, "fp8e5m2")

    @func
    def dequant(q: Tensor[(R, 64), "fp8e4m3"], scale: Tensor[(R, 1), "f32"]):
        """A per-row scale of an e4m3 weight, as an FP8 checkpoint's is read."""
        return tf.cast(q, "f32") * scale

    @func
    def from_e5m2(q: Tensor[(R, 64), "fp8e5m2"]):
        return tf.cast(q, "bf16")


EIGHT_BIT_CASTS = [("to_e4m3", torch.float32, torch.float8_e4m3fn), ("to_e5m2", torch.bfloat16, torch.float8_e5m2)]


def fp8_values(rows: int, dtype: torch.dtype) -> torch.Tensor:
    """``rows`` x 64 values of ``dtype`` from 2^-12 to 2^18 in magnitude, the first row beginning with EDGES."""
    g = torch.Generator().manual_seed(rows)
    x = torch.randn(rows, 64, generator=g) * torch.logspace(-12, 18, rows, base=2.0)[:, None]  # 2^-12 .. 2^18
    x[0, :len(EDGES)] = torch.tensor(EDGES)
    return x.to(dtype)


def eight_bit_patterns(fp8: torch.dtype) -> torch.Tensor:
    """A 4 x 64 tensor of ``fp8`` holding every one of its 256 bit patterns."""
    every = torch.arange(256, dtype=torch.uint8).repeat(64 * 4 // 256 + 1)[:4 * 64].reshape(4, 64)
    return every.view(fp8)


def check_8_bit_cast(name: str, dtype: torch.dtype, fp8: torch.dtype, device: str) -> None:
    """Fp8's cast ``name`` jitted for ``device`` (cpu or cuda) rounds every bit as torch's ``to`` (the evaluator's
    cast) on the CPU; check's comparisons take no 8-bit floats (torch has no isnan for them), so the bits are
    compared here."""
    compiled = jit(Fp8, target=device).functions[name]
    x = fp8_values(64, dtype).to(device)
    out = torch.empty(64, 64, dtype=fp8, device=device)
    compiled(x, out)
    assert torch.equal(out.view(torch.uint8).cpu(), x.cpu().to(fp8).view(torch.uint8))


def check_8_bit_reads(device: str) -> None:
    """Fp8's reads of 8-bit floats jitted for ``device``: every bit pattern read back exactly, and scaled in float."""
    fns = jit(Fp8, target=device).functions
    for name, fp8 in (("from_e5m2", torch.float8_e5m2), ("dequant", torch.float8_e4m3fn)):
        q = eight_bit_patterns(fp8).to(device)
        scale = torch.rand(4, 1, generator=torch.Generator().manual_seed(0)).to(device)
        args = (q,) if name == "from_e5m2" else (q, scale)
        report = check(compiled_only(fns[name]), Fp8.functions[name], args, expect={"output": [equal(equal_nan=True)]})
        assert report.passed, f"{name}:\n{report}"


@pytest.mark.parametrize("name, dtype, fp8", EIGHT_BIT_CASTS)
def test_a_cast_to_an_8_bit_float_rounds_every_bit_as_torch(name: str, dtype: torch.dtype, fp8: torch.dtype) -> None:
    check_8_bit_cast(name, dtype, fp8, "cpu")


def test_an_8_bit_weight_reads_back_exactly_and_scales_in_float() -> None:
    check_8_bit_reads("cpu")


def test_on_cuda_8_bit_floats_are_stored_narrow_and_checked_by_their_dlpack_codes() -> None:
    """The CUDA kernels read and write CUTLASS's 8-bit types (converted through numeric.h's fp8_of, torch's rounding,
    not CUTLASS's saturating conversion), and the entries check each argument's DLPack code."""
    source = generate(lower(Fp8, "cuda:sm_90a")).source
    assert "to_e4m3_kernel(float const* __restrict__ x_ptr, cute::float_e4m3_t* __restrict__ out_ptr" in source
    assert "dequant_kernel(cute::float_e4m3_t const* __restrict__ q_ptr" in source
    assert 'check.dtype(out, "out", kDLFloat8_e4m3fn, 8, ' in source
    assert 'check.dtype(out, "out", kDLFloat8_e5m2, 8, ' in source

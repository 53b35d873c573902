"""Two matmuls of one input whose results meet elementwise compile as one kernel (lower/pairs.py): the gated MLP's
``silu(h @ gate.T) * (h @ up.T)``, its RMSNorm read once as the pair's prologue, the input read once against both
weights. Jitted for the CPU against the evaluator at row counts through every CPU tier (the dot products of 1 to
127 rows, the blocked GEMM from 128), with two weights and with the engine's interleaved one (gate and up rows
alternating: two strided views of one weight); each call the compiled code alone (the evaluator patched to raise,
outputs poisoned). What is not a pair stays two kernels. The CUDA source builds with nvcc
(tests/test_compile_cuda_build.py).

Tolerances as tests/test_compile_matmul.py's: f32 1e-5 relative and absolute; bf16 rounds each op's result on
both sides, a sum within an f32 ulp of a rounding boundary one bf16 ulp away: 2**-5 relative and absolute.
"""

from __future__ import annotations

import pytest
import torch

from tests.compile_kernels import compiled_only
from tilefoundry import func, jit, lower, module
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, tf
from tilefoundry.runtime.check import allclose, check
from tilefoundry.target import CudaTarget

pytestmark = pytest.mark.usefixtures("compile_cache")

M = DimVar("m", 1, 4096)
F32 = allclose(atol=1e-5, rtol=1e-5)
BF16 = allclose(atol=2**-5, rtol=2**-5)
ROWS = (1, 3, 17, 130)  # the CPU's dot products (four rows at a time, then one), and its blocked tier


def _linear(x, w):  # noqa: ANN001, ANN202 - traced DSL values
    return tf.matmul(x, tf.transpose(w, (1, 0)))


@module(entry="swiglu")
class Pairs:
    @func
    def swiglu(x: Tensor[(M, 64), "bf16"], norm: ConstTensor[(64,), "bf16"], gate: ConstTensor[(40, 64), "bf16"],
               up: ConstTensor[(40, 64), "bf16"]):
        """The families' MLP input half: the norm a prologue of both, silu(gate) * up the pair's epilogue."""
        h = tf.rms_norm(x, norm, 1e-6)
        return tf.silu(_linear(h, gate)) * _linear(h, up)

    @func
    def interleaved(x: Tensor[(M, 64), "bf16"], norm: ConstTensor[(64,), "bf16"],
                    gate_up: ConstTensor[(80, 64), "bf16"]):
        """The engine's packing: row 2j of gate_up is gate j, row 2j + 1 up j (strided views, no copy)."""
        h = tf.rms_norm(x, norm, 1e-6)
        gate = tf.slice(gate_up, (0, 0), (40, 64), (2, 1))
        up = tf.slice(gate_up, (1, 0), (40, 64), (2, 1))
        return tf.silu(_linear(h, gate)) * _linear(h, up)

    @func
    def biased(x: Tensor[(M, 37), "f32"], wa: ConstTensor[(21, 37), "f32"], bias: ConstTensor[(21,), "f32"],
               wc: ConstTensor[(21, 37), "f32"]):
        """No prologue, an epilogue on the first product before they meet, K in no whole vector."""
        return (_linear(x, wa) + bias) * tf.sigmoid(_linear(x, wc))

    @func
    def experts(x: Tensor[(3, M, 32), "f32"], ids: Tensor[(3,), "i64"], gates: ConstTensor[(5, 24, 32), "f32"],
                ups: ConstTensor[(5, 24, 32), "f32"]):
        """A batch of pairs: chunk i of x through expert ids[i]'s gate and up weights (index_select on the experts'
        axis: read in place), as the engine's several-token MoE slot runs them."""
        def through(w, ids):  # noqa: ANN001, ANN202 - traced DSL values
            return tf.matmul(x, tf.transpose(tf.index_select(w, ids, 0), (0, 2, 1)))

        return tf.silu(through(gates, ids)) * through(ups, ids)

    @func
    def two_inputs(x: Tensor[(M, 16), "f32"], y: Tensor[(M, 16), "f32"], pa: ConstTensor[(8, 16), "f32"],
                   pc: ConstTensor[(8, 16), "f32"]):
        """Different first operands: no pair."""
        return _linear(x, pa) * _linear(y, pc)

    @func
    def first_returned(x: Tensor[(M, 16), "f32"], ra: ConstTensor[(8, 16), "f32"], rc: ConstTensor[(8, 16), "f32"]):
        """The first product is a result too: no pair (it must reach memory)."""
        g = _linear(x, ra)
        return g, g * _linear(x, rc)


def _inputs(name: str, m: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(m)

    def r(*shape: int, dtype: torch.dtype = torch.float32, scale: float = 1.0) -> torch.Tensor:
        return (torch.randn(shape, generator=g) * scale).to(dtype)

    bf = torch.bfloat16
    return {
        "swiglu": lambda: (r(m, 64, dtype=bf), r(64, dtype=bf, scale=0.1) + 1, r(40, 64, dtype=bf, scale=0.125),
                           r(40, 64, dtype=bf, scale=0.125)),
        "interleaved": lambda: (r(m, 64, dtype=bf), r(64, dtype=bf, scale=0.1) + 1, r(80, 64, dtype=bf, scale=0.125)),
        "biased": lambda: (r(m, 37), r(21, 37), r(21), r(21, 37)),
        "experts": lambda: (r(3, m, 32), torch.tensor([4, 0, 4]), r(5, 24, 32, scale=0.2), r(5, 24, 32, scale=0.2)),
        "two_inputs": lambda: (r(m, 16), r(m, 16), r(8, 16), r(8, 16)),
        "first_returned": lambda: (r(m, 16), r(8, 16), r(8, 16)),
    }[name]()


def test_a_gated_pair_is_one_kernel_reading_both_weights() -> None:
    tir = lower(Pairs, "cpu")
    for name in ("swiglu", "interleaved", "biased", "experts"):
        fn = tir.functions[name]
        assert [s.fn.schedule.placement for s in fn.stages] == ["matmul"] and not fn.temps, f"{name}:\n{fn}"
    text = str(tir.functions["swiglu"])
    assert "matmul<f32>(x_tile, gate_tile, up_tile, epilogue(matmul:bf16, matmul_1:bf16; " in text
    assert "prologue(rms_norm<f32>(a, norm_tile" in text  # the norm read once, for both
    interleaved = str(tir.functions["interleaved"])
    assert "view gate_up_tile: gmem bf16[64, 40] (64, 40):(1, 128) = gate_up[0:]" in interleaved  # rows 2j
    assert "(64, 40):(1, 128) = gate_up[64:]" in interleaved  # rows 2j + 1: one row (64 elements) on
    for name in ("two_inputs", "first_returned"):
        placements = [s.fn.schedule.placement for s in tir.functions[name].stages]
        assert placements.count("matmul") == 2, f"{name}: {placements}"


@pytest.mark.parametrize("name", ["swiglu", "interleaved", "biased", "experts", "two_inputs", "first_returned"])
def test_a_pair_matches_the_evaluator_at_every_row_count(name: str) -> None:
    compiled = jit(Pairs, target="cpu").functions[name]
    fn = Pairs.functions[name]
    outs = fn.output_types if isinstance(fn.output_types, tuple) else (fn.output_types,)
    tolerances = {"*": [BF16 if outs[0].dtype.name == "bf16" else F32]}
    for m in ROWS:
        report = check(compiled_only(compiled), fn, _inputs(name, m), expect=tolerances)
        assert report.passed, f"{name} at M = {m}:\n{report}"


def test_the_cuda_lowering_of_a_pair_reads_both_weights_in_one_matmul() -> None:
    """(Its source builds with nvcc in tests/test_compile_cuda_build.py.)"""
    tir = lower(Pairs, CudaTarget())
    # a decode step's rows (m < 17): the pair, its norm a prologue; a prompt's (m >= 17, the tensor cores' GEMM): the
    # norm a stage of its own, then the pair through three tensor maps (lower/dispatch.py row_variants; pairs.py)
    assert "matmul<f32>(x_tile, gate_tile, up_tile" in str(tir.functions["swiglu_few_rows"])
    many = tir.functions["swiglu_many_rows"]
    assert [s.fn.schedule.placement for s in many.stages] == ["rows", "matmul"]
    assert "gate_tile, up_tile" in str(many) and "up_map = map %up" in str(many)

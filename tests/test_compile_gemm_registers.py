"""The GEMM tier's kernels keep their sums in registers: Qwen3-1.7B's projections (q/k/v, o_proj + residual, gate/up,
down + residual: bench/compiled_gemm_cuda.py's shapes; and gate and up as the engine's pair, silu(gate) * up) lowered
for sm_90a and built with nvcc at -O3 as jit builds them, ptxas's report (``-Xptxas -v``) must show no spill in any
kernel. A spill there costs local-memory traffic in every tile of a prompt; no GPU is needed to see one (a set of
unused sums once made three kernels of ``Gemms`` spill 40-124 bytes). Their speed runs on the GPU (tests/gpu/run.sh's
compile part)."""

from __future__ import annotations

import re
import shutil

import pytest

from tilefoundry import lower
from tilefoundry.codegen import generate, link
from tilefoundry.codegen.options import CompilerOptions
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, func, tf
from tilefoundry.ir.core.function import Function
from tilefoundry.ir.core.module import Module
from tilefoundry.target import CudaTarget

pytestmark = [pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc to build CUDA code"),
              pytest.mark.usefixtures("compile_cache")]

ROWS = DimVar("rows", 17, 8193)


def _projections() -> dict[str, Function]:
    """x @ w.T (+ r) at Qwen3-1.7B's projection shapes, bf16, a prompt's rows."""

    @func
    def qkv(x: Tensor[(ROWS, 2048), "bf16"], w_qkv: ConstTensor[(4096, 2048), "bf16"]):
        return tf.matmul(x, tf.transpose(w_qkv, (1, 0)))

    @func
    def o_proj(a: Tensor[(ROWS, 2048), "bf16"], w_o: ConstTensor[(2048, 2048), "bf16"],
               r: Tensor[(ROWS, 2048), "bf16"]):
        return tf.matmul(a, tf.transpose(w_o, (1, 0))) + r

    @func
    def gate_up(h: Tensor[(ROWS, 2048), "bf16"], w_gu: ConstTensor[(12288, 2048), "bf16"]):
        return tf.matmul(h, tf.transpose(w_gu, (1, 0)))

    @func
    def down(s: Tensor[(ROWS, 6144), "bf16"], w_d: ConstTensor[(2048, 6144), "bf16"],
             x: Tensor[(ROWS, 2048), "bf16"]):
        return tf.matmul(s, tf.transpose(w_d, (1, 0))) + x

    @func
    def swiglu(hs: Tensor[(ROWS, 2048), "bf16"], w_pair: ConstTensor[(12288, 2048), "bf16"]):
        # the engine's gate and up, interleaved row by row: one GEMM of the pair, silu(gate) * up its epilogue
        gate = tf.slice(w_pair, (0, 0), (6144, 2048), (2, 1))
        up = tf.slice(w_pair, (1, 0), (6144, 2048), (2, 1))
        return tf.silu(tf.matmul(hs, tf.transpose(gate, (1, 0)))) * tf.matmul(hs, tf.transpose(up, (1, 0)))

    return {"qkv": qkv, "o_proj": o_proj, "gate_up": gate_up, "down": down, "swiglu": swiglu}


def test_the_gemm_kernels_at_qwen3_projections_build_without_spilling() -> None:
    fns = _projections()
    mod = lower(Module("projections", fns, entry="qkv"), CudaTarget(), split_rows=False)
    source = generate(mod)
    assert source.source.count("ops::matmul<float>(ring,") == len(fns)  # each through the GEMM schedule
    linked = link(source, CompilerOptions(opt_level=3, extra_flags=("-Xptxas", "-v")))
    report = linked.diagnostics
    kernels = re.findall(r"Compiling entry function '(\w+)'", report)
    spills = [int(b) for b in re.findall(r"(\d+) bytes spill stores", report)]
    assert len(kernels) == len(fns) and len(spills) == len(fns), report
    assert all(b == 0 for b in spills), "a GEMM kernel spills:\n" + report

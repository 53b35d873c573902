"""matmul and the views it reads compile: jitted for the CPU against the evaluator, their CUDA source built
with nvcc in tests/test_compile_cuda_build.py (the families' decoder functions built on them:
tests/test_compile_families.py).

A function with a matmul or a view op runs as stages (lower/stages.py): each matmul a kernel of its own
over views of the memory it reads (a transposed weight is strides, not a copy), the ops around it row-wise
kernels, the values between them in temporaries the entry allocates. The matmuls run at row counts M = 1, 3,
16, 17, 63, 64, 200 from one build (M a DimVar) with a contracted length K that is no multiple of a vector;
batched with broadcast batch axes; with a 1-D operand; with N cut into several column tiles; with grouped
key heads read through a repeat. Each call is the compiled code alone: the evaluator patched to raise, outputs
handed in filled with NaN.

Tolerances: f32 results differ from torch's only in the order of a dot product's sum (torch's CPU matmul
blocks and vectorises it): 1e-5 relative plus 1e-5 absolute for sums near 0. bf16 results round each
op's result to bf16 on both sides, so a sum that lands within an f32 ulp of a rounding boundary rounds to the
other neighbour (one bf16 ulp, 2**-8 relative): 2**-5 relative plus 2**-5 absolute.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tests.compile_kernels import compiled_only
from tilefoundry import func, jit, lower, module
from tilefoundry.codegen import generate
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, tf
from tilefoundry.runtime.check import allclose, check, equal
from tilefoundry.target import CudaTarget
from tilefoundry.tir import OpCall

pytestmark = pytest.mark.usefixtures("compile_cache")

M = DimVar("m", 0, 4096)
F32 = allclose(atol=1e-5, rtol=1e-5)
BF16 = allclose(atol=2**-5, rtol=2**-5)


@module(entry="linear")
class Matmuls:
    @func
    def linear(x: Tensor[(M, 37), "f32"], w: ConstTensor[(24, 37), "f32"]):
        return tf.matmul(x, tf.transpose(w, (1, 0)))

    @func
    def linear_bias_bf16(x: Tensor[(M, 37), "bf16"], wb: ConstTensor[(24, 37), "bf16"],
                         b: ConstTensor[(24,), "bf16"]):
        return tf.matmul(x, tf.transpose(wb, (1, 0))) + b

    @func
    def batched(a: Tensor[(2, 1, M, 13), "f32"], b: Tensor[(3, 13, 5), "f32"]):
        return tf.matmul(a, b)

    @func
    def matvec(w: Tensor[(24, M), "f32"], x: Tensor[(M,), "f32"]):
        return w @ x

    @func
    def row_times_batch(x: Tensor[(M,), "f32"], w: Tensor[(3, M, 4), "f32"]):
        return tf.matmul(x, w)

    @func
    def grouped_heads(q: Tensor[(4, M, 8), "f32"], k: Tensor[(M, 2, 8), "f32"]):
        """GQA as the families write it: each key head read by two query heads, through a repeat, not a copy."""
        keys = tf.repeat_interleave(tf.transpose(k, (1, 2, 0)), 2, 0)  # (4, 8, M)
        return tf.matmul(q, keys)

    @func
    def sliced_weight(x: Tensor[(M, 8), "f32"], w2: Tensor[(16, 5), "f32"]):
        return tf.matmul(x, tf.slice(w2, (8, 0), (8, 5)))  # the weight's second half: a view from row 8

    @func
    def greedy_head(x: Tensor[(M, 16), "f32"], vocab: ConstTensor[(24, 16), "f32"]):
        return tf.argmax(tf.matmul(x, tf.transpose(vocab, (1, 0))), -1)

    @func
    def wide(x: Tensor[(M, 70), "bf16"], ww: ConstTensor[(90, 70), "bf16"]):
        """Several panels of the CPU's blocked tier (the last one partial), K = 70 in no 16-byte groups."""
        return tf.matmul(x, tf.transpose(ww, (1, 0)))

    @func
    def deep(x: Tensor[(M, 600), "f32"], wd: ConstTensor[(40, 600), "f32"]):
        """K = 600: the CPU's blocked tier runs K in three equal passes of 200, its sums kept between them; two
        panels, the first whole (each pass's slice packed by 16 x 16 transposes, its last 8 values one by one), the
        second partial; at 200 rows 33 blocks of six and 2 rows left."""
        return tf.matmul(x, tf.transpose(wd, (1, 0)))

    @func
    def chosen_experts(x: Tensor[(M, 37), "f32"], experts: ConstTensor[(5, 24, 37), "f32"],
                       chosen: Tensor[(2,), "i64"]):
        """A mixture's routed experts: each chosen expert's weight read where its id points (a position read on
        the device), the others never."""
        return tf.matmul(x, tf.transpose(tf.index_select(experts, chosen, 0), (0, 2, 1)))

    @func
    def whole_steps(x: Tensor[(M, 96), "bf16"], ws: ConstTensor[(64, 96), "bf16"]):
        """bf16, K whole steps of 32: where the CPU has AMX, whole blocks of 32 rows are read in place (at 200
        rows six of them, the last 8 rows from a padded copy); two whole panels, packed by 16 x 16 transposes."""
        return tf.matmul(x, tf.transpose(ws, (1, 0)))

    @func
    def long_steps(x: Tensor[(M, 4100), "bf16"], wl: ConstTensor[(40, 4100), "bf16"]):
        """bf16, K = 4100 (129 steps of 32, the last 4 values padded with zeros): where the CPU has AMX, K runs in
        three passes of 43 steps, the blocks' sums kept between them, the last pass's slices padded; every row read
        from the padded copy; two panels, the second 8 columns wide."""
        return tf.matmul(x, tf.transpose(wl, (1, 0)))

    @func
    def long_whole_steps(x: Tensor[(M, 4160), "bf16"], wl2: ConstTensor[(40, 4160), "bf16"]):
        """bf16, K = 4160 (130 whole steps): three passes of 44, 44 and 42 steps, whole blocks read in place."""
        return tf.matmul(x, tf.transpose(wl2, (1, 0)))

    @func
    def column_tiles(x: Tensor[(M, 16), "bf16"], wt: ConstTensor[(16, 300), "bf16"]):
        return tf.reshape(tf.matmul(x, wt), (M, 3, 100))


TOKENS = DimVar("tokens", 1, 64)


@module(entry="norm_swiglu")
class Streamed:
    """Matmuls whose weights (at least lower/matmul.py's CUDA_STREAM_MIN_BYTES, runs of K of at most 16 KiB) take
    the CUDA streamed schedule: 256 CTAs of 256 threads, one or two tokens through cuda/ops/matmul_stream.cuh's ring
    of bulk copies, more through the dot-product tier in the same CTAs. Stages of two rows (K = 2048 bf16), of one
    row (K = 6144 bf16, 2048 f32: a pair's two rows in two stages), each prologue and epilogue kind. Their values run
    on the H200 (tests/gpu/test_compile_stages.py); the CUDA source builds here (tests/test_compile_cuda_build.py)."""

    @func
    def norm_swiglu(x: Tensor[(TOKENS, 2048), "bf16"], norm: ConstTensor[(2048,), "bf16"],
                    gate_up: ConstTensor[(12288, 2048), "bf16"]):
        """Qwen3-1.7B's gate/up slot: the interleaved weight (48 MiB), the norm a prologue, SwiGLU the epilogue."""
        h = tf.rms_norm(x, norm, 1e-6)
        gate = tf.slice(gate_up, (0, 0), (6144, 2048), (2, 1))
        up = tf.slice(gate_up, (1, 0), (6144, 2048), (2, 1))
        return tf.silu(tf.matmul(h, tf.transpose(gate, (1, 0)))) * tf.matmul(h, tf.transpose(up, (1, 0)))

    @func
    def long_rows_pair(x: Tensor[(TOKENS, 6144), "bf16"], gate: ConstTensor[(2048, 6144), "bf16"],
                       up: ConstTensor[(2048, 6144), "bf16"]):
        """Two weights, rows of 12 KiB: a stage a row, a column's gate and up rows in two stages."""
        return tf.silu(tf.matmul(x, tf.transpose(gate, (1, 0)))) * tf.matmul(x, tf.transpose(up, (1, 0)))

    @func
    def long_rows_residual(x: Tensor[(TOKENS, 6144), "bf16"], w_long: ConstTensor[(4096, 6144), "bf16"],
                           r: Tensor[(TOKENS, 4096), "bf16"]):
        """One weight of 48 MiB, a stage a row, the residual added in the epilogue."""
        return tf.matmul(x, tf.transpose(w_long, (1, 0))) + r

    @func
    def f32_linear(x: Tensor[(TOKENS, 2048), "f32"], w_f32: ConstTensor[(4096, 2048), "f32"]):
        """f32 (32 MiB): four elements a word, a stage a row of 8 KiB."""
        return tf.matmul(x, tf.transpose(w_f32, (1, 0)))

    @func
    def norm_linear(x: Tensor[(TOKENS, 2048), "bf16"], norm: ConstTensor[(2048,), "bf16"],
                    w_wide: ConstTensor[(8192, 2048), "bf16"]):
        """The norm a prologue of a single product (32 MiB), stages of two rows."""
        return tf.matmul(tf.rms_norm(x, norm, 1e-6), tf.transpose(w_wide, (1, 0)))


def projection_inputs(fn: Any, m: int, device: str = "cpu",
                      also_scaled: tuple[str, ...] = ()) -> tuple[torch.Tensor, ...]:
    """Random inputs of ``fn`` at ``m`` for its DimVar axes: weights (and the parameters ``also_scaled`` names)
    scaled by 1 / sqrt(K), a parameter named ``norm`` near 1, each drawn in order from a generator seeded with
    ``m``."""
    g = torch.Generator(device=device).manual_seed(m)
    args = []
    for p in fn.params:
        shape = tuple(m if not isinstance(d, int) else d for d in p.type.shape)
        t = torch.randn(shape, generator=g, device=device)
        if p.name == "norm":
            t = 1 + 0.1 * t
        elif p.const or p.name in also_scaled:
            t = t / shape[-1] ** 0.5
        args.append(t.to(p.type.dtype.torch_dtype))
    return tuple(args)


def streamed_inputs(name: str, m: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    """Random inputs of ``Streamed``'s function ``name`` at ``m`` tokens (``projection_inputs``)."""
    return projection_inputs(Streamed.functions[name], m, device)


def test_a_large_weight_takes_the_streamed_schedule_on_sm90_only() -> None:
    """256 CTAs of 256 threads (two an SM of an H200) for each of Streamed's functions on sm_90a; an older
    architecture, the CPU and a weight under CUDA_STREAM_MIN_BYTES keep the other schedules."""
    for name in Streamed.functions:  # one body for every row count (else 17 rows and more are a GEMM's variant)
        (stage,) = lower(Streamed.functions[name], CudaTarget(), split_rows=False).functions[name].stages
        assert (stage.fn.schedule.grid, stage.fn.schedule.threads_per_cta) == (256, 256), name
        (stage,) = lower(Streamed.functions[name], CudaTarget("sm_86")).functions[name].stages
        assert stage.fn.schedule.threads_per_cta == 128, name
    small = lower(Matmuls.functions["wide"], CudaTarget(), split_rows=False).functions["wide"].stages[0].fn.schedule
    assert small.threads_per_cta == 128
    cpu = lower(Streamed.functions["norm_swiglu"], "cpu").functions["norm_swiglu"].stages[0].fn.schedule
    assert cpu.threads_per_cta == 1


def _inputs(name: str, m: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(m)

    def r(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.randn(shape, generator=g).to(dtype)

    bf = torch.bfloat16
    return {
        "linear": lambda: (r(m, 37), r(24, 37)),
        "linear_bias_bf16": lambda: (r(m, 37, dtype=bf), r(24, 37, dtype=bf), r(24, dtype=bf)),
        "batched": lambda: (r(2, 1, m, 13), r(3, 13, 5)),
        "matvec": lambda: (r(24, m), r(m)),
        "column_tiles": lambda: (r(m, 16, dtype=bf), r(16, 300, dtype=bf)),
        "wide": lambda: (r(m, 70, dtype=bf), r(90, 70, dtype=bf) / 70**0.5),
        "deep": lambda: (r(m, 600), r(40, 600) / 600**0.5),
        "row_times_batch": lambda: (r(m), r(3, m, 4)),
        "sliced_weight": lambda: (r(m, 8), r(16, 5)),
        # small integers: every dot product exact in f32, so the argmax has one answer (the first of equal maxima)
        "greedy_head": lambda: (torch.randint(-3, 4, (m, 16), generator=g).float(),
                                torch.randint(-3, 4, (24, 16), generator=g).float()),
        "grouped_heads": lambda: (r(4, m, 8), r(m, 2, 8)),
        "whole_steps": lambda: (r(m, 96, dtype=bf), r(64, 96, dtype=bf) / 96**0.5),
        "long_steps": lambda: (r(m, 4100, dtype=bf), r(40, 4100, dtype=bf) / 4100**0.5),
        "long_whole_steps": lambda: (r(m, 4160, dtype=bf), r(40, 4160, dtype=bf) / 4160**0.5),
        "chosen_experts": lambda: (r(m, 37), r(5, 24, 37), torch.tensor([m % 5, 2])),
    }[name]()


@pytest.mark.parametrize("name", ["linear", "linear_bias_bf16", "batched", "matvec", "column_tiles", "row_times_batch",
                                  "grouped_heads", "sliced_weight", "greedy_head", "wide", "deep",
                                  "chosen_experts", "whole_steps", "long_steps", "long_whole_steps"])
def test_a_matmul_matches_the_evaluator_at_every_row_count(name: str) -> None:
    compiled = jit(Matmuls, target="cpu").functions[name]
    fn = Matmuls.functions[name]
    dtype = fn.output_types.dtype
    expect = BF16 if dtype.name == "bf16" else F32 if dtype.is_float else equal()
    for m in (1, 3, 16, 17, 63, 64, 200):
        report = check(compiled_only(compiled), fn, _inputs(name, m), expect={"output": [expect]})
        assert report.passed, f"{name} at M = {m}:\n{report}"


def test_a_transposed_weight_is_read_through_strides_and_n_cut_into_tiles() -> None:
    tir = lower(Matmuls, "cpu")
    linear = tir.functions["linear"]
    assert [s.fn.schedule.placement for s in linear.stages] == ["matmul"] and not linear.temps
    text = str(linear)
    assert "view w_tile: gmem f32[37, 24] (37, 24):(1, 37) = w[0:]" in text  # w.T: the weight's strides swapped
    assert "matmul<f32>(x_tile, w_tile)" in text
    tiles = tir.functions["column_tiles"].stages[0].fn
    assert tiles.schedule.grid == 3  # N = 300 in 3 tiles of 100 columns (the largest divisor up to 128)
    bias = tir.functions["linear_bias_bf16"]  # the bias added in the matmul's epilogue: one kernel, no temporary
    assert [s.fn.schedule.placement for s in bias.stages] == ["matmul"] and not bias.temps
    assert "epilogue(matmul:bf16; add = binary<add_op>(matmul, b_tile):bf16 -> add)" in str(bias)


def test_only_the_chosen_experts_weights_are_read() -> None:
    """The picked batch axis is a gather in the weight's offset (its id read per batch element), and an expert
    no id names is never read: NaN there changes nothing."""
    tir = lower(Matmuls, "cpu").functions["chosen_experts"]
    assert [s.fn.schedule.placement for s in tir.stages] == ["matmul"]
    assert "view experts_tile: gmem f32[37, 24] (37, 24):(1, 37) = experts[chosen[row] * 888:]" in str(tir)
    compiled = jit(Matmuls, target="cpu").functions["chosen_experts"]
    x, experts, _ = _inputs("chosen_experts", 3)
    poisoned = experts.clone()
    poisoned[[0, 2, 4]] = float("nan")
    chosen = torch.tensor([3, 1])
    got = compiled(x, poisoned, chosen)
    torch.testing.assert_close(got, x @ experts[chosen].transpose(1, 2), rtol=1e-5, atol=1e-5)


def test_the_cuda_lowering_runs_every_matmul_as_one_matmul_call() -> None:
    """(Its source builds with nvcc in tests/test_compile_cuda_build.py.)"""
    tir = lower(Matmuls, CudaTarget(), split_rows=False)
    calls = [s for f in tir.functions.values() for k in f.kernels for s in op_calls(k.body)]
    assert sum(c.family == "matmul" for c in calls) == len(Matmuls.functions)
    split = lower(Matmuls, CudaTarget())  # 16-bit matmuls of M rows: a decode step's variant and a prompt's
    calls = [s for f in split.functions.values() for k in f.kernels for s in op_calls(k.body)]
    assert sum(c.family == "matmul" for c in calls) == len(Matmuls.functions) + len(split.dispatches)


def test_a_cuda_matmul_kernel_waits_for_the_earlier_kernel_inside_its_op() -> None:
    """A kernel whose only op is a matmul leaves its kernel-start wait to ops::matmul (which asks L2 for the CTA's
    weights first): the kernels of this module each wait once, the matmul's in the op, unless a weight's address
    reads a position an earlier kernel may have written (the chosen experts): then the kernel waits first."""
    import re

    source = generate(lower(Matmuls, CudaTarget())).source
    kernels = re.split(r"^__global__ ", source, flags=re.M)[1:]
    assert len(kernels) >= len(Matmuls.functions)
    for kernel in kernels:
        body = kernel.split("\n}\n", 1)[0]
        if "ops::matmul<" in body and "detail::index_in(" not in body:  # each matmul stage a kernel of its own
            assert "wait_for_earlier_kernels();" not in body and "ops::matmul waits for the kernel before" in body, body
        else:
            assert body.count("wait_for_earlier_kernels();") == 1, body


def op_calls(body: list[Any]) -> list[OpCall]:
    """Every OpCall in ``body``, nested bodies included, in order."""
    out = []
    for s in body:
        if isinstance(s, OpCall):
            out.append(s)
        out += op_calls(getattr(s, "body", []))
    return out


def test_a_streamed_matmul_copies_constant_weights_before_its_wait_and_others_after() -> None:
    """ConstTensor weights are never a kernel's output, so the streamed tier may start its ring's copies before it
    waits for the kernel before (weights_constant); a second operand passed as a Tensor may be the kernel before's
    output, so its copies wait (the ring's default, weights_written)."""

    @func
    def activation_weights(x: Tensor[(TOKENS, 2048), "bf16"], w: Tensor[(12288, 2048), "bf16"]):
        return tf.matmul(x, tf.transpose(w, (1, 0)))

    constant = lower(Streamed, CudaTarget(), split_rows=False)
    assert "workspace=ring, weights constant" in str(constant.functions["norm_swiglu"])
    assert "ops::make_matmul_ring<ops::weights_constant>(" in generate(constant).source
    written = lower(activation_weights, CudaTarget())
    assert "weights constant" not in str(written)
    source = generate(written).source
    assert "ops::make_matmul_ring(" in source and "weights_constant" not in source

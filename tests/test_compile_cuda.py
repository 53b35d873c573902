"""The CUDA target on a machine without a GPU: what lowering and codegen make of a row for CUDA, the one
translation unit of every acceptance kernel (exactly what jit emits; its digest recorded in the repository)
built with nvcc without a warning, its machine code (16-byte accesses, no local memory, one barrier per
reduction), and the host entries: every argument check runs in C++ before the device is touched, and a call
on a machine without a GPU says that no CUDA device is present.

The entries are called directly (tvm-ffi functions of the built library) with tensors that claim to be on a
CUDA device (hand-built DLPack capsules over host memory that is never read), so that each refusal can only
come from the checks compiled into the library. tests/gpu/test_compile_cuda.py runs the same kernels on a GPU.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import torch

from tests import compile_kernels as K
from tests import cuda_unit
from tests.compile_kernels import compiled_only, expectations, inputs_for
from tests.dlpack_fake import KDL_BFLOAT, KDL_CUDA, KDL_FLOAT, fake_tensor
from tilefoundry import CompilerOptions, func, jit, lower
from tilefoundry.codegen import LinkableModule, LinkedModule, generate, link
from tilefoundry.codegen.cuda.emit import _derive_launch_config
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, Topology, tf
from tilefoundry.ir.types.dim import evaluate_dim
from tilefoundry.ir.types.storage import Storage
from tilefoundry.lower import LoweringError
from tilefoundry.runtime import CompiledModule
from tilefoundry.runtime.check import check
from tilefoundry.runtime.loader import load_library
from tilefoundry.target import CpuTarget, CudaTarget
from tilefoundry.tir import Alloc, GmemView, OpCall, PrimFunc

ROOT = Path(__file__).resolve().parents[1]
ROWS = DimVar("rows", 0, 1 << 20)
NO_NVCC = shutil.which(os.environ.get("TILEFOUNDRY_NVCC") or "nvcc") is None
needs_nvcc = pytest.mark.skipif(NO_NVCC, reason="needs nvcc to build CUDA code")
pytestmark = pytest.mark.usefixtures("compile_cache")


def _fn(kernel: Any) -> PrimFunc:
    return lower(kernel, CudaTarget()).functions[kernel.name]


def _walk(body: list) -> list:
    out = []
    for s in body:
        out.append(s)
        if hasattr(s, "body"):
            out += _walk(s.body)
    return out


# -- lowering for CUDA ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("hidden, threads, per_thread", [(2048, 128, 16), (4096, 256, 16), (8192, 256, 32),
                                                         (5120, 160, 32), (16384, 512, 32), (32768, 1024, 32),
                                                         (2560, 160, 16), (1024, 64, 16), (256, 32, 8)])
def test_a_bf16_row_takes_two_16_byte_strips_a_thread_over_at_most_256_threads(hidden: int, threads: int,
                                                                               per_thread: int) -> None:
    """Two vectors of 8 bf16 a thread (all in flight before the first is used), over whole warps dividing the
    row, at most 256 of them where a thread's share stays within 32 elements (8192: four vectors over 256
    threads; 5120: no warp count up to 256 gives two, 160 give four); beyond that the fewest threads keeping
    a thread within 32 elements (16384: 512); a row too short for a vector a thread over a warp, one warp."""
    rms = next(k for k in K.row_kernels(hidden) if k.name.startswith("rms_norm"))
    s = _fn(rms).schedule
    assert (s.vector_width, s.threads_per_cta, s.rows_per_cta) == (8, threads, 1)
    assert hidden // s.threads_per_cta == per_thread  # registers a thread holds per row buffer
    assert s.grid == ROWS


def test_an_f32_row_takes_two_16_byte_strips_a_thread_too() -> None:
    @func
    def wide(x: Tensor[(ROWS, 2048), "f32"]):
        return x - tf.reduce(x, axes=(-1,), keepdim=True, kind="max")

    s = _fn(wide).schedule
    assert (s.vector_width, s.threads_per_cta) == (4, 256)  # 2048 / 256 = 8 f32: two 16-byte vectors


@pytest.mark.parametrize("hidden, segments", [(2048, 2), (8192, 8), (16384, 16)])
def test_a_row_without_reductions_is_cut_into_ctas_of_one_16_byte_vector_a_thread(hidden: int,
                                                                                   segments: int) -> None:
    """SwiGLU's rows are cut into segments of 128 threads x 8 bf16, one CTA each: one row (a decode step)
    spreads over ``segments`` CTAs, and each thread loads its one vector of each input together."""
    swiglu = next(k for k in K.row_kernels(hidden) if k.name.startswith("swiglu"))
    fn = _fn(swiglu)
    s = fn.schedule
    assert (s.vector_width, s.threads_per_cta, s.rows_per_cta) == (8, 128, 1)
    assert s.grid == segments * ROWS and s.rows == segments * ROWS
    text = generate(lower(swiglu, CudaTarget())).source
    assert f"gate_ptr + (row / {segments}) * {hidden} + (row % {segments}) * 1024" in text
    assert f"launch.start(swiglu_{hidden}_kernel, ctas, 128, 0, " in text


def test_segments_read_a_weight_at_their_place_in_the_row_and_a_per_row_value_at_their_row() -> None:
    text = generate(lower(K.scaled_segments, CudaTarget())).source
    assert "weight_ptr + (row % 2) * 1024" in text  # 2048 bf16 in two segments of 1024
    assert "scale_ptr + (row / 2)" in text
    assert "x_ptr + (row / 2) * 2048 + (row % 2) * 1024" in text


def test_views_the_entry_checked_promise_16_bytes_in_their_type_and_others_do_not() -> None:
    """The runtime's vector path skips its alignment check for make_aligned_gmem_ptr views: only those
    whose tensor the entry checks for 16 bytes, at row offsets that are whole 16 bytes, are made so."""
    text = generate(lower(K.row_kernels(2048)[0], CudaTarget())).source
    assert 'check.aligned(x, "x", 16);' in text and 'check.aligned(weight, "weight", 16);' in text
    assert "make_aligned_gmem_ptr<16>(x_ptr + row * 2048)" in text
    assert "make_aligned_gmem_ptr<16>(weight_ptr)" in text and "make_gmem_ptr" not in text
    any_width = generate(lower(K.softmax_any_width, CudaTarget())).source  # one thread, element by element
    assert "check.aligned" not in any_width and "make_aligned_gmem_ptr" not in any_width

    @func
    def odd_rows(x: Tensor[(ROWS, 2052), "bf16"]):  # 4-element strips: the entry checks 8 bytes only
        return x - tf.reduce(x, axes=(-1,), keepdim=True, kind="max")

    odd = generate(lower(odd_rows, CudaTarget())).source
    assert 'check.aligned(x, "x", 8);' in odd and "make_aligned_gmem_ptr" not in odd


def test_rows_stay_whole_where_a_reduction_a_declared_topology_or_the_row_asks_for_it() -> None:
    assert _fn(K.row_kernels(2048)[0]).schedule.grid == ROWS  # rms_norm reduces along the row
    assert _fn(K.swiglu).schedule.grid == ROWS  # 80 bf16: 10 vectors, no whole warp of them

    @func(topologies=(Topology("thread", 64),))
    def declared(x: Tensor[(ROWS, 2048), "bf16"]):
        return tf.silu(x)

    s = _fn(declared).schedule
    assert (s.grid, s.threads_per_cta) == (ROWS, 64)

    @func
    def with_constant_output(x: Tensor[(ROWS, 2048), "bf16"], w: ConstTensor[(2048,), "bf16"]):
        return x * w, w * w  # the second output does not depend on the row

    assert _fn(with_constant_output).schedule.rows == ROWS


def test_the_strip_is_16_bytes_of_the_narrowest_float_the_kernel_moves() -> None:
    @func
    def mixed(x: Tensor[(ROWS, 2048), "f32"], w: ConstTensor[(2048,), "bf16"]):
        return x * tf.cast(w, "f32")

    @func
    def wide(x: Tensor[(ROWS, 2048), "f32"]):
        return tf.exp(x)

    assert _fn(mixed).schedule.vector_width == 8  # 16 bytes of bf16; the f32 operands move 32 bytes a strip
    assert _fn(wide).schedule.vector_width == 4


def test_a_row_of_launch_time_length_is_padded_over_a_cta_of_threads_and_a_declared_count_taken() -> None:
    fn = _fn(K.softmax_any_width)
    assert fn.schedule.threads_per_cta == 256 and fn.schedule.vector_width == 1
    text = generate(lower(K.softmax_any_width, CudaTarget())).source
    # the row's layouts are padded to whole elements a thread, bounded by the row's length
    assert "threads, static_cast<int>(cols))" in text

    @func(topologies=(Topology("thread", 128),))
    def any_width(x: Tensor[(ROWS, K.COLS), "f32"]):
        return tf.exp(x)

    assert _fn(any_width).schedule.threads_per_cta == 128

    @func(topologies=(Topology("thread", 96 + 3),))
    def odd_threads(x: Tensor[(ROWS, K.COLS), "f32"]):
        return tf.exp(x)

    with pytest.raises(LoweringError, match=r"Topology\('thread', 99\).*whole warps"):
        lower(odd_threads, CudaTarget())


@pytest.mark.parametrize("hidden, threads", [(4095, 256), (333, 192), (50257, 1024), (2000, 128)])
def test_a_row_no_whole_warps_tile_is_padded_over_many_threads_with_its_length_as_the_bound(
        hidden: int, threads: int) -> None:
    """RMSNorm, residual + RMSNorm, softmax and SwiGLU on rows whose vectors no whole number of warps
    tiles run on many threads a row (one thread a row took nvcc minutes to unroll), each thread at most
    CUDA_MAX_ELEMENTS_PER_THREAD elements where 1024 threads allow it, the row's length the layouts' bound."""
    from tilefoundry.lower.schedule import CUDA_MAX_ELEMENTS_PER_THREAD, CUDA_MAX_THREADS

    for kernel in K.row_kernels(hidden):
        fn = _fn(kernel)
        s = fn.schedule
        assert s.threads_per_cta == threads and s.threads_per_cta % 32 == 0, kernel.name
        per_thread = -(-hidden // (s.threads_per_cta * s.vector_width)) * s.vector_width
        assert per_thread <= max(CUDA_MAX_ELEMENTS_PER_THREAD, -(-hidden // CUDA_MAX_THREADS)), kernel.name
        assert hidden % s.vector_width == 0
        layouts = [st.buffer.layout for st in _walk(fn.body) if isinstance(st, (Alloc, GmemView))
                   and st.buffer.shape == (hidden,)]
        assert layouts and all(lay.bound == hidden for lay in layouts), kernel.name
        text = generate(lower(kernel, CudaTarget())).source
        assert f"threads, Int<{hidden}>{{}})" in text and f"__launch_bounds__({threads})" in text


def test_a_short_row_a_power_of_two_below_a_warp_splits_exactly_is_not_padded() -> None:
    # 96 bf16: 12 vectors of 8 over 4 threads, 24 elements each: the 16-byte path, no bound
    fn = _fn(K.rms_norm)
    assert (fn.schedule.threads_per_cta, fn.schedule.vector_width) == (4, 8)
    assert all(st.buffer.layout.bound is None for st in _walk(fn.body) if isinstance(st, (Alloc, GmemView)))


@pytest.mark.parametrize("dtype, rounded", [("bf16", True), ("f16", True), ("f32", False)])
def test_exp_sigmoid_silu_and_softmax_take_the_hardware_exponential_only_for_16_bit_results(dtype: str,
                                                                                           rounded: bool) -> None:
    """exp, sigmoid and silu whose result is a 16-bit float, and the exponentials of a softmax whose result is,
    compute e^x with the hardware's base-2 exponential (``*_rounded_op``, error far below the rounding); an
    f32 result, or an exponential computed in f32 from a 16-bit input, keeps the exact form."""

    @func
    def acts(x: Tensor[(ROWS, 256), dtype]):
        return tf.exp(x), tf.sigmoid(x), tf.silu(x), tf.exp(tf.cast(x, "f32"))

    @func
    def probs(x: Tensor[(ROWS, 256), dtype]):
        return tf.softmax(x, axis=-1)

    text = generate(lower(acts, CudaTarget())).source
    suffix = "_rounded_op{}" if rounded else "_op{}"
    for op in ("exp", "sigmoid", "silu"):
        assert f"ops::unary(ops::{op}{suffix}, x_regs, out" in text, op  # x, read four times, is staged
    assert text.count("ops::exp_op{}") == (1 if rounded else 2)  # the f32 cast's exponential: exact
    soft = generate(lower(probs, CudaTarget())).source
    assert ("ops::exp_rounded_op{}" in soft) == rounded and ("ops::exp_op{}" in soft) == (not rounded)


def test_reductions_across_warps_share_one_double_buffered_workspace() -> None:
    fn = _fn(K.row_kernels(2048)[2])  # softmax: a max and a sum
    stmts = _walk(fn.body)
    (ws,) = [s.buffer for s in stmts if isinstance(s, Alloc) and s.buffer.name == "reduce_workspace"]
    assert ws.storage.value == "smem" and ws.dtype.name == "f32" and ws.shape == (2 * 1 * 128,)  # 128 threads a row
    reduces = [s for s in stmts if isinstance(s, OpCall) and s.family == "reduce"]
    assert len(reduces) == 2 and all(r.workspace is ws for r in reduces)
    assert "workspace=reduce_workspace" in str(fn)
    small = _fn(K.softmax_written_out)  # 4 threads: the exchange stays within a warp
    assert small.schedule.threads_per_cta == 4
    assert not any(isinstance(s, OpCall) and s.workspace is not None for s in _walk(small.body))


def test_inputs_read_twice_are_loaded_into_registers_once_and_outputs_read_again_computed_there() -> None:
    text = str(_fn(K.rms_norm_written_out))  # x is squared and multiplied
    loop = text[text.index("for row in rows of this cta"):]
    assert "x_regs <- unary<cast_op>(x)" in loop and loop.count("(x)") == 1
    assert "weight_regs" not in str(_fn(K.row_kernels(8192)[0]))  # a weight read once stays in memory
    out_written = _fn(K.residual_rms_norm)  # h is returned and normalised: computed once in registers
    assert "out1 <- unary<cast_op>(h)" in str(out_written) and "(out1)" not in str(out_written)


def test_a_weight_read_after_the_reduction_is_loaded_with_the_row_in_registers_or_shared_memory(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """RMSNorm's weight, read only by the last multiply: at hidden 2048 (two vectors a thread) it is loaded into
    registers before the row test, its loads in flight with the row's; at 8192 (four vectors a thread) it is
    copied into shared memory by cp.async there, and its reader waits for it; beyond the shared-memory budget
    and on the CPU target it stays in memory."""
    from tilefoundry.lower import schedule

    rms_2048, rms_8192 = K.row_kernels(2048)[0], K.row_kernels(8192)[0]
    text = str(_fn(rms_2048))
    head = text[:text.index("for row in rows of this cta")]
    assert "weight_regs <- unary<cast_op>(weight)" in head
    assert "binary<mul_op>(rms_norm_rounded, weight_regs)" in text and "copy_async" not in text
    text = str(_fn(rms_8192))
    head, loop = text.split("for row in rows of this cta")
    assert "alloc weight_smem: smem bf16[8192]" in head and "weight_smem <- copy_async<>(weight)" in head
    assert "weight_regs" not in text and loop.count("wait copy_async") == 1
    assert loop.index("wait copy_async") < loop.index("out <- binary<mul_op>(rms_norm_rounded, weight_smem)")
    src = generate(lower(rms_8192, CudaTarget())).source
    assert "__shared__ alignas(16) cute::bfloat16_t weight_smem_storage[8192];" in src
    assert "make_aligned_smem_ptr<16>(weight_smem_storage)" in src
    assert "ops::copy_async(weight, weight_smem);\n  ops::cp_async_commit();\n" in src
    assert "ops::cp_async_wait<0>();\n    ops::binary(ops::mul_op{}, rms_norm_rounded, weight_smem, out);" in src
    assert "weight_regs" not in str(lower(rms_2048, CpuTarget()).functions[rms_2048.name])
    monkeypatch.setattr(schedule, "CUDA_STAGED_WEIGHT_SMEM", 8192)  # the row's 16 KiB do not fit
    text = str(lower(K.row_kernels(8192)[0], CudaTarget()).functions[rms_8192.name])
    assert "weight_smem" not in text and "weight_regs" not in text
    assert "binary<mul_op>(rms_norm_rounded, weight)" in text


def test_launch_geometry_is_derived_in_codegen_and_written_into_the_entry() -> None:
    fn = _fn(K.row_kernels(8192)[0])
    cfg = _derive_launch_config(fn)
    assert (cfg.grid, cfg.block, cfg.dynamic_smem) == (ROWS, 256, 0)
    src = generate(lower(K.row_kernels(8192)[0], CudaTarget())).source
    assert "int64_t const grid = rows;" in src
    assert "launch.start(rms_norm_8192_kernel, ctas, 256, 0, x_ptr, weight_ptr, out_ptr, rows);" in src
    # two f32 rows in dynamic shared memory, padded over 256 threads, each thread's slice 16-byte aligned
    any_width = _derive_launch_config(_fn(K.softmax_any_width))
    assert evaluate_dim(any_width.dynamic_smem, {"cols": 1000}) == 2 * 256 * 16  # 4 elements a thread
    assert evaluate_dim(any_width.dynamic_smem, {"cols": 4096}) == 2 * 4 * 4096
    assert evaluate_dim(any_width.dynamic_smem, {"cols": 1}) == 2 * 256 * 16
    abi = generate(lower(K.softmax_any_width, CudaTarget())).entry_abi
    assert not re.search(r"grid|block|smem|shared", repr(abi))  # nothing of the launch travels past codegen


def test_a_cuda_unit_of_row_kernels_declares_no_program_shape_and_a_placed_one_its_thread_level() -> None:
    text = cuda_unit.UNIT.read_text()
    assert "TILEFOUNDRY_STATIC_PROGRAM_SHAPE" not in text
    assert set(re.findall(r"^#include .*$", text, re.M)) == {"#include <tilefoundry/runtime.h>"}
    kernels = re.findall(r"^__global__ void __launch_bounds__\((\d+)\) (\w+)_kernel\(", text, re.M)
    assert [name for _, name in kernels] == [k.name for k in cuda_unit.kernels()]
    launches = re.findall(r"launch\.start\((\w+)_kernel, (ctas, \d+, \w+),", text)
    assert len(launches) == len(kernels)
    assert text.count("wait_for_earlier_kernels();") == len(kernels)  # each kernel waits before it reads
    assert text.count("host::CudaLaunch launch(check);") == len(kernels)
    src = generate(lower(K.placed_rows, CudaTarget())).source
    assert "TILEFOUNDRY_STATIC_PROGRAM_SHAPE(thread, 128);" in src


def test_a_cuda_unit_declares_its_launches_linear_and_launches_one_dimensional_grids_of_one_dimensional_blocks(
) -> None:
    # The runtime's program ids then read blockIdx.x and threadIdx.x alone (cuda/program.cuh): the promise is
    # kept only if every launch is of ctas CTAs of N threads, both scalars.
    for kernel in (*cuda_unit.kernels(), K.placed_rows, K.softmax_any_width):
        src = generate(lower(kernel, CudaTarget())).source
        assert "#define TILEFOUNDRY_LINEAR_LAUNCH\n#include <tilefoundry/runtime.h>\n" in src, kernel.name
        launches = re.findall(r"launch\.start\(\w+_kernel, ([^,]+, [^,]+, [^,]+),", src)
        assert launches and all(re.fullmatch(r"ctas, \d+, \w+", c) for c in launches), launches
        assert "unsigned const ctas = launch.grid(grid);" in src and "dim3" not in src
    cpu = generate(lower(K.row_kernels(2048)[0], CpuTarget())).source
    assert "TILEFOUNDRY_LINEAR_LAUNCH" not in cpu


# -- the one translation unit --------------------------------------------------------------------------------

def test_the_unit_is_exactly_what_jit_emits_and_its_digest_is_recorded() -> None:
    text = cuda_unit.generate_unit()
    recorded = cuda_unit.UNIT.read_text()
    if text != recorded:
        diff = "".join(list(difflib.unified_diff(recorded.splitlines(True), text.splitlines(True), "recorded",
                                                 "generated"))[:80])
        pytest.fail("the generated CUDA differs from tests/generated/cuda_acceptance.cu; review the diff and "
                    f"rewrite it with `python -m tests.cuda_unit --write`:\n{diff}")
    assert cuda_unit.digest(text) == cuda_unit.recorded_digest()
    for kernel in (K.rms_norm, K.row_kernels(8192)[1]):  # each piece is one kernel's jit source, unchanged
        assert f"// ---- kernel {kernel.name}\n{cuda_unit.source_of(kernel)}" in text


@pytest.fixture(scope="module")
def unit() -> LinkedModule:
    """The recorded unit, built by jit's own build step: at jit's level where cuobjdump is at hand (the SASS tests
    below count the optimised kernels' registers and accesses), else at -O0, all that the warnings, the exports and
    the entries' argument checks need (nvcc 53 -> 30 s on this 2-core machine, which shortens `make test`)."""
    if NO_NVCC:
        pytest.skip("needs nvcc to build CUDA code")
    options = CompilerOptions() if _cuobjdump() else CompilerOptions(opt_level=0)
    return link(LinkableModule("cuda_acceptance", CudaTarget(), cuda_unit.UNIT.read_text(), (), "", ""), options)


@pytest.fixture(scope="module")
def entries(unit: LinkedModule) -> Any:
    return load_library(unit)


@needs_nvcc
def test_the_unit_builds_with_nvcc_without_a_warning_and_exports_every_kernel(unit: LinkedModule,
                                                                              entries: Any) -> None:
    assert unit.diagnostics == "", f"nvcc printed:\n{unit.diagnostics}"
    for kernel in cuda_unit.kernels():
        assert callable(entries[kernel.name]), kernel.name


def _cuobjdump() -> str | None:
    for candidate in (os.environ.get("CUOBJDUMP"), "/work/tools/cuobjdump", shutil.which("cuobjdump")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


@pytest.fixture(scope="module")
def sass_lines(unit: LinkedModule) -> dict[str, str]:
    """check_sass.sh's line for each bf16 row kernel of the unit (it passed: 16-byte accesses, no LDL/STL)."""
    tool = _cuobjdump()
    if tool is None:
        pytest.skip("no cuobjdump (set $CUOBJDUMP or put it on PATH)")
    names = cuda_unit.bf16_row_kernels()
    pattern = cuda_unit.sass_pattern()
    done = subprocess.run([str(ROOT / "tests" / "gpu" / "check_sass.sh"), str(unit.library), pattern],
                          capture_output=True, text=True, env={**os.environ, "CUOBJDUMP": tool})
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout.splitlines()
    lines = {name: [line for line in out if re.search(f"[0-9]{name}_kernelE", line)] for name in names}
    assert all(len(found) == 1 and found[0].startswith("ok ") for found in lines.values()), done.stdout
    return {name: found[0] for name, found in lines.items()}


@needs_nvcc
def test_bf16_row_kernels_move_16_bytes_at_a_time_with_one_barrier_per_reduction(sass_lines: dict[str, str]) -> None:
    barriers = {name: int(re.search(r"BAR\.SYNC (\d+)", line).group(1)) for name, line in sass_lines.items()}
    for hidden in K.BENCH_HIDDEN:
        want = {"rms_norm": 1, "add_rms_norm": 1, "softmax": 2, "swiglu": 0}
        assert {n: barriers[f"{n}_{hidden}"] for n in want} == want, sass_lines
    assert all(barriers[n] == 0 for n in sass_lines if not n[-1].isdigit())  # a warp or less: shuffles only


# An SM of the H200 has 65536 registers and gives them to a warp 256 at a time (8 a thread): at most 80 a
# thread lets it hold 768 threads (3 CTAs of rms_norm_8192's 256), enough bytes in flight for copy bandwidth.
MAX_ROW_KERNEL_REGISTERS = 80


@needs_nvcc
def test_bf16_row_kernels_take_few_enough_registers_for_768_threads_an_sm(sass_lines: dict[str, str]) -> None:
    registers = {name: int(re.search(r"(\d+) registers$", line).group(1)) for name, line in sass_lines.items()}
    assert all(r <= MAX_ROW_KERNEL_REGISTERS for r in registers.values()), registers


# -- the host entries ----------------------------------------------------------------------------------------

def bf16(*shape: int, device: int = 0, **kw: Any) -> Any:
    return fake_tensor(shape, KDL_BFLOAT, 16, KDL_CUDA, device, **kw)


def f32(*shape: int, device: int = 0, **kw: Any) -> Any:
    return fake_tensor(shape, KDL_FLOAT, 32, KDL_CUDA, device, **kw)


@needs_nvcc
def test_a_call_whose_arguments_all_pass_stops_at_the_launch_saying_no_device_is_present(entries: Any) -> None:
    with pytest.raises(RuntimeError, match=r"rms_norm_2048: no CUDA device is present here \(the CUDA runtime "
                                           r"says: .*\); this entry was compiled for cuda:nvidia.h200_sxm:sm_90a"):
        entries["rms_norm_2048"](bf16(3, 2048), bf16(2048), bf16(3, 2048))


REFUSALS = [
    # (kernel, arguments, exception, words of the message)
    ("rms_norm_2048", lambda: (f32(3, 2048), bf16(2048), bf16(3, 2048)), TypeError,
     "rms_norm_2048: argument x has dtype float32, declared Tensor[(rows, 2048), bf16]"),
    ("rms_norm_2048", lambda: (bf16(3, 2047), bf16(2048), bf16(3, 2048)), ValueError,
     "argument x has shape (3, 2047), declared Tensor[(rows, 2048), bf16] (axis 1: 2047 != 2048)"),
    ("rms_norm_2048", lambda: (bf16(3, 2048), bf16(1, 2048), bf16(3, 2048)), TypeError,
     "argument weight has rank 2"),
    ("rms_norm_2048", lambda: (bf16(3, 2048), bf16(2048, device=1), bf16(3, 2048)), ValueError,
     "argument weight is on cuda:1 but x is on cuda:0; put every tensor on one device"),
    ("rms_norm_2048", lambda: (bf16(3, 2048, byte_offset=2), bf16(2048), bf16(3, 2048)), ValueError,
     "argument x starts at an address that is not a multiple of 16 bytes (offset 2)"),
    ("rms_norm_2048", lambda: (bf16(3, 2048), bf16(2048), bf16(3, 2048, byte_offset=8)), ValueError,
     "argument out starts at an address that is not a multiple of 16 bytes (offset 8)"),
    ("rms_norm_2048", lambda: (bf16(3, 2048, strides=(1, 3)), bf16(2048), bf16(3, 2048)), ValueError,
     "argument x is not contiguous (shape (3, 2048), strides (1, 3))"),
    ("rms_norm_2048", lambda: (bf16(3, 2048), bf16(2048), bf16(4, 2048)), ValueError,
     "argument out (Tensor[(rows, 2048), bf16]) axis 0 is 4, but rows = 3 from argument x"),
    ("softmax_any_width", lambda: (f32(2, 5000), f32(2, 5000)), ValueError,
     "argument x (Tensor[(rows, cols), f32]): DimVar cols = 5000 is outside its range [0, 4096)"),
    ("swiglu_8192", lambda: (bf16(2, 8192), bf16(2, 8192, device=3), bf16(2, 8192)), ValueError,
     "argument up is on cuda:3 but gate is on cuda:0"),
]


@needs_nvcc
@pytest.mark.parametrize("kernel, make, error, words", REFUSALS, ids=[f"{r[0]}-{i}" for i, r in enumerate(REFUSALS)])
def test_an_entry_refuses_bad_arguments_naming_the_parameter(entries: Any, kernel: str, make: Any, error: type,
                                                             words: str) -> None:
    with pytest.raises(error) as info:
        entries[kernel](*make())
    assert words in str(info.value) and str(info.value).startswith(kernel), str(info.value)


@needs_nvcc
def test_outputs_may_share_memory_with_no_input_and_no_other_output(entries: Any) -> None:
    x, r, w = bf16(2, 2048), bf16(2, 2048), bf16(2048)
    out = bf16(2, 2048)
    with pytest.raises(ValueError, match="add_rms_norm_2048: output out0 shares memory with input residual"):
        entries["add_rms_norm_2048"](x, r, w, bf16(2, 2048, base=r), out)
    # both outputs inside one buffer of their own (a view running past its base's buffer could meet any other
    # tensor's memory, and the entry would rightly name that one: this test once failed so, by where w was allocated)
    both = bf16(4, 2048)
    with pytest.raises(ValueError, match="output out1 shares memory with output out0; pass each output a tensor"):
        entries["add_rms_norm_2048"](x, r, w, bf16(2, 2048, base=both), bf16(2, 2048, base=both, byte_offset=4096))


@needs_nvcc
def test_jit_builds_for_a_named_architecture_without_a_gpu_and_a_call_says_no_device_is_present() -> None:
    compiled = jit(K.swiglu, target="cuda:sm_90a")  # the default, "cuda", is refused where torch sees no GPU
    assert isinstance(compiled, CompiledModule) and compiled.library.is_file()
    assert "__global__ void __launch_bounds__(2) swiglu_kernel(" in compiled.source
    gate, up = torch.randn(3, K.FFN).bfloat16(), torch.randn(3, K.FFN).bfloat16()
    with pytest.raises(RuntimeError, match=r"swiglu: no CUDA device is present here .*runs on a CUDA GPU "
                                           r"\(argument gate is on cpu\)"):
        compiled(gate, up)


@needs_nvcc
def test_a_placed_kernel_with_a_cross_warp_reduction_over_shared_memory_builds() -> None:
    compiled = jit(K.placed_rows, target="cuda:sm_90a")
    assert "__shared__ alignas(16) float staged_storage[512];" in compiled.source
    assert "ops::reduce<ops::mean_op, cute::seq<2, 3>>(out0, out1_as_2, reduce_workspace);" in compiled.source
    with pytest.raises(RuntimeError, match="no CUDA device is present"):
        compiled(torch.randn(8, 256))


@pytest.mark.parametrize("late", [Storage.rmem, Storage.smem])
def test_the_cuda_lowerings_staging_runs_right_on_the_cpu_target(monkeypatch: pytest.MonkeyPatch,
                                                                 late: Storage) -> None:
    """The TIR CUDA gets beyond the CPU's (inputs read twice loaded into registers first; weights read after a
    reduction staged in registers, or in shared memory by copy_async with a wait before their first reader;
    outputs read again are computed in registers on every target) is target-independent: lowered so for the
    CPU, it matches the evaluator."""
    from tilefoundry import compile as compile_
    from tilefoundry.lower import rowwise, schedule

    monkeypatch.setattr(rowwise, "staging", lambda target, sched, row: schedule.Staging(True, late, 1 << 20))
    for kernel in (K.rms_norm_written_out, K.softmax, K.elementwise, K.residual_rms_norm):
        compiled = compile_(kernel, target="cpu")  # no in-process cache: lowered anew
        tir = compiled.tir
        if kernel is not K.residual_rms_norm:
            assert "_regs" in tir, kernel.name  # an input read twice
        elif late is Storage.rmem:  # its weight, read after the reduction
            assert "weight_regs <- unary<cast_op>(weight)" in tir and "copy_async" not in tir
        else:
            assert "weight_smem <- copy_async<>(weight)" in tir and "weight_regs" not in tir
            assert tir.index("weight_smem <- copy_async") < tir.index("wait copy_async") < tir.index(
                "out0 <- binary<mul_op>(rms_norm_rounded, weight_smem)")
        for rows in (0, 7, 130):
            report = check(compiled_only(compiled), kernel, inputs_for(kernel, rows), expect=expectations(kernel))
            assert report.passed, f"{kernel.name} at {rows} rows:\n{report}"


@func
def three_late_weights(x: Tensor[(ROWS, 8192), "bf16"], a: ConstTensor[(8192,), "bf16"],
                       b: ConstTensor[(8192,), "bf16"], c: ConstTensor[(8192,), "bf16"]):
    return tf.rms_norm(x, a, 1e-6) * b + c


def test_late_weights_in_shared_memory_share_one_wait_within_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Three weights read after the reduction, 16 KiB each at hidden 8192: the first two fill the 32 KiB budget
    and are staged by copy_async, the third is read where it is used; one wait, before the first reader, covers
    both copies. The same staging, lowered for the CPU target, matches the evaluator."""
    from tilefoundry import compile as compile_
    from tilefoundry.lower import rowwise, schedule

    text = str(lower(three_late_weights, CudaTarget()).functions["three_late_weights"])
    head, loop = text.split("for row in rows of this cta")
    assert "a_smem <- copy_async<>(a)" in head and "b_smem <- copy_async<>(b)" in head and "c_smem" not in text
    assert loop.count("wait copy_async") == 1
    assert loop.index("wait copy_async") < loop.index("binary<mul_op>(rms_norm_rounded, a_smem)") < loop.index(
        "binary<mul_op>(rms_norm, b_smem)") < loop.index("out <- binary<add_op>(mul, c)")
    budget = schedule.CUDA_STAGED_WEIGHT_SMEM
    monkeypatch.setattr(rowwise, "staging", lambda target, sched, row: schedule.Staging(True, Storage.smem, budget))
    compiled = compile_(three_late_weights, target="cpu")
    assert compiled.tir.count("<- copy_async") == 2 and compiled.tir.count("wait copy_async") == 1
    for rows in (0, 3):
        x, a, b, c = (K.rand(shape, torch.bfloat16, seed) for seed, shape in
                      enumerate(((rows, 8192), (8192,), (8192,), (8192,))))
        report = check(compiled_only(compiled), three_late_weights, (x, a, b, c),
                       expect={"output": [K.BF16]})
        assert report.passed, f"at {rows} rows:\n{report}"


def test_nvcc_builds_for_the_targets_architecture_and_the_cache_key_holds_it() -> None:
    from tilefoundry.codegen.build import base_key
    from tilefoundry.codegen.toolchain import toolchain

    h200, a100 = CudaTarget(), CudaTarget("nvidia.a100")
    flags = toolchain(h200, CompilerOptions()).flags
    assert flags[flags.index("-gencode") + 1] == "arch=compute_90a,code=sm_90a"
    assert "arch=compute_80,code=sm_80" in toolchain(a100, CompilerOptions()).flags
    same_source = generate(lower(K.swiglu, h200))
    keys = {base_key(same_source, toolchain(t, CompilerOptions())) for t in (h200, a100)}
    assert len(keys) == 2  # one source, two architectures: two libraries
    if not NO_NVCC:
        command = toolchain(h200, CompilerOptions()).command(Path("k.cu"), Path("k.so"))
        assert "-Xlinker" in command and not any(c.startswith("-Wl,") for c in command)  # nvcc refuses -Wl,

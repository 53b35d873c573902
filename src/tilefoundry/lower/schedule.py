"""The placement pass's choices for a row-wise program: one place decides rows per CTA, threads per
CTA and the per-thread vector width, per target, and builds the thread mesh a row is spread over.

The CPU target runs each CTA on one host thread (OpenMP spreads the CTAs), so a row stays on its
thread and a CTA takes enough rows to amortise the loop. A CUDA target spreads a row over a CTA's
threads in 16-byte vectors (8 bf16, 4 f32), one row per CTA, about two vectors a thread (see
``_cuda_threads``); a program without reductions has its rows cut into segments of one vector a
thread instead (``row_segments``). The numbers live here and nowhere else in lowering.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..ir.types.dim import Dim, floordiv
from ..ir.types.dtype import DType
from ..ir.types.storage import Storage
from ..target import CpuTarget, CudaTarget, Target
from ..tir.function import Schedule
from ..tir.mesh import TMesh, level_strides
from .errors import LoweringError

# A CPU CTA takes rows until it holds about this many elements of a row-wise program.
CPU_ELEMENTS_PER_CTA = 16384
CPU_MAX_ROWS_PER_CTA = 64
# A CUDA row is spread over whole warps so that each thread moves about this many 16-byte vectors of
# each row input, all loaded before the first is used: a row kernel streams from DRAM, and what
# bounds it is the bytes an SM has in flight, and, for few rows, each thread's chain of dependent work
# after its loads. Two vectors a thread keep the bf16 row kernels at 32-40 registers a thread (40 with a
# staged weight), so an SM holds 1536-2048 threads and 48-64 KB of a row input in flight, and halve the
# chain four vectors made
# (H200, bench/kernels.py: at hidden 2048 residual+RMSNorm and softmax are 3-12% faster at every row
# count, one row included). A row takes at most CUDA_ROW_THREADS threads where its elements allow
# (more vectors a thread beyond that: at hidden 8192, 512 threads measured slower for softmax than 256,
# whose four vectors a thread fit), and each thread at most CUDA_MAX_ELEMENTS_PER_THREAD elements where
# the row allows it (registers, not local memory), within CUDA_MAX_THREADS.
CUDA_VECTORS_PER_THREAD = 2
CUDA_ROW_THREADS = 256
CUDA_MAX_THREADS = 1024
CUDA_MAX_ELEMENTS_PER_THREAD = 32
# A row that no whole number of warps tiles in vectors (hidden 4095, 333, 50257; a DimVar length) is
# padded to whole vectors a thread (lower/layouts.py: the layout's bound is the row, and each thread
# reads, writes and reduces only its own existing elements), over the warps that give each thread about
# CUDA_VECTORS_PER_THREAD vectors (at most CUDA_ROW_THREADS threads, more where a thread would hold more
# than CUDA_MAX_ELEMENTS_PER_THREAD elements, within CUDA_MAX_THREADS). A row that a power of two below a
# warp splits exactly keeps that split where a thread holds at most CUDA_MAX_UNPADDED_ELEMENTS elements
# (a row of 96 bf16 over 4 threads, 24 each: its vectors take the 16-byte path). A DimVar row takes
# CUDA_ROW_THREADS threads. (One thread a row, as these rows had before, unrolled thousands of elements a
# thread: nvcc ran for minutes.)
CUDA_MAX_UNPADDED_ELEMENTS = 64
# A row-independent input (a weight row) whose first reader follows the row's first reduction is loaded
# at the top, its loads in flight with the row's: RMSNorm's weight, read after the mean of squares,
# otherwise starts its loads only after the reduction. Into registers where a thread holds at most
# CUDA_STAGED_WEIGHT_VECTORS 16-byte vectors of it (one row: 1.93 -> 1.76 us at hidden 2048); beyond that
# registers cost more than the wait (hidden 8192: 2.31 -> 2.57 us), and the row goes to shared memory with
# cp.async instead, which takes no registers while in flight (residual + RMSNorm at hidden 8192, one row:
# 2.82 -> 2.43 us; 4096 rows unchanged), within CUDA_STAGED_WEIGHT_SMEM bytes a CTA.
CUDA_STAGED_WEIGHT_VECTORS = 2
CUDA_STAGED_WEIGHT_SMEM = 32 * 1024
# A program without reductions needs no whole row in one CTA: its rows are cut into segments of
# one 16-byte vector a thread over CUDA_SEGMENT_THREADS threads (fewer whole warps where the row
# asks for it), each segment a CTA. Then no thread's work is a chain of several dependent vectors:
# one row (a decode step) spreads over row / segment CTAs, and at many rows each thread's two or
# three loads are issued together (a thread's registers stay few, so the SM holds its 2048
# threads, 32 KB per input in flight).
CUDA_SEGMENT_THREADS = (128, 64, 32)


@dataclass(frozen=True)
class Declared:
    """The topology sizes a Module declares (None: not declared)."""

    cta: int | None = None
    thread: int | None = None


def row_segments(target: Target, row: Dim, dtypes: set[DType], declared: Declared, elementwise: bool) -> int | None:
    """Into how many segments each row of an elementwise program is cut (see CUDA_SEGMENT_THREADS), or None
    where rows are not cut: another target, a program with reductions (``elementwise`` False) or a
    row-independent output, declared topologies, a row whose length is known only at launch or that no
    segment of whole warps tiles."""
    if not (isinstance(target, CudaTarget) and elementwise and isinstance(row, int)):
        return None
    if declared.cta is not None or declared.thread is not None:
        return None
    vector = _vector_width(row, dtypes)
    for threads in CUDA_SEGMENT_THREADS:
        if row % (threads * vector) == 0:
            return row // (threads * vector)
    return None


def row_schedule(target: Target, function: str, rows: Dim, row: Dim, dtypes: set[DType], declared: Declared,
                 needs_a_cta: bool, one_vector: bool = False) -> tuple[Schedule, TMesh]:
    """Schedule and thread mesh of a row-wise program with ``rows`` rows of ``row`` elements.

    ``needs_a_cta``: some output does not depend on the row, so at least one CTA runs even for no rows.
    ``one_vector``: the rows are segments (row_segments), one 16-byte vector a thread.
    """
    if isinstance(target, CpuTarget):
        threads, vector = _cpu_threads(function, declared), 1
    elif isinstance(target, CudaTarget) and one_vector:
        vector = _vector_width(row, dtypes)
        threads = row // vector
    elif isinstance(target, CudaTarget):
        threads, vector = _cuda_threads(function, row, dtypes, declared)
    else:  # pragma: no cover - resolve_target admits no other kind
        raise TypeError(f"unknown target {target!r}")
    if declared.cta is not None:
        grid: Dim = declared.cta
        per_cta = floordiv(rows + (declared.cta - 1), declared.cta)
    else:
        per_cta = _rows_per_cta(target, row)
        grid = floordiv(rows + (per_cta - 1), per_cta)
        if needs_a_cta and not (isinstance(grid, int) and grid >= 1):
            grid = _at_least_one(rows, per_cta)
    sched = Schedule("rows", grid, threads, rows, per_cta, vector)
    return sched, thread_mesh(threads)


def _at_least_one(rows: Dim, per_cta: int) -> Dim:
    """``rows // per_cta + 1``: never 0, so the CTA writing row-independent outputs runs even for no rows.

    (When ``per_cta`` divides ``rows`` the last CTA finds no rows of its own; that costs nothing.)
    """
    return floordiv(rows + per_cta, per_cta)


def _cpu_threads(function: str, declared: Declared) -> int:
    if declared.thread not in (None, 1):
        raise LoweringError(
            "topologies", function, f"it declares Topology('thread', {declared.thread}), but the CPU target runs "
            "each CTA on one host thread (thread extent 1); declare Topology('thread', 1) for the CPU or compile "
            "for CUDA", None)
    return 1


def _rows_per_cta(target: Target, row: Dim) -> int:
    if isinstance(target, CpuTarget) and isinstance(row, int):
        return max(1, min(CPU_MAX_ROWS_PER_CTA, CPU_ELEMENTS_PER_CTA // max(row, 1)))
    return 1


def _cuda_threads(function: str, row: Dim, dtypes: set[DType], declared: Declared) -> tuple[int, int]:
    """Threads per CTA and the vector width of a CUDA row: 16 bytes of the narrowest float type in memory.

    The runtime moves an op's memory operands in groups of 16 bytes of the narrowest among them (8 bf16
    elements, also when the op reads f32 beside them), so a thread's contiguous strip is 16 bytes of the
    narrowest float type the kernel reads or writes (8 for bf16, 4 for f32 alone), halved until it
    divides the row. Declared threads are taken as they are (the vector
    halved until their vectors tile the row). Otherwise a row of ``n`` vectors takes, among the whole
    warps dividing ``n`` (at most CUDA_MAX_THREADS threads), the number of threads whose share of
    the row is closest to CUDA_VECTORS_PER_THREAD vectors (in factors of two; a tie goes to more
    threads), keeping that share within CUDA_MAX_ELEMENTS_PER_THREAD where it can and the threads within
    CUDA_ROW_THREADS where the share allows: a row of 2048 bf16 takes 128 threads, 4096 takes 256, each
    thread two 16-byte vectors, 8192 takes 256 with four, 16384 takes 512 with four. A row of fewer
    vectors than a warp, or not a whole number of warps of them, takes the largest power of two
    dividing ``n`` (at most a warp) where that leaves a thread at most CUDA_MAX_UNPADDED_ELEMENTS elements;
    any other row, and a row whose length is a DimVar (in single elements: its alignment is known only at
    launch), is padded to whole vectors a thread (see CUDA_MAX_UNPADDED_ELEMENTS). Declared threads take a
    row they do not tile the same way.
    """
    if declared.thread is not None and declared.thread % 32 and declared.thread not in (1, 2, 4, 8, 16):
        raise LoweringError("topologies", function, f"it declares Topology('thread', {declared.thread}): a row is "
                            "spread over whole warps, or over a power of two threads below a warp", None)
    if not isinstance(row, int):
        return (declared.thread if declared.thread is not None else CUDA_ROW_THREADS), 1
    vector = _narrowest_vector(dtypes)
    if declared.thread is not None:
        threads = declared.thread
        while vector > 1 and row % (vector * threads):
            vector //= 2
        if row % vector:
            vector = _vector_width(row, dtypes)
        return threads, vector
    vector = _vector_width(row, dtypes)
    return _cuda_row_threads(row // vector, vector), vector


def _narrowest_vector(dtypes: set[DType]) -> int:
    """Elements in 16 bytes of the narrowest float type in memory (see _cuda_threads)."""
    floats = [d.bits for d in dtypes if d.is_float and d.bits >= 16]
    narrowest = min(floats or [d.bits for d in dtypes] or [32])
    return max(1, 128 // narrowest)


def _vector_width(row: int, dtypes: set[DType]) -> int:
    """The vector of a static row: _narrowest_vector, halved until it divides the row."""
    vector = _narrowest_vector(dtypes)
    while vector > 1 and row % vector:
        vector //= 2
    return vector


def _cuda_row_threads(vectors: int, vector: int) -> int:
    """Threads for a row of ``vectors`` vectors of ``vector`` elements (see _cuda_threads)."""
    warps = [t for t in range(32, CUDA_MAX_THREADS + 1, 32) if vectors % t == 0]
    if not warps:
        threads = 1
        while threads < 32 and vectors % (threads * 2) == 0:
            threads *= 2
        if vectors // threads * vector <= CUDA_MAX_UNPADDED_ELEMENTS:
            return threads
        return _cuda_padded_threads(vectors, vector)
    fitting = [t for t in warps if vectors // t * vector <= CUDA_MAX_ELEMENTS_PER_THREAD] or [warps[-1]]
    within = [t for t in fitting if t <= CUDA_ROW_THREADS] or [min(fitting)]
    return min(within, key=lambda t: (abs(math.log2(vectors / t / CUDA_VECTORS_PER_THREAD)), -t))


def _cuda_padded_threads(vectors: int, vector: int) -> int:
    """Whole warps for a row of ``vectors`` vectors that they do not tile (see CUDA_MAX_UNPADDED_ELEMENTS)."""
    warps = -(-vectors // (32 * CUDA_VECTORS_PER_THREAD))
    threads = min(max(warps, 1) * 32, CUDA_ROW_THREADS)
    while threads < CUDA_MAX_THREADS and -(-vectors // threads) * vector > CUDA_MAX_ELEMENTS_PER_THREAD:
        threads += 32
    return threads


@dataclass(frozen=True)
class Staging:
    """Which row inputs are loaded before the row's work (rowwise.params).

    ``repeated``: an input several ops read is loaded into registers, so that it is read from global memory
    once. ``late_weights``: where a row-independent input first read after a reduction is staged, registers
    (Storage.rmem) or shared memory through cp.async (Storage.smem), within ``smem_bytes`` in all; None:
    it is read where it is used.
    """

    repeated: bool = False
    late_weights: Storage | None = None
    smem_bytes: int = 0


def staging(target: Target, sched: Schedule, row: Dim) -> Staging:
    """What a row-wise program stages on ``target`` under ``sched``: on CUDA repeated inputs always, late
    weights of a static row in registers where a thread's share is at most CUDA_STAGED_WEIGHT_VECTORS
    vectors, else in shared memory (CUDA_STAGED_WEIGHT_SMEM); the CPU reads its cache either way. A padded
    row (CUDA_MAX_UNPADDED_ELEMENTS) stages only its repeated inputs."""
    if not isinstance(target, CudaTarget):
        return Staging()
    if not isinstance(row, int) or row % (sched.threads_per_cta * sched.vector_width):
        return Staging(True)
    share = row // (sched.threads_per_cta * sched.vector_width)
    if share <= CUDA_STAGED_WEIGHT_VECTORS:
        return Staging(True, Storage.rmem)
    return Staging(True, Storage.smem, CUDA_STAGED_WEIGHT_SMEM)


def thread_mesh(threads: int) -> TMesh:
    """The mesh a row is spread over: ``lane`` (up to 32 threads), with ``warp`` above it beyond that."""
    if threads <= 32:
        axes = (("lane", threads, "thread"),)
    else:
        axes = (("warp", threads // 32, "thread"), ("lane", 32, "thread"))
    return TMesh("threads", ("thread",), level_strides(axes))

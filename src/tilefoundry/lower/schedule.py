"""The placement pass's choices for a row-wise program: one place decides rows per CTA, threads per
CTA and the per-thread vector width, per target, and builds the thread mesh a row is spread over.

The CPU target runs each CTA on one host thread (OpenMP spreads the CTAs), so a row stays on its
thread and a CTA takes enough rows to amortise the loop. A CUDA target spreads a row over a CTA's
threads in 16-byte vectors; the CUDA back end (issue 13) tunes these numbers here without touching
the rest of lowering.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.types.dim import Dim, floordiv
from ..ir.types.dtype import DType
from ..target import CpuTarget, CudaTarget, Target
from ..tir.function import Schedule
from ..tir.mesh import TMesh, level_strides
from .errors import LoweringError

# A CPU CTA takes rows until it holds about this many elements of a row-wise program.
CPU_ELEMENTS_PER_CTA = 16384
CPU_MAX_ROWS_PER_CTA = 64


@dataclass(frozen=True)
class Declared:
    """The topology sizes a Module declares (None: not declared)."""

    cta: int | None = None
    thread: int | None = None


def row_schedule(target: Target, function: str, rows: Dim, row: Dim, dtypes: set[DType], declared: Declared,
                 needs_a_cta: bool) -> tuple[Schedule, TMesh]:
    """Schedule and thread mesh of a row-wise program with ``rows`` rows of ``row`` elements.

    ``needs_a_cta``: some output does not depend on the row, so at least one CTA runs even for no rows.
    """
    if isinstance(target, CpuTarget):
        threads, vector = _cpu_threads(function, declared), 1
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
    """16 bytes a thread for the widest element type, halved until the threads' vectors tile the row."""
    widest = max((d.bits for d in dtypes), default=32)
    if not isinstance(row, int):
        return declared.thread or 1, 1
    vector = max(1, 128 // widest)
    if declared.thread is not None:
        threads = declared.thread
        while vector > 1 and row % (vector * threads):
            vector //= 2
    else:
        while vector > 1 and row % vector:
            vector //= 2
        threads = 1
        while threads < 1024 and (row // vector) % (threads * 2) == 0:
            threads *= 2
    if row % (vector * threads):
        raise LoweringError("topologies", function, f"a row of {row} elements does not split over the {threads} "
                            "declared threads", None)
    return threads, vector


def thread_mesh(threads: int) -> TMesh:
    """The mesh a row is spread over: ``lane`` (up to 32 threads), with ``warp`` above it beyond that."""
    if threads <= 32:
        axes = (("lane", threads, "thread"),)
    else:
        axes = (("warp", threads // 32, "thread"), ("lane", 32, "thread"))
    return TMesh("threads", ("thread",), level_strides(axes))

"""The shared-memory workspace of reductions whose partial results cross warps.

A reduction whose reduced modes are split over thread-level mesh axes spanning more than one warp
exchanges partial results through shared memory. A kernel gets one workspace per accumulator type,
``reduce_workspace``, passed to every such reduction: the runtime's double-buffered
``reduce_workspace`` (two halves, each ``size(local dst) x threads`` accumulators, one barrier per
reduction), sized for the largest destination. Reductions within a warp (or on one thread, as on the
CPU) need none and get none.
"""

from __future__ import annotations

from ..ir.types.dim import product
from ..ir.types.dtype import DType, f32
from ..ir.types.storage import Storage
from ..tir.buffer import Buffer
from ..tir.function import PrimFunc
from ..tir.layout import TLayout
from ..tir.stmt import Alloc, MeshScope, OpCall, RowGuard, RowLoop, Stmt
from .errors import LoweringError

WARP = 32
WORKSPACE = "reduce_workspace"


def accumulator(dtype: DType) -> DType:
    """The type a reduction of ``dtype`` accumulates (and exchanges) in: float for every float type."""
    return f32 if dtype.is_float else dtype


def crosses_warps(call: OpCall) -> bool:
    """True when the reduction's exchange spans more than one warp (a thread axis splitting a reduced mode
    whose instances lie more than a warp apart)."""
    src = call.operands[0]
    layout = src.layout if isinstance(src, Buffer) else None
    if layout is None or layout.mesh is None:
        return False
    for m, attr in enumerate(layout.attrs):
        axis = layout.mesh.axes[m]
        if attr.kind == "S" and attr.mode in call.axes and axis.level == "thread" and axis.extent > 1:
            if axis.stride * axis.extent > WARP:
                return True
    return False


def results_per_thread(call: OpCall) -> int:
    """How many results of the reduction one thread holds (the kept modes of its part of the destination)."""
    local = call.out.layout.local_shape()
    n = product(d for i, d in enumerate(local) if i not in call.axes)
    return n if isinstance(n, int) else -1


def attach_workspaces(fn: PrimFunc) -> PrimFunc:
    """Give every reduction of ``fn`` that crosses warps the kernel's workspace (allocated first in the body).

    Raises LoweringError when such a reduction keeps a number of results per thread known only at launch.
    """
    calls = [c for c in _reduces(fn.body) if crosses_warps(c)]
    if not calls:
        return fn
    threads = fn.schedule.threads_per_cta
    sizes: dict[str, tuple[DType, int]] = {}
    for c in calls:
        n = results_per_thread(c)
        if n < 0:
            raise LoweringError("reduce", fn.name, "a reduction across warps needs a number of results per thread "
                                "known at compile time", c.origin.loc)
        acc = accumulator(c.operands[0].dtype)  # type: ignore[union-attr]
        _, most = sizes.get(acc.name, (acc, 0))
        sizes[acc.name] = (acc, max(most, n))
    buffers: dict[str, Buffer] = {}
    for name, (acc, n) in sizes.items():
        label = WORKSPACE if name == "f32" or len(sizes) == 1 else f"{WORKSPACE}_{name}"
        size = 2 * n * threads
        buffers[name] = Buffer(label, acc, Storage.smem, (size,), TLayout((size,), (1,)))
    for c in calls:
        c.workspace = buffers[accumulator(c.operands[0].dtype).name]  # type: ignore[union-attr]
    allocs = [Alloc(b) for b in buffers.values()]
    scope = fn.body[0] if len(fn.body) == 1 and isinstance(fn.body[0], MeshScope) else None
    if scope is not None:
        scope.body[:0] = allocs
    else:
        fn.body[:0] = allocs
    return fn


def _reduces(body: list[Stmt]) -> list[OpCall]:
    out: list[OpCall] = []
    for s in body:
        if isinstance(s, OpCall) and s.family == "reduce":
            out.append(s)
        elif isinstance(s, (MeshScope, RowLoop, RowGuard)):
            out += _reduces(s.body)
    return out

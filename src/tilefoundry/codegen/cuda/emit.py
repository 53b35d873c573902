"""CUDA for the CUDA target: ``__global__`` kernels and host entries that launch them on the caller's stream.

The kernel body is the shared one (codegen/kernel.py): the same buffers, views and ``ops::`` calls as on
the CPU. What differs is storage and launch:

- registers (rmem) of a static size are register tensors; shared memory (smem) of a static size is a
  ``__shared__`` array, 16-byte aligned, viewed through ``make_aligned_smem_ptr<16>`` (the promise in
  the type: no run-time alignment check in the vector path); a buffer whose size is known only at
  launch (a row whose length is a DimVar) is carved out of the dynamic shared memory, one slice per
  thread for registers;
- the reductions that cross warps share the kernel's ``reduce_workspace`` (lowering allocates it), a
  ``__shared__`` array wrapped by ``ops::make_reduce_workspace``: one barrier per reduction;
- pointers are ``__restrict__`` (the entry refuses outputs that overlap inputs or one another) and the
  kernel states its block size in ``__launch_bounds__``;
- a row's view of a tensor whose alignment the entry checks, at an offset that keeps it, is made over
  ``make_aligned_gmem_ptr<16>``: the promise is in the iterator's type, so the runtime's vector path takes
  16-byte words without checking the address again (and without an element-by-element fallback).

The launch geometry (CTAs, threads per CTA, dynamic shared memory) is derived here, by
:func:`_derive_launch_config`, and written into the host entry as numbers and expressions of the
DimVars; nothing carries it past codegen (spec 1.4). The entry checks what the CPU entry checks, plus
that every tensor is on one CUDA device that exists and starts at the alignment its wide accesses need;
it launches on the caller's current stream for that device (``TVMFFIEnvGetStream``), never the null
stream, and reports a launch the runtime refused. Every launch is a programmatic dependent launch on a GPU that
has them (``host::CudaLaunch::start``; each kernel first calls ``wait_for_earlier_kernels()``, or, a kernel whose
only op is a matmul, ``ops::matmul`` calls it after asking L2 for the CTA's weights), so a kernel's
launch overlaps the tail of the one before it: a staged function's stages follow one another without the
gap of a plain launch, and its independent row-wise and rope stages of one block size share a launch, each a
``__device__`` part of one kernel (``launches.py``). Every launch is one-dimensional, and the unit says so
(``TILEFOUNDRY_LINEAR_LAUNCH``). The thread level is left launch-provided (no
``TILEFOUNDRY_STATIC_PROGRAM_SHAPE(thread, N)``) unless a mesh needs it static, so translation units
of kernels with different block sizes can share one compilation (the runtime takes a reduction's
thread count from the mesh).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...ir.types.dim import Dim, dimvars_of, floordiv
from ...ir.types.storage import Storage
from ...tir.buffer import Buffer
from ...tir.function import KernelParam, PrimFunc, TirModule
from ...tir.stmt import Alloc, GmemView, MeshScope, OpCall, RowLoop, Stmt, calls
from .. import cxx
from ..host import HostEmitter
from ..kernel import KernelEmitter, allocations, gathers, meshes_of
from ..unit import translation_unit
from .launches import SharedLaunch, can_share, plan_launches

# Bytes each buffer in the dynamic shared memory is aligned to (a 16-byte vector access).
SMEM_ALIGN = 16
DYNAMIC_SMEM = "dynamic_smem"


@dataclass(frozen=True)
class LaunchConfig:
    """How a kernel is launched: ``grid`` CTAs of ``block`` threads with ``dynamic_smem`` bytes of dynamic
    shared memory each (expressions of the DimVars where they depend on them)."""

    grid: Dim
    block: int
    dynamic_smem: Dim

    def __str__(self) -> str:
        return f"grid={self.grid} block={self.block} dynamic_smem={self.dynamic_smem}"


def _derive_launch_config(fn: PrimFunc) -> LaunchConfig:
    """The launch geometry of ``fn``: its schedule's CTAs and threads, and the dynamic shared memory its
    buffers of launch-time size take."""
    bytes_: Dim = 0
    for b in _dynamic_buffers(fn):
        bytes_ = bytes_ + _slice_bytes(b, fn)
    return LaunchConfig(fn.schedule.grid, fn.schedule.threads_per_cta, bytes_)


def _slice_bytes(b: Buffer, fn: PrimFunc) -> Dim:
    """Bytes a buffer of launch-time size takes in the dynamic shared memory (every thread's slice of a
    register buffer), rounded up to SMEM_ALIGN."""
    per = _round_up(b.local_size() * (b.dtype.bits // 8))
    threads = fn.schedule.threads_per_cta if b.storage is Storage.rmem else 1
    return per * threads


def _round_up(n: Dim) -> Dim:
    return floordiv(n + (SMEM_ALIGN - 1), SMEM_ALIGN) * SMEM_ALIGN


def _dynamic_buffers(fn: PrimFunc) -> list[Buffer]:
    """The buffers in the dynamic shared memory: those of launch-time size, and a matmul's or a prompt attention's
    ring (a constant size, but more than a kernel's static shared memory may hold: 48 KiB)."""
    rings = {k for k, call in _workspaces(fn.body).items() if call.family in RING_FAMILIES}
    return [b for b in allocations(fn.body) if not isinstance(b.local_size(), int) or id(b) in rings]


# Op families whose CUDA entries wait for the earlier kernel themselves, after asking L2 for what it does not
# write: a matmul's weights (cuda/ops/matmul.cuh). Measured on the H200, a Qwen3-1.7B decode step through the
# compiled slots (CUDA-graph replays): 16 KiB of weight a CTA 2143 -> 2117 us at context 128 (32 KiB 2133, 64 KiB
# 2182); attention's first 32 KiB of its slice's keys and values before its wait made the step slower (+70 us), and
# so did (+19 us at contexts 300 and 1024) the keys and values of its slice that earlier steps cached, from positions
# read around L1 before the wait. Measured again with keys counted in int (2026-12-04; ops::attention waiting itself
# after an L2 prefetch of its whole slice, the way the hand-written kernel does): the step 1560 -> 1572 us at
# context 300 and 1668 -> 1686 at 1024 (three rounds each), the slot alone slower at every context (6.82 -> 7.35 us
# at 128, 38.63 -> 43.60 at 16384). A likely reason, not measured: its CTAs launch in clusters of a key head's
# slices, which start only where a whole cluster finds room, so its prefetch overlaps less of the kernel before.
WAITING_FAMILIES = frozenset({"matmul"})
# ... and families that read only what an earlier call of the same kernel wrote (a reduction's part of the matmul's
# tile before it: lower/reduce_epilogue.py), which need no wait of their own.
OWN_READS_FAMILIES = frozenset({"reduce_parts"})


def _op_waits(body: list[Stmt]) -> bool:
    """Whether every read of the kernel happens inside calls of ``WAITING_FAMILIES``' ops, which wait for the
    earlier kernel themselves: its ops are theirs and no row offset reads the device."""
    calls = 0
    for s in body:
        if isinstance(s, RowLoop):
            if not _op_waits(s.body):
                return False
            calls += 1
        elif isinstance(s, OpCall):
            if s.family in OWN_READS_FAMILIES:
                continue
            if s.family not in WAITING_FAMILIES:
                return False
            calls += 1
        elif isinstance(s, GmemView):
            if s.offset.gathers:
                return False
        elif not (isinstance(s, Alloc) and s.buffer.storage is Storage.smem):  # a matmul's ring reads nothing
            return False
    return calls > 0


# The runtime's wrapper of an op family's shared-memory workspace: a reduction's double-buffered partials, a
# matmul's ring of streamed weight rows (cuda/ops/matmul_stream.cuh), a prompt attention's tiles on wgmma
# (cuda/ops/attention_gmma.cuh).
WORKSPACE_MAKERS = {"reduce": "ops::make_reduce_workspace", "matmul": "ops::make_matmul_ring",
                    "attention_rows": "ops::make_attention_ring"}
RING_FAMILIES = ("matmul", "attention_rows")  # their workspaces carved from the dynamic shared memory


def _workspaces(body: list[Stmt]) -> dict[int, OpCall]:
    """The workspaces of the calls in ``body``, each with the call it serves."""
    return {id(c.workspace): c for c in calls(body) if c.workspace is not None}


def checked_alignment(fn: PrimFunc, p: KernelParam) -> int:
    """The alignment in bytes the host entry checks of tensor ``p`` (0: none): a float tensor the kernel
    reads or writes in vectors starts at a vector's alignment."""
    width = fn.schedule.vector_width
    t = p.type
    if width <= 1 or t.rank == 0 or t.shape[-1] == 1 or not t.dtype.is_float or t.dtype.bits < 16:
        return 0
    return min(16, width * t.dtype.bits // 8)


def _rows_only(body: list[Stmt]) -> bool:
    """Whether ``body`` reads memory only inside its row loops (around them: allocations and meshes)."""
    return all(isinstance(s, (RowLoop, Alloc)) or (isinstance(s, MeshScope) and _rows_only(s.body)) for s in body)


def promised_alignment(fn: PrimFunc, s: GmemView) -> int:
    """The alignment in bytes a row's view of ``s.param`` keeps: what the entry checked of the tensor, where
    every term of the row offset is a static whole number of it (0: none promised)."""
    param = next(p for p in fn.params if p.name == s.param)
    align = checked_alignment(fn, param)
    size = param.type.dtype.bits // 8
    strides = [stride for _, _, stride in s.offset.terms] + [g.stride for g in s.offset.gathers] + [s.offset.base]
    if align < 16 or any(not isinstance(stride, int) or stride * size % align for stride in strides):
        return 0
    return align


class CudaKernel(KernelEmitter):
    """A ``__global__`` kernel: the shared body, CUDA storage for buffers, the block size in its bounds."""

    target_label = "cuda"
    pointer_qualifier = " __restrict__"  # the entry refuses outputs overlapping inputs or one another

    def __init__(self, fn: PrimFunc, part: bool = False) -> None:
        super().__init__(fn)
        self.launch = _derive_launch_config(fn)
        self.part = part  # a part of a shared launch (launches.py): a __device__ function of its CTA index
        bounds = f"{self.launch.block}, {fn.schedule.ctas_per_sm}" if fn.schedule.ctas_per_sm else self.launch.block
        self.qualifier = f"__global__ void __launch_bounds__({bounds})"
        if part:
            self.qualifier = "__device__ __forceinline__ void"
            self.cta_index = "cta"
        self.workspaces = _workspaces(fn.body)
        self.dynamic_offset: Dim = 0

    @property
    def kernel_name(self) -> str:
        suffix = "part" if self.part else "kernel"
        return self.names(("kernel", self.fn.name), f"{self.fn.name}_{suffix}")

    def signature_params(self) -> list[str]:
        return super().signature_params() + (["int64_t cta"] if self.part else [])

    def waits_at_start(self) -> bool:
        """Whether the kernel waits for the one before it at its start (not inside a matmul's call)."""
        return not _op_waits(self.fn.body)

    def waits_after_reads(self) -> bool:
        """Whether the kernel reads its rows' positions before it waits for the kernel before it: every position
        it reads on the device is in a parameter the caller promised that kernel does not write
        (``PrimFunc.early_reads``), read at the top of its row loop (``load_reads``), and nothing else is read
        before its ops."""
        early = set(self.fn.early_reads)
        found = gathers(self.fn.body)
        return (bool(early) and bool(found) and self.waits_at_start() and all(g.param in early for g in found)
                and _rows_only(self.fn.body))

    def after_reads(self, ind: str) -> None:
        if self.waits_after_reads():
            self.lines.append(f"{ind}wait_for_earlier_kernels();  // the positions above were read before it")

    def emit(self) -> list[str]:
        lines = super().emit()
        at = next(i for i, line in enumerate(lines) if line.startswith(self.qualifier)) + 1
        # launched as a programmatic dependent launch (host::CudaLaunch::start): nothing is read before this
        first = ["  wait_for_earlier_kernels();  // the kernel before this one has completed"]
        if self.part:  # the shared launch's kernel waited, or each part does after its reads
            first = []
        elif self.waits_after_reads():
            first = ["  // reads its rows' positions (no kernel right before writes them), then waits for that kernel"]
        elif _op_waits(self.fn.body):
            first = ["  // ops::matmul waits for the kernel before this one (after an L2 prefetch of its weights)"]
        if _dynamic_buffers(self.fn):
            first.insert(0, f"  extern __shared__ __align__({SMEM_ALIGN}) unsigned char {DYNAMIC_SMEM}[];")
        return lines[:at] + first + lines[at:]

    def gmem_iterator(self, s: GmemView, at: str) -> str:
        """A view whose start the entry checked (and the row offset keeps) promises its alignment in its
        iterator's type, so that the runtime's vector path does not check it again."""
        align = promised_alignment(self.fn, s)
        if align:
            return f"make_aligned_gmem_ptr<{align}>({at})"
        return super().gmem_iterator(s, at)

    def alloc(self, b: Buffer, ind: str) -> list[str]:
        size = b.local_size()
        if id(b) in self.workspaces:
            return self._workspace(b, ind)
        if not isinstance(size, int):
            return self._dynamic(b, ind)
        if b.storage is Storage.rmem:
            return super().alloc(b, ind)
        name = self.buffer(b)
        storage = self.names(("storage", id(b)), f"{name}_storage")
        decl = f"__shared__ alignas({SMEM_ALIGN}) {cxx.cxx_type(b.dtype)} {storage}[{size}];"
        pointer = f"make_aligned_smem_ptr<{SMEM_ALIGN}>({storage})"  # the array's alignment, in the type
        return [decl, f"auto {name} = {self.view_over(pointer, b, ind)};"]

    def _workspace(self, b: Buffer, ind: str) -> list[str]:
        """An op's shared-memory workspace behind its family's maker (WORKSPACE_MAKERS): a reduction's a
        ``__shared__`` array, a matmul's ring carved out of the dynamic shared memory."""
        name = self.buffer(b)
        storage = self.names(("storage", id(b)), f"{name}_storage")
        layout = self.layout(b.layout, b.storage, ind)
        call = self.workspaces[id(b)]
        ctype = cxx.cxx_type(b.dtype)
        maker = WORKSPACE_MAKERS[call.family]
        if call.family in RING_FAMILIES:
            declare = self._carve(b, storage)
            if call.weights_constant:  # ConstTensor weights: the ring's first stages copied before the wait
                maker += "<ops::weights_constant>"
        else:
            declare = f"__shared__ alignas({SMEM_ALIGN}) {ctype} {storage}[{b.local_size()}];"
        return [declare, f"auto {name} = {maker}(cute::make_tensor(cute::make_smem_ptr({storage}), {layout}));"]

    def _dynamic(self, b: Buffer, ind: str) -> list[str]:
        """A buffer of launch-time size, in the dynamic shared memory (this thread's slice of registers)."""
        name = self.buffer(b)
        storage = self.names(("storage", id(b)), f"{name}_storage")
        ctype = cxx.cxx_type(b.dtype)
        lines = [self._carve(b, storage)]
        pointer = f"cute::make_smem_ptr({storage})"
        if b.storage is Storage.rmem and self.launch.block > 1:
            per = cxx.dim_expr(_round_up(b.local_size() * (b.dtype.bits // 8)), self.dims)
            pointer = (f"cute::make_smem_ptr({storage} + program_id<TopologyScope::thread>() * (({per}) / "
                       f"sizeof({ctype})))")
        return lines + [f"auto {name} = {self.view_over(pointer, b, ind)};"]

    def _carve(self, b: Buffer, storage: str) -> str:
        """Declares ``storage``, a pointer to ``b``'s slice of the dynamic shared memory (the next one), and moves
        the next slice's offset past it."""
        ctype = cxx.cxx_type(b.dtype)
        offset = cxx.dim_expr(self.dynamic_offset, self.dims)
        at = f"{DYNAMIC_SMEM} + {offset}" if offset != "0" else DYNAMIC_SMEM
        self.dynamic_offset = self.dynamic_offset + _slice_bytes(b, self.fn)
        return f"{ctype}* const {storage} = reinterpret_cast<{ctype}*>({at});"


class CudaHost(HostEmitter):
    """The host entry of a CUDA kernel: the shared checks plus device presence, index and alignment, then the
    launch with the derived geometry on the caller's stream."""

    device_type = "kDLCUDA"
    device_label = "cuda"

    def checker(self) -> str:
        return f"host::CudaArgChecker check({cxx.string(self.fn.name)}, {cxx.string(str(self.target))});"

    @classmethod
    def stage_emitters(cls, fn: PrimFunc, kernel_cls: type[KernelEmitter]) -> tuple[list[Any], tuple[Any, ...]]:
        """The stages' kernels, those of a shared launch (launches.py) as parts with the launch's kernel after
        them, and the launches in the order the entry makes them."""
        plain = [CudaKernel(s.fn) for s in fn.stages]
        shareable = [can_share(s.fn, bool(_dynamic_buffers(s.fn)), k.waits_at_start())
                     for s, k in zip(fn.stages, plain)]
        emitted: list[Any] = []
        launches: list[Any] = []
        for n, la in enumerate(plan_launches(fn, shareable)):
            if len(la.stages) == 1:
                emitted.append(plain[la.stages[0]])
                launches.append(plain[la.stages[0]])
                continue
            parts = [CudaKernel(fn.stages[k].fn, part=True) for k in la.stages]
            shared = SharedLaunch(fn, n, la.stages, parts)
            emitted += [*parts, shared]
            launches.append(shared)
        return emitted, tuple(launches)

    def launch_stages(self) -> list[str]:
        """The temporaries, then each launch in order: a stage's own kernel, or several stages' shared one."""
        lines, pointers = self.temporaries()
        for n, launch in enumerate(self.stage_kernels):
            if not isinstance(launch, SharedLaunch):
                k = next(k for k, stage in enumerate(self.fn.stages) if stage.fn is launch.fn)
                lines += self.stage_launch(f"launch {n}: stage {k}", k, launch, pointers)
                continue
            what = ", ".join(f"{self.fn.stages[k].fn.name}({', '.join(self.fn.stages[k].args)})"
                             for k in launch.stages)
            lines += [f"{{  // launch {n}: stages {', '.join(map(str, launch.stages))}: {what}",
                      *("  " + line for line in launch.host_lines(pointers, self.dims)), "}"]
        return lines

    def layout_checks(self, p: KernelParam) -> list[str]:
        """A float tensor a kernel reads or writes in vectors starts at a vector's alignment (for a staged
        function, the most any stage reading or writing it asks)."""
        if self.fn.stages:
            align = max((checked_alignment(s.fn, q) for s in self.fn.stages for q, arg in zip(s.fn.params, s.args)
                         if arg == p.name), default=0)
        else:
            align = checked_alignment(self.fn, p)
        if not align:
            return []
        return [f"check.aligned({self.views[p.name]}, {cxx.string(p.name)}, {align});"]

    def temporary(self, name: str, ctype: str, count: str) -> list[str]:
        # stream-ordered global memory (graph-capturable), freed on the stream when the entry returns
        return [f"host::DeviceScratch<{ctype}> {name}(check, {count});"]

    def launch(self, kernel: KernelEmitter, args: str) -> list[str]:
        assert isinstance(kernel, CudaKernel)
        cfg = kernel.launch
        smem = cxx.dim_expr(cfg.dynamic_smem, self.dims)
        lines = [f"// launch: {_describe(kernel.fn, cfg, self.dims)}",
                 "host::CudaLaunch launch(check);",
                 "unsigned const ctas = launch.grid(grid);"]
        if smem != "0":
            lines.insert(1, f"std::size_t const shared_bytes = static_cast<std::size_t>({smem});")
            lines.append(f"launch.dynamic_shared_memory({kernel.kernel_name}, shared_bytes, "
                         f"{cxx.string(_dynamic_what(kernel.fn))});")
            smem = "shared_bytes"
        cluster = kernel.fn.schedule.cluster
        start = (f"launch.start_in_clusters({kernel.kernel_name}, ctas, {cluster}, " if cluster > 1
                 else f"launch.start({kernel.kernel_name}, ctas, ")
        lines += ["if (ctas > 0) {", f"  {start}{cfg.block}, {smem}, {args});", "}"]
        return lines


def _describe(fn: PrimFunc, cfg: LaunchConfig, dims: dict[str, str]) -> str:
    s = fn.schedule
    what = f"{cxx.dim_expr(cfg.grid, dims)} CTAs of {_count(cfg.block, 'thread')}"
    if s.placement == "rows":
        what += f", {_count(s.rows_per_cta, 'row')} each" if isinstance(s.rows_per_cta, int) else ""
        if s.vector_width > 1:
            what += f", a thread's part of a row in strips of {s.vector_width} contiguous elements"
    if cfg.dynamic_smem != 0:
        what += f", {cxx.dim_expr(cfg.dynamic_smem, dims)} bytes of dynamic shared memory"
    if s.cluster > 1:
        what += f", in thread-block clusters of {s.cluster} CTAs"
    return what


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _dynamic_what(fn: PrimFunc) -> str:
    buffers = _dynamic_buffers(fn)
    names = ", ".join(b.name for b in buffers)
    sizes = sorted(d.name for d in dimvars_of(b.local_size() for b in buffers))
    return f"buffers {names}, sized by {', '.join(sizes)}" if sizes else f"buffers {names}"


def program_shapes(fns: list[PrimFunc]) -> list[str]:
    """The static program shapes a CUDA unit declares: the thread level only where a mesh spans the CTA
    level and the thread level (the runtime's mesh rule then needs the thread count static), and then
    only when every function agrees on it."""
    needing = [f for f in fns if any(len(m.levels) > 1 for m in meshes_of(f.body))]
    if not needing:
        return []
    threads = {f.schedule.threads_per_cta for f in fns}
    if len(threads) > 1:
        names = ", ".join(f"{f.name} ({f.schedule.threads_per_cta})" for f in fns)
        raise ValueError(f"the functions of one CUDA translation unit run different thread counts ({names}) and "
                         f"{needing[0].name}'s mesh needs its thread level static; compile them as separate "
                         "Modules, or declare one Topology('thread', N) for the Module")
    return [f"TILEFOUNDRY_STATIC_PROGRAM_SHAPE(thread, {threads.pop()});"]


# Every host entry launches a one-dimensional grid of one-dimensional blocks (ctas CTAs of threads), and says
# so to the runtime: its program ids then read blockIdx.x and threadIdx.x alone, so a kernel's first load
# waits on a few instructions, not on a linearisation over y and z (at one row, where the address is all
# the work before the load: SwiGLU 1.45 -> 1.37 us at hidden 2048, H200, bench/kernels.py's timing).
LINEAR_LAUNCH = (
    "// Its launches are one-dimensional (ctas CTAs of threads): program ids read blockIdx.x, threadIdx.x.",
    "#define TILEFOUNDRY_LINEAR_LAUNCH",
)


def emit_cuda(mod: TirModule) -> str:
    """The translation unit of ``mod`` for a CUDA target."""
    fns = [k for f in mod.functions.values() for k in f.kernels]
    return translation_unit(mod, CudaKernel, CudaHost, "TILEFOUNDRY_TARGET_CUDA", program_shapes(fns),
                            LINEAR_LAUNCH)

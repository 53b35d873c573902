"""Launches of a staged function on CUDA: independent stages of one block size share one launch.

A staged function's stages run one after another, each a kernel launch; a launch costs the GPU about a
microsecond of drain and start even as a programmatic dependent launch, which is most of a small stage's
time (Qwen3's q/k norm, rope and cache writes: six stages of a token's few rows each). Stages that do not
depend on one another need no such boundary: they run as *parts* of one kernel, the launch's CTAs dealt out
to the parts in order (part 0 takes CTAs ``[0, ctas0)``, part 1 the next ``ctas1``, ...), each part running
its stage's body with its own CTA index.

A stage depends on an earlier one when it reads or writes memory the earlier one writes, or writes memory
the earlier one reads (arguments compared by name; an output the caller may pass as the input it updates in
place counts as that input). Each stage goes at the level after the last stage it depends on; the stages of
one level whose kernels may share a launch (a row-wise or rope schedule, the same threads per CTA, no
dynamic shared memory, a kernel that waits for the one before it at its start) are parts of one launch, and
the levels run in order. A stage skipped when two of its arguments are one tensor (the copy of a cache
updated in place) is a part whose CTA count is then 0. Every part's CTA count is computed by the entry and
passed to the kernel, which waits for the earlier kernel once, then runs the part its CTA falls in.

Such skipped copies that depend on no earlier stage form a *prelude*: a launch of their own before every other,
the levels of the others counted as if it were not there (it has run when they start). Where the caller updates
its caches in place the prelude has no CTAs and the entry does not launch it, so writing into a cache costs no
level of its own (Qwen3's rope + cache slot: one launch).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...tir.function import PrimFunc, StageCall
from .. import cxx

# Placements whose kernels read their CTA index only through the row loop (the runtime ops they call work
# within a CTA): they may run as a part of a shared launch.
PART_PLACEMENTS = frozenset({"rows", "rope"})


@dataclass(frozen=True)
class Launch:
    """One launch of a staged entry: the indices of the stages it runs, in order (one stage: a plain launch)."""

    stages: tuple[int, ...]


def _accesses(stage: StageCall, same: dict[str, str]) -> tuple[set[str], set[str]]:
    """The arguments ``stage`` reads and writes (outputs in place named as their inputs)."""
    reads, writes = set(), set()
    for p, arg in zip(stage.fn.params, stage.args):
        (writes if p.is_output else reads).add(same.get(arg, arg))
    return reads, writes


def _depends(later: tuple[set[str], set[str]], earlier: tuple[set[str], set[str]]) -> bool:
    reads, writes = later
    e_reads, e_writes = earlier
    return bool(e_writes & (reads | writes)) or bool(writes & e_reads)


def can_share(fn: PrimFunc, dynamic_smem: bool, waits_at_start: bool) -> bool:
    """Whether stage kernel ``fn`` may run as a part of a shared launch."""
    return (fn.schedule.placement in PART_PLACEMENTS and fn.schedule.cluster == 1 and not dynamic_smem
            and waits_at_start)


def plan_launches(fn: PrimFunc, shareable: list[bool]) -> list[Launch]:
    """The launches of staged function ``fn``'s stages (``shareable[k]``: stage k's kernel may be a part)."""
    same = dict(fn.aliases)  # an output the caller may pass as the input it updates, named as that input
    access = [_accesses(s, same) for s in fn.stages]
    prelude = [k for k, s in enumerate(fn.stages)
               if s.unless_same is not None and not any(_depends(access[k], access[j]) for j in range(k))]
    level: list[int] = []
    for k in range(len(fn.stages)):
        if k in prelude:
            level.append(-1)
            continue
        level.append(1 + max((level[j] for j in range(k) if j not in prelude and _depends(access[k], access[j])),
                             default=-1))
    launches: list[Launch] = []
    for lv in range(-1 if prelude else 0, max(level, default=-1) + 1):
        groups: dict[int, list[int]] = {}  # threads per CTA -> the level's shareable stages of that block size
        for k in (k for k in range(len(fn.stages)) if level[k] == lv):
            if shareable[k]:
                groups.setdefault(fn.stages[k].fn.schedule.threads_per_cta, []).append(k)
            else:
                launches.append(Launch((k,)))
        launches += [Launch(tuple(ks)) for ks in groups.values()]
    launches.sort(key=lambda la: (level[la.stages[0]], la.stages[0]))
    return launches


class SharedLaunch:
    """The ``__global__`` kernel of a launch whose parts are several stages' bodies (``parts``: their kernels
    emitted as ``__device__`` functions of a CTA index), and its launch in the entry."""

    def __init__(self, fn: PrimFunc, index: int, stages: tuple[int, ...], parts: list) -> None:
        self.fn = fn
        self.stages = stages
        self.parts = parts
        self.block = parts[0].launch.block
        self.kernel_name = f"{fn.name}_launch{index}_kernel"
        calls = [fn.stages[k] for k in stages]
        self.args: list[str] = []  # the entry's pointers the kernel takes, in order of first use
        self.written: set[str] = set()
        self.dtypes: dict[str, object] = {}
        for call in calls:
            for p, arg in zip(call.fn.params, call.args):
                if arg not in self.dtypes:
                    self.args.append(arg)
                    self.dtypes[arg] = p.type.dtype
                if p.is_output:
                    self.written.add(arg)
        self.dimvars = list(dict.fromkeys(b.dimvar.name for call in calls for b in call.fn.dimvars))
        self.names = cxx.Names(("cta",))
        self.pointer = {a: self.names(("ptr", a), f"{a}_ptr") for a in self.args}
        self.dim = {d: self.names(("dim", d), d) for d in self.dimvars}
        self.counts = [self.names(("ctas", k), f"ctas{k}") for k in range(len(stages))]

    def emit(self) -> list[str]:
        """The kernel: one wait for the earlier kernel, then the part the CTA falls in, with its own CTA index."""
        params = []
        for a in self.args:
            const = "" if a in self.written else " const"
            params.append(f"{cxx.cxx_type(self.dtypes[a])}{const}* __restrict__ {self.pointer[a]}")
        params += [f"int64_t {self.dim[d]}" for d in self.dimvars] + [f"int64_t {c}" for c in self.counts]
        names = ", ".join(self.fn.stages[k].fn.name for k in self.stages)
        wait = "  wait_for_earlier_kernels();  // the kernel before this one has completed"
        if all(part.waits_after_reads() for part in self.parts):  # each part reads its positions, then waits
            wait = "  // each part reads its rows' positions (no kernel right before writes them), then waits"
        lines = [f"// {self.kernel_name}: the stages {names} in one launch, their CTAs one after another",
                 f"__global__ void __launch_bounds__({self.block}) {self.kernel_name}({', '.join(params)}) {{",
                 wait, "  int64_t cta = int64_t(program_id<TopologyScope::cta>());"]
        for n, (k, part) in enumerate(zip(self.stages, self.parts)):
            call = self.fn.stages[k]
            args = [self.pointer[a] for a in call.args] + [self.dim[b.dimvar.name] for b in call.fn.dimvars]
            invoke = f"{part.kernel_name}({', '.join([*args, 'cta'])});"
            if n + 1 < len(self.parts):
                lines += [f"  if (cta < {self.counts[n]}) {{", f"    {invoke}", "    return;", "  }",
                          f"  cta -= {self.counts[n]};"]
            else:
                lines.append(f"  if (cta < {self.counts[n]}) {invoke}")
        return [*lines, "}"]

    def host_lines(self, pointers: dict[str, str], dims: dict[str, str]) -> list[str]:
        """The entry's launch: each part's CTA count (0 for a copy its in-place arguments skip), then the kernel
        over their sum."""
        lines = []
        for n, k in enumerate(self.stages):
            call = self.fn.stages[k]
            count = cxx.dim_expr(call.fn.schedule.grid, dims)
            if call.unless_same is not None:
                a, b = call.unless_same
                count = (f"static_cast<void const*>({pointers[a]}) != static_cast<void const*>({pointers[b]}) ? "
                         f"int64_t({count}) : int64_t(0)")
                lines.append(f"int64_t const {self.counts[n]} = {count};  // none where {b} is {a}")
            else:
                lines.append(f"int64_t const {self.counts[n]} = {count};")
        args = [pointers[a] for a in self.args] + [dims[d] for d in self.dimvars] + self.counts
        return [*lines,
                f"int64_t const grid = {' + '.join(self.counts)};",
                f"// launch: the CTAs of {len(self.stages)} stages in turn, {self.block} threads each",
                "host::CudaLaunch launch(check);",
                "unsigned const ctas = launch.grid(grid);",
                "if (ctas > 0) {",
                f"  launch.start({self.kernel_name}, ctas, {self.block}, 0, {', '.join(args)});",
                "}"]

"""PrimFunc (one kernel), its parameters, DimVar bindings and schedule; TirModule (a lowered Module)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..ir.core.source import SourceLoc
from ..ir.types.dim import Dim, DimVar
from ..ir.types.tensor_type import TensorType
from .stmt import Stmt

if TYPE_CHECKING:
    from .dispatch import Dispatch


@dataclass(frozen=True)
class KernelParam:
    """One entry parameter: a whole tensor in gmem; outputs trail the inputs."""

    name: str
    type: TensorType
    is_output: bool

    def __str__(self) -> str:
        return f"{self.name}: {self.type}"


@dataclass(frozen=True)
class DimBinding:
    """Where a DimVar is read from: the first parameter axis declared exactly as it."""

    dimvar: DimVar
    param: str
    axis: int

    def __str__(self) -> str:
        d = self.dimvar
        return f"{d.name} in [{d.lo}, {d.hi}) from {self.param}.shape[{self.axis}]"


@dataclass(frozen=True)
class Schedule:
    """How a kernel's work is spread, chosen by the placement pass (and only there).

    Attributes:
        placement: ``"rows"`` (automatic: leading axes over CTAs, the last axis over threads) or
            ``"mesh"`` (the function's own ``with Mesh(...)`` placement).
        grid: the CTA count; an int is static, an expression of DimVars is provided at launch.
        threads_per_cta: the thread level's extent (1 on the CPU target).
        rows: the row count of a ``rows`` schedule (1 for a mesh schedule).
        rows_per_cta: rows each CTA runs, one after the other.
        vector_width: elements a thread holds contiguously along the last axis (16 bytes' worth is what
            a GPU loads in one instruction).
        cluster: consecutive CTAs launched as one thread-block cluster (CUDA, sm_90 and later), which run
            at once and may wait for each other; 1: none.
        ctas_per_sm: the CTAs an SM the kernel is built to hold at once (CUDA: ``__launch_bounds__``' minimum,
            which caps its registers a thread at entry, as ``setmaxnreg`` needs); 0: unstated.
    """

    placement: str
    grid: Dim
    threads_per_cta: int
    rows: Dim = 1
    rows_per_cta: Dim = 1
    vector_width: int = 1
    cluster: int = 1
    ctas_per_sm: int = 0

    def __str__(self) -> str:
        text = (f"placement={self.placement} grid={self.grid} threads_per_cta={self.threads_per_cta} "
                f"rows={self.rows} rows_per_cta={self.rows_per_cta} vector_width={self.vector_width}")
        text += f" cluster={self.cluster}" if self.cluster > 1 else ""
        return text + (f" ctas_per_sm={self.ctas_per_sm}" if self.ctas_per_sm else "")


class EntryParams:
    """The inputs and outputs of an entry's ``params`` (inputs, then ``output_count`` outputs): a PrimFunction's, a
    dispatching entry's (tir/dispatch.py)."""

    params: tuple[KernelParam, ...]
    output_count: int

    @property
    def inputs(self) -> tuple[KernelParam, ...]:
        """The leading, input parameters."""
        return self.params[: len(self.params) - self.output_count]

    @property
    def outputs(self) -> tuple[KernelParam, ...]:
        """The trailing, output parameters."""
        return self.params[len(self.params) - self.output_count:]


@dataclass(eq=False)
class PrimFunc(EntryParams):
    """One kernel: parameters (inputs, then ``output_count`` outputs), DimVar bindings, schedule, body.

    A staged function (placement ``stages``) has no body of its own: its entry launches ``stages`` in order,
    each a kernel over the function's parameters and ``temps``, global memory the entry allocates per call.
    ``aliases`` are (output, input) pairs the caller may pass as one tensor: the output is then updated in place
    (a cache the step writes into), and the stage copying the input into it is skipped. ``early_reads`` are
    parameters the caller promised no kernel launched right before this one writes (``with_early_reads``).
    """

    name: str
    params: tuple[KernelParam, ...]
    output_count: int
    dimvars: tuple[DimBinding, ...]
    schedule: Schedule
    body: list[Stmt] = field(default_factory=list)
    loc: SourceLoc | None = None
    stages: tuple[StageCall, ...] = ()
    temps: tuple[KernelParam, ...] = ()
    aliases: tuple[tuple[str, str], ...] = ()
    early_reads: tuple[str, ...] = ()

    @property
    def kernels(self) -> tuple[PrimFunc, ...]:
        """The kernels the entry launches: the stages', or this function itself."""
        return tuple(s.fn for s in self.stages) if self.stages else (self,)

    def __str__(self) -> str:
        from .printer import print_function

        return print_function(self)


@dataclass(eq=False)
class StageCall:
    """One launch of a staged function: kernel ``fn``, each of its parameters bound to the staged function's
    parameter or temporary named in ``args`` (same order)."""

    fn: PrimFunc
    args: tuple[str, ...]
    cache_writes: tuple[CacheWrite, ...] = ()
    unless_same: tuple[str, str] | None = None  # skipped when these two arguments are one tensor (an in-place copy)


@dataclass(frozen=True)
class CacheWrite:
    """A stage writes ``count`` rows at position ``pos`` (0-d integer parameters of its kernel) into a cache of
    ``capacity`` rows, ``what``: the entry checks ``pos + count <= capacity`` where the target checks positions."""

    pos: str
    count: str
    capacity: Dim
    what: str


@dataclass(eq=False)
class TirModule:
    """A lowered Module: its PrimFunctions by name, the entry among them and the target lowered for.

    ``dispatches`` are the entries of dispatching functions (tir/dispatch.py), by name: each calls one of its
    variants' PrimFunctions, which ``functions`` holds. The entry may name one.
    """

    name: str
    target: Any
    functions: dict[str, PrimFunc]
    entry: str
    dispatches: dict[str, Dispatch] = field(default_factory=dict)

    def with_early_reads(self, names: tuple[str, ...]) -> TirModule:
        """This module with ``names`` marked as parameters its functions' kernels may read before they wait for
        the kernel launched before them (``CompilerOptions.early_reads``: the caller promises that kernel does not
        write them). On CUDA a kernel launched as a programmatic dependent launch starts while the one before it
        ends; one whose rows read positions on the device (an index into a table, a cache's write position)
        only from these parameters reads them first and then waits, so the memory round trip of those reads
        overlaps the earlier kernel's end. A staged function's stages get the names their arguments bind.

        Raises:
            ValueError: a name that is no parameter of any of the module's functions (the message lists them).
        """
        if not names:
            return self
        known = {p.name for f in self.functions.values() for p in f.params}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ValueError(f"CompilerOptions.early_reads names {', '.join(map(repr, unknown))}, no parameter of "
                             f"Module {self.name!r} (its parameters: {', '.join(sorted(known))})")

        def marked(fn: PrimFunc, early: set[str]) -> PrimFunc:
            stages = tuple(replace(s, fn=marked(s.fn, {p.name for p, a in zip(s.fn.params, s.args) if a in early}))
                           for s in fn.stages)
            own = tuple(p.name for p in fn.params if p.name in early)
            return replace(fn, stages=stages, early_reads=own)

        functions = {name: marked(fn, set(names)) for name, fn in self.functions.items()}
        return TirModule(self.name, self.target, functions, self.entry, self.dispatches)

    def __str__(self) -> str:
        from .printer import print_module

        return print_module(self)

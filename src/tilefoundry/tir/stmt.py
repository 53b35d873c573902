"""TIR statements: allocations, views, runtime-op calls, barriers and waits, mesh scopes and the row loop."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from ..ir.core.source import SourceLoc
from ..ir.types.dim import Dim, DimVar
from ..ir.types.dtype import DType
from .buffer import Buffer, Literal, Operand
from .mesh import TMesh
from .tensor_map import TensorMap


class Stmt:
    """Base of every TIR statement."""


@dataclass(frozen=True)
class Origin:
    """Where a statement comes from: the HIR op, the composite it was expanded from, the source line."""

    op: str
    loc: SourceLoc | None
    composite: str | None = None

    def __str__(self) -> str:
        what = f"{self.composite}/{self.op}" if self.composite else self.op
        where = f"{self.loc.filename.rsplit('/', 1)[-1]}:{self.loc.lineno}" if self.loc is not None else "?"
        return f"{what} @ {where}"


@dataclass(eq=False)
class Alloc(Stmt):
    """Declare ``buffer`` (rmem or smem) in the current scope."""

    buffer: Buffer


@dataclass(frozen=True)
class Gather:
    """A position read on the device: element ``at`` of integer parameter ``param``, in ``[0, bound)``, times
    ``stride``. A position outside the table it indexes never reaches memory outside it: the CPU entry refuses it,
    a CUDA kernel prints it and stops (``detail::index_in``). ``table`` says what it indexes, as both name it."""

    param: str
    at: RowOffset
    stride: Dim
    bound: Dim
    table: str = "rows"  # what the position indexes, as a refusal names it ("rows of cos")

    def __str__(self) -> str:
        t = f"{self.param}[{self.at}]"
        return t if self.stride == 1 else f"{t} * {self.stride}"


@dataclass(frozen=True)
class RowOffset:
    """The element offset of row ``row`` in a parameter: ``base`` plus ``((row // div) % mod) * stride`` terms, plus
    the ``gathers`` (positions read on the device: a table's row at a token's id, a cache row at a position).

    ``mod`` None means no modulo (the outermost leading axis). An empty offset is 0.
    """

    terms: tuple[tuple[Dim, Dim | None, Dim], ...] = ()
    gathers: tuple[Gather, ...] = ()
    base: Dim = 0

    def __str__(self) -> str:
        parts = [] if self.base == 0 else [str(self.base)]
        minus = []
        for div, mod, stride in self.terms:
            t = "row" if div == 1 else f"(row / {_operand(div)})"
            if mod is not None:
                t = f"({t} % {_operand(mod)})"
            negative = isinstance(stride, int) and stride < 0
            stride = -stride if negative else stride
            (minus if negative else parts).append(t if stride == 1 else f"{t} * {stride}")
        parts += [str(g) for g in self.gathers]
        return "".join([" + ".join(parts) or "0", *(f" - {t}" for t in minus)])


@dataclass(eq=False)
class GmemView(Stmt):
    """``buffer`` views parameter ``param``'s memory from element ``offset`` on, with ``buffer.layout``."""

    buffer: Buffer
    param: str
    offset: RowOffset = field(default_factory=RowOffset)


@dataclass(eq=False)
class AliasView(Stmt):
    """``buffer`` views ``source``'s memory with another layout (a broadcast or reduce-shaped view)."""

    buffer: Buffer
    source: Buffer


@dataclass(frozen=True)
class Tag:
    """A runtime op tag (``exp_op``, ``clamp_op``) and the literal fields it is built with."""

    name: str
    args: tuple[Literal, ...] = ()

    def __str__(self) -> str:
        return self.name + (f"{{{', '.join(str(a) for a in self.args)}}}" if self.args else "")


@dataclass(frozen=True)
class EpilogueStep:
    """One elementwise op of an epilogue: ``name = family<tag>(operands)`` rounded to ``dtype``. An operand is a
    literal, a buffer (read at the element's own (m, n)) or the name of the epilogue's input or of an earlier step."""

    name: str
    family: str
    tag: Tag
    operands: tuple[Buffer | Literal | str, ...]
    dtype: DType
    origin: Origin

    def __str__(self) -> str:
        ins = ", ".join(o if isinstance(o, str) else o.name if isinstance(o, Buffer) else str(o)
                        for o in self.operands)
        return f"{self.name} = {self.family}<{self.tag}>({ins}):{self.dtype}"


@dataclass(frozen=True)
class Epilogue:
    """Elementwise ops applied to each result of an op before it is stored (a residual added to each matmul
    output): the result, rounded to ``dtype``, is named ``value``; the steps follow; ``result`` is stored. A pair
    of matmuls sharing their first operand has two results at each element: the second is named ``second``."""

    value: str
    dtype: DType
    steps: tuple[EpilogueStep, ...]
    result: str
    second: str | None = None

    def __str__(self) -> str:
        ins = f"{self.value}:{self.dtype}" + (f", {self.second}:{self.dtype}" if self.second is not None else "")
        return f"epilogue({ins}; {'; '.join(str(s) for s in self.steps)} -> {self.result})"


@dataclass(frozen=True)
class Prologue:
    """How a matmul reads its first operand, or a rope its row: ``rms_norm(a, weight, eps)`` of each of its rows,
    computed in ``compute`` and rounded to ``dtype`` (the normed rows' dtype) as each element is read, so the
    normed rows never reach memory (the RMSNorm before a projection, or Qwen3's q/k norm before the rotation,
    fused)."""

    kind: str
    weight: Buffer
    eps: Literal
    compute: DType
    dtype: DType
    origin: Origin

    def __str__(self) -> str:
        return f"prologue({self.kind}<{self.compute}>(a, {self.weight.name}, eps={self.eps}):{self.dtype})"


@dataclass(eq=False)
class OpCall(Stmt):
    """One call of a runtime op family entry: ``ops::<family>(tag, operands..., out)``.

    ``axes`` are the reduced flat modes of a reduce; ``workspace`` its shared-memory buffer when the
    reduction crosses warps (never on the CPU). ``fill`` takes its value as the one literal operand.
    ``more_out`` are the results after ``out`` of a family with several (topk: ``out`` the values,
    ``more_out`` the indices). ``functors`` are op objects passed before the operands (attention's scores and
    visibility test), ``indices`` integers of the row passed after the results (attention's slice and slice count);
    ``epilogue`` the elementwise ops a matmul applies to each result before storing it; ``prologue`` how a matmul
    reads its first operand (normed rows); ``then`` unary ops an elementwise call applies to each result, in order,
    before storing it (a chain of elementwise ops run as one call: ``codegen/cpu/chains.py``); ``fold`` a reduce call
    over this call's ``out`` that it runs as it stores its results (``ops::fold``, the same chains, CPU only).
    ``weights_constant``: a streamed matmul's second operands (its weights) are ConstTensor parameters, which no
    kernel writes, so its CUDA entry copies them before it waits for the kernel before it. ``maps``: the tensor
    maps of its operands the host entry makes and the call takes last (a GEMM's, ``tensor_map.py``).
    """

    family: str
    tag: Tag | None
    operands: tuple[Operand, ...]
    out: Buffer
    origin: Origin
    axes: tuple[int, ...] = ()
    workspace: Buffer | None = None
    more_out: tuple[Buffer, ...] = ()
    functors: tuple[Tag, ...] = ()
    indices: tuple[RowOffset, ...] = ()
    epilogue: Epilogue | None = None
    prologue: Prologue | None = None
    then: tuple[Tag, ...] = ()
    fold: OpCall | None = None
    weights_constant: bool = False
    maps: tuple[TensorMap, ...] = ()


@dataclass(eq=False)
class Sync(Stmt):
    """A barrier among the instances of ``kind`` (``cta``: the threads of one CTA)."""

    kind: str
    origin: Origin | None = None


@dataclass(eq=False)
class AsyncWait(Stmt):
    """Wait until this instance's ``copy_async`` calls so far have landed. An instance that reads back only
    what it staged itself needs nothing more; another instance's copies need a ``Sync`` after this."""

    origin: Origin | None = None


@dataclass(frozen=True)
class Bound:
    """``lhs < rhs``, offsets of a row. A bound that ``stops`` (what it keeps inside, as a message names it) is one
    no valid call passes: a row past it stops a CUDA kernel, saying so (``detail::row_within``), where a plain
    bound skips the row (a cache write's ``i < n_new`` skips; its ``cur_pos + i < capacity`` stops). Iterates
    as the pair ``(lhs, rhs)``."""

    lhs: RowOffset
    rhs: RowOffset
    stops: str | None = None

    def __iter__(self) -> Iterator[RowOffset]:
        return iter((self.lhs, self.rhs))

    def __str__(self) -> str:
        return f"{self.lhs} < {self.rhs}" + (f" (else stop: {self.stops})" if self.stops else "")


@dataclass(eq=False)
class RowGuard(Stmt):
    """``body`` runs for a row only where every bound of ``conds`` holds (the rows a cache write keeps,
    ``i < n_new``, and ``cur_pos + i < capacity``, which a valid call never passes: a kernel stops there)."""

    conds: tuple[Bound, ...]
    body: list[Stmt] = field(default_factory=list)


@dataclass(eq=False)
class MeshScope(Stmt):
    """Statements run by every instance of ``mesh``; buffers declared inside may be distributed over it."""

    mesh: TMesh
    body: list[Stmt] = field(default_factory=list)


@dataclass(eq=False)
class RowLoop(Stmt):
    """The rows of this CTA, per the function's schedule: ``row`` from ``cta * rows_per_cta`` on."""

    var: str
    body: list[Stmt] = field(default_factory=list)


def calls(body: list[Stmt]) -> Iterator[OpCall]:
    """Every op call of ``body``, those of its nested scopes (mesh scopes, row loops, row guards) included, in
    order."""
    for s in body:
        if isinstance(s, OpCall):
            yield s
        elif isinstance(s, (MeshScope, RowLoop, RowGuard)):
            yield from calls(s.body)


__all__ = [
    "Alloc",
    "AliasView",
    "AsyncWait",
    "Epilogue",
    "EpilogueStep",
    "Gather",
    "GmemView",
    "Literal",
    "MeshScope",
    "OpCall",
    "Origin",
    "RowGuard",
    "RowLoop",
    "RowOffset",
    "Stmt",
    "Sync",
    "Tag",
    "calls",
]


def _operand(d: Dim) -> str:
    """Extent ``d`` printed as an operand of ``/`` or ``%``: parenthesised unless one number or name."""
    return str(d) if isinstance(d, (int, DimVar)) else f"({d})"

"""Automatic placement of a row-wise program, and its TIR: leading axes over CTAs, the row over threads.

The kernel body is one mesh scope over the thread mesh. Buffers for per-row intermediates are
allocated once per CTA (rmem), views of row-independent parameters and the ops computing
row-independent values come next (hoisted out of the loop), then the loop over this CTA's rows: the
rows' views of the parameters and outputs, and one runtime-op call per HIR op. An op whose result is
an output writes the output's memory directly. On CUDA a program without reductions has its rows cut
into segments of one 16-byte vector a thread (``schedule.row_segments``), each segment a row of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ..ir.types.dim import Dim, dims_equal, floordiv, product
from ..ir.types.dtype import i64
from ..ir.types.storage import Storage
from ..target import CudaTarget, Target
from ..tir.buffer import Buffer, Literal, Operand
from ..tir.function import DimBinding, KernelParam, PrimFunc
from ..tir.stmt import (
    AliasView,
    Alloc,
    AsyncWait,
    Bound,
    Gather,
    GmemView,
    MeshScope,
    OpCall,
    Origin,
    RowGuard,
    RowLoop,
    RowOffset,
    Stmt,
    Tag,
)
from .errors import LoweringError
from .layouts import RowLayouts
from .opmap import BINARY_TAGS, COMPILED_DTYPES, REDUCE_TAGS, UNARY_OPS, elementwise_call, fill_literal, literal
from .params import bind_dimvars, output_params
from .program import Op, Program, Val
from .rows import REDUCTIONS, RowForm, RowSpace, analyze_rows, has_reduction, split_rows
from .schedule import Declared, Staging, row_schedule, row_segments, staging
from .views import Strided

_ALIASES = frozenset({"reshard", "local"})


@dataclass
class _Sections:
    """Where statements go: once per CTA (allocations, row-independent work) or once per row."""

    allocs: list[Stmt] = field(default_factory=list)
    invariant: list[Stmt] = field(default_factory=list)
    rows: list[Stmt] = field(default_factory=list)

    def of(self, invariant: bool) -> list[Stmt]:
        return self.invariant if invariant else self.rows


class _RowLowering:
    def __init__(self, prog: Program, space: RowSpace, layouts: RowLayouts,
                 strided: dict[str, Strided] | None = None, reuse: bool = False) -> None:
        self.prog = prog
        self.space = space
        self.layouts = layouts
        self.strided = strided or {}
        self.sec = _Sections()
        self.operand: dict[int, Operand] = {}
        self.roots: dict[int, Val] = {}
        self.in_flight: set[int] = set()  # buffers staged by copy_async that no AsyncWait covers yet
        self.reuse = reuse  # write a result over a dying operand's register buffer (dying())
        self.made: set[int] = set()  # register buffers holding an op's result (result())
        self.storage: dict[int, Buffer] = {}  # a reusing result's buffer id -> the allocation it views
        self.last_read = _last_reads(prog, self.root)  # value (root) id -> index of the last op reading it
        self.at = 0  # index of the op being lowered

    # -- values -------------------------------------------------------------------------------
    def form(self, v: Val) -> RowForm:
        return self.space.form(v)

    def layout(self, v: Val, storage: Storage):  # noqa: ANN201 - TLayout
        form = self.form(v)
        if form.picks is not None:
            return self.layouts.picks(form.picks)
        return self.layouts.vector(storage) if form.vector else self.layouts.scalar()

    def row_shape(self, v: Val) -> tuple[Dim, ...]:
        form = self.form(v)
        if form.picks is not None:
            return (form.picks,)
        return (self.space.row,) if form.vector else (1,)

    def gmem(self, name: str, v: Val, param: str) -> Buffer:
        layout = self.layout(v, Storage.gmem)
        step = self.row_stride(param)
        if not dims_equal(step, 1) and self.form(v).vector:  # a transposed view: the row's elements a stride apart
            layout = replace(layout, stride=tuple(0 if dims_equal(s, 0) else s * step for s in layout.stride))
        buf = Buffer(name, v.type.dtype, Storage.gmem, self.row_shape(v), layout)
        self.sec.of(self.form(v).invariant).append(GmemView(buf, param, self._offset(v, self.strided.get(param))))
        return buf

    def row_stride(self, param: str) -> Dim:
        """How far apart a row's consecutive elements lie in parameter ``param``'s memory: 1, or a view's stride along
        its last axis (a transposed view's, 0 for one element repeated along the row)."""
        strided = self.strided.get(param)
        return strided.strides[-1] if strided is not None and strided.strides else 1

    def rmem(self, v: Val, name: str | None = None) -> Buffer:
        buf = Buffer(name or v.name, v.type.dtype, Storage.rmem, self.row_shape(v), self.layout(v, Storage.rmem))
        self.sec.allocs.append(Alloc(buf))
        return buf

    def _offset(self, v: Val, strided: Strided | None = None) -> RowOffset:
        """Where row ``row`` of ``v`` starts in its parameter's memory: each lead axis's index times its stride
        (row-major in ``v``'s shape, or as ``strided`` lays out a view: strides, repeated axes, axes indexed
        through positions read on the device, positions added to every row)."""
        shape = self.space.shape_of(v)
        lead = self.space.lead
        if strided is None:
            strides = [product(shape[j + 1:]) for j in range(len(shape))]
        elif len(shape) > len(strided.strides):  # the row cut into segments: a segment is a row's run of elements
            strides = [*strided.strides[:-1], product((self.space.row, strided.strides[-1])), strided.strides[-1]]
        else:
            strides = list(strided.strides)
        gathered = {g.axis: g for g in strided.gathered} if strided is not None else {}
        terms = []
        gathers = []
        for j, axis in enumerate(self.form(v).lead):
            if axis is None:  # an axis of extent 1 the rows do not run along: position 0 of it
                if j in gathered:  # ... which a gather still places: at the index's first position
                    g = gathered[j]
                    gathers.append(Gather(g.index, RowOffset(), strides[j], g.bound, g.table))
                continue
            div = product(lead[axis + 1:])
            mod = lead[axis] if axis > 0 else None
            if j in gathered:
                g = gathered[j]
                gathers.append(Gather(g.index, RowOffset(((div, mod, g.index_stride),)), strides[j], g.bound, g.table))
                continue
            times = strided.repeats[j] if strided is not None else 1
            if times != 1:
                div, mod = product((div, times)), (floordiv(mod, times) if mod is not None else None)
            terms.append((div, mod, strides[j]))
        if strided is None:
            return RowOffset(tuple(terms))
        return RowOffset(tuple(terms), (*gathers, *strided.shifts), strided.base)

    def buffer_of(self, v: Val, origin: Origin) -> Buffer:
        """The operand of ``v`` as a buffer: a literal is first filled into one."""
        o = self.operand[id(v)]
        if isinstance(o, Buffer):
            return o
        buf = self.rmem(v)
        self.sec.invariant.append(OpCall("fill", None, (o,), buf, origin))
        self.operand[id(v)] = buf
        return buf

    # -- program ------------------------------------------------------------------------------
    def params(self, stage: Staging) -> None:
        """Views of the used parameters. With ``stage.repeated``, an input spanning a row of static length that
        several ops read is loaded into registers once (per row; once per CTA before the loop for a weight).
        A weight read by one op is left in memory (holding it in registers across the row's work costs
        registers, and so resident CTAs), unless its reader follows a reduction and ``stage.late_weights``
        names where to stage it: then its loads start with the row's, not after the reduction, into
        registers, or into shared memory with ``copy_async`` (no registers while in flight; the first reader
        waits for it, and reads back only what its own instance copied: the same layout in both)."""
        used = {id(v) for op in self.prog.ops for v in op.inputs} | {id(v) for v in self.prog.outputs}
        readers: dict[int, list[int]] = {}  # the positions of the ops reading each value, in program order
        for i, op in enumerate(self.prog.ops):
            if op.op not in _ALIASES:
                for v in op.inputs:
                    readers.setdefault(id(self.root(v)), []).append(i)
        first_reduction = next((i for i, op in enumerate(self.prog.ops) if op.op in REDUCTIONS), None)
        smem_used = 0
        for p in self.prog.params:
            if id(p) not in used:
                continue
            buf = self.gmem(p.name, p, p.name)
            self.operand[id(p)] = buf
            form, reads = self.form(p), readers.get(id(p), [])
            static_row = isinstance(self.space.row, int)  # else the copy would live in shared memory, not registers
            late = (stage.late_weights is not None and form.invariant and bool(reads)
                    and first_reduction is not None and reads[0] > first_reduction)
            repeated = stage.repeated and len(reads) > 1
            nbytes = product(self.row_shape(p)) * (p.type.dtype.bits // 8)
            if (static_row and form.vector and late and not repeated and stage.late_weights is Storage.smem
                    and isinstance(nbytes, int) and smem_used + nbytes <= stage.smem_bytes
                    and dims_equal(self.row_stride(p.name), 1)):  # copy_async copies runs of 16 bytes
                smem_used += nbytes
                staged = Buffer(f"{p.name}_smem", p.type.dtype, Storage.smem, self.row_shape(p),
                                self.layout(p, Storage.smem))
                self.sec.allocs.append(Alloc(staged))
                self.sec.invariant.append(
                    OpCall("copy_async", None, (buf,), staged, Origin(f"stage {p.name} in shared memory", None)))
                self.operand[id(p)] = staged
                self.in_flight.add(id(staged))
            elif static_row and form.vector and (repeated or (late and stage.late_weights is Storage.rmem)):
                regs = self.rmem(p, f"{p.name}_regs")
                self.sec.of(form.invariant).append(
                    OpCall("unary", Tag("cast_op"), (buf,), regs, Origin(f"load {p.name} into registers", None)))
                self.operand[id(p)] = regs

    def outputs(self, names: list[str]) -> list[tuple[Buffer, Val]]:
        """Output views. An op result returned once and read by no other op is written there directly; one
        that is read again (or returned twice) is computed in registers and stored once per output, so that
        no op reads back global memory the kernel wrote."""
        roots = [self.root(v) for v in self.prog.outputs]
        read = {id(self.root(v)) for op in self.prog.ops for v in op.inputs}
        pending = []
        for name, v, root in zip(names, self.prog.outputs, roots):
            buf = self.gmem(name, v, name)
            direct = (root.producer is not None and root.producer.op != "constant" and id(root) not in read
                      and sum(r is root for r in roots) == 1)
            if direct:
                self.operand[id(root)] = buf
            else:
                pending.append((buf, v))
        return pending

    def root(self, v: Val) -> Val:
        while v.producer is not None and v.producer.op in _ALIASES:
            v = v.producer.inputs[0]
        return v

    def op(self, op: Op, at: int = 0) -> None:
        self.at = at
        origin = Origin(op.op, op.loc, op.composite)
        for v in (*op.inputs, *op.outputs):
            if v.type.dtype.name not in COMPILED_DTYPES:
                raise LoweringError(op.op, self.prog.name, f"dtype {v.type.dtype} is not compiled yet (compiled: "
                                    f"{', '.join(sorted(COMPILED_DTYPES))})", op.loc)
        (out,) = op.outputs if len(op.outputs) == 1 else (None,)
        if op.op == "constant":
            self.operand[id(out)] = literal(op.attrs["value"], op.attrs["dtype"])
            return
        if op.op in _ALIASES:
            self.operand[id(out)] = self.operand[id(op.inputs[0])]
            return
        where = self.sec.of(self.form(op.outputs[0]).invariant)
        if any(id(self.operand.get(id(v))) in self.in_flight for v in op.inputs):
            where.append(AsyncWait(origin))  # the staged copies land before their first reader
            self.in_flight.clear()
        if op.op in ("full_like", "zeros"):
            where.append(OpCall("fill", None, (fill_literal(op.attrs, op.op, out.type.dtype),), self.result(out),
                                origin))
        elif op.op == "arange":  # the row's positions: start (a DimVar may be) + step * each element's place
            where.append(OpCall("iota", None, (Literal(int(op.attrs["step"]), i64),), self.result(out), origin,
                                axes=self.layouts.reduced_axes(), indices=(RowOffset((), (), op.attrs["start"]),)))
        elif op.op in UNARY_OPS or op.op in BINARY_TAGS or op.op == "where":
            family, tag = elementwise_call(op.op, op.attrs, op.inputs[0].type.dtype, op.outputs[0].type.dtype)
            if family == "binary":
                self._refuse_integer(op)
            # a unary op reads its operand as a buffer; the others take scalars (literals) as they are
            ins = ((self.buffer_of(op.inputs[0], origin),) if family == "unary"
                   else tuple(self.operand[id(v)] for v in op.inputs))
            where.append(OpCall(family, tag, ins, self.result(out, self.dying(op, out)), origin))
        elif op.op == "reduce":
            src = self.buffer_of(op.inputs[0], origin)
            where.append(OpCall("reduce", Tag(REDUCE_TAGS[op.attrs["kind"]]), (src,), self.result(out), origin,
                                axes=self.layouts.reduced_axes()))
        elif op.op == "argmax":
            src = self.buffer_of(op.inputs[0], origin)
            where.append(OpCall("arg_reduce", Tag("argmax_op"), (src,), self.result(out), origin,
                                axes=self.layouts.reduced_axes()))
        elif op.op == "topk":  # sorted or not, the picks come in order (torch leaves the unsorted order open)
            src = self.buffer_of(op.inputs[0], origin)
            values, indices = (self.result(v) for v in op.outputs)
            order = Tag("argmax_op" if op.attrs.get("largest", True) else "argmin_op")
            where.append(OpCall("topk", order, (src,), values, origin, axes=self.layouts.reduced_axes(),
                                more_out=(indices,)))
        else:  # pragma: no cover - analyze_rows admits no other op
            raise LoweringError(op.op, self.prog.name, "no runtime op computes it", op.loc)

    def _refuse_integer(self, op: Op) -> None:
        if op.op in ("div", "pow") and not op.inputs[0].type.dtype.is_float:
            raise LoweringError(op.op, self.prog.name, f"{op.op} on {op.inputs[0].type.dtype} is not compiled (an "
                                "integer division by zero would stop the process); cast to a float dtype first",
                                op.loc)

    def dying(self, op: Op, out: Val) -> Buffer | None:
        """A register buffer an elementwise op may write its result into: one of its operands' own, read by no
        later op, of the result's dtype, shape and layout and computed as often (per row or once): each element
        is read before it is written, so the row's working set does not grow by a buffer per op."""
        if not self.reuse:
            return None
        shape, layout = self.row_shape(out), self.layout(out, Storage.rmem)
        for v in op.inputs:
            root = self.root(v)
            buf = self.operand.get(id(root))
            if (isinstance(buf, Buffer) and id(buf) in self.made and self.last_read.get(id(root)) == self.at
                    and buf.dtype == out.type.dtype and tuple(buf.shape) == tuple(shape) and buf.layout == layout
                    and self.form(root).invariant == self.form(out).invariant):
                return buf
        return None

    def result(self, v: Val, reuse: Buffer | None = None) -> Buffer:
        o = self.operand.get(id(v))
        if isinstance(o, Buffer):
            return o  # an output view claimed for this value
        if reuse is None:
            buf = self.rmem(v)
        else:  # the value keeps its own name, a view of the dying operand's storage
            storage = self.storage.get(id(reuse), reuse)
            buf = Buffer(v.name, v.type.dtype, Storage.rmem, self.row_shape(v), self.layout(v, Storage.rmem))
            self.sec.allocs.append(AliasView(buf, storage))
            self.storage[id(buf)] = storage
        self.operand[id(v)] = buf
        self.made.add(id(buf))
        return buf

    def copy_outputs(self, pending: list[tuple[Buffer, Val]]) -> None:
        for buf, v in pending:
            o = self.operand[id(self.root(v))]
            origin = Origin("return", self.prog.function.loc)
            where = self.sec.of(self.form(v).invariant)
            if isinstance(o, Literal):
                where.append(OpCall("fill", None, (o,), buf, origin))
            else:
                where.append(OpCall("unary", Tag("cast_op"), (o,), buf, origin))


def _last_reads(prog: Program, root: Callable[[Val], Val]) -> dict[int, int]:
    """Per value (by its root's id): the index of the last op reading it; a returned value is read after every op."""
    last: dict[int, int] = {}
    for at, op in enumerate(prog.ops):
        for v in op.inputs:
            last[id(root(v))] = at
    for v in prog.outputs:
        last[id(root(v))] = len(prog.ops)
    return last


def lower_rows(prog: Program, target: Target, declared: Declared, strided: dict[str, Strided] | None = None,
               guard: tuple[Bound, ...] = (),
               dimvars: tuple[DimBinding, ...] | None = None) -> PrimFunc:
    """The PrimFunction of a row-wise program with automatic placement.

    ``strided`` lays out the parameters (and outputs, by their parameter names) that are views of other memory
    (a staged function's); ``guard`` keeps only the rows where each ``lhs < rhs`` holds (a cache write's);
    ``dimvars`` binds the DimVars where the program's own parameters cannot (a stage's, bound by its function)."""
    space = analyze_rows(prog)
    dtypes = {v.type.dtype for v in (*prog.params, *prog.outputs)}
    invariant_out = any(space.form(v).invariant for v in prog.outputs)
    # rows cut into segments would each count positions from 0: an arange keeps its whole row
    elementwise = not has_reduction(prog) and not invariant_out and not any(op.op == "arange" for op in prog.ops)
    segments = row_segments(target, space.row, dtypes, declared, elementwise)
    space = split_rows(space, segments or 1)
    sched, mesh = row_schedule(target, prog.name, space.rows, space.row, dtypes, declared, invariant_out,
                               one_vector=segments is not None)
    layouts = RowLayouts(mesh, sched.vector_width, space.row)
    outs = output_params(prog)
    # On the CPU a row's register buffers are arrays in memory (a 4096-float row is 16 KiB): a result written
    # over an operand no later op reads keeps a softmax's row in L1. On CUDA nvcc assigns registers itself.
    low = _RowLowering(prog, space, layouts, strided, reuse=not isinstance(target, CudaTarget))
    low.params(staging(target, sched, space.row))
    pending = low.outputs([p.name for p in outs])
    for at, op in enumerate(prog.ops):
        low.op(op, at)
        # an output computed in registers is stored as soon as it is complete
        done = {id(v) for v in op.outputs}
        low.copy_outputs([(buf, v) for buf, v in pending if id(low.root(v)) in done])
        pending = [(buf, v) for buf, v in pending if id(low.root(v)) not in done]
    low.copy_outputs(pending)
    sec = low.sec
    body: list[Stmt] = [*sec.allocs, *sec.invariant]
    if sec.rows:
        body.append(RowLoop("row", [RowGuard(guard, sec.rows)] if guard else sec.rows))
    params = tuple(KernelParam(p.name, p.type, False) for p in prog.params) + outs
    bindings = dimvars if dimvars is not None else bind_dimvars(prog, params)
    return PrimFunc(prog.name, params, len(outs), bindings, sched, [MeshScope(mesh, body)],
                    prog.function.loc)

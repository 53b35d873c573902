"""The TIR of a function with its own placement: ``with Mesh(...)`` scopes and ``reshard`` honoured.

Every instance of the kernel's meshes runs every op on its part of the values: a value placed with a
ShardLayout is a buffer holding this instance's part (rmem: its registers; smem: its CTA's shared
memory), a value without one is held whole by every instance. Each op is one runtime call whose
operands are viewed in the result's structure (structure.py); a reduction over a split axis leaves its
result a broadcast, the runtime exchanging partial results between threads (a reduction across CTAs is
refused). ``reshard`` copies into the new placement (an exchange between instances' registers is
refused: go through smem), and every write to smem is followed by a barrier among the CTA's threads.
Results are written to the outputs by the instances holding them.

The launch: one CTA per instance of the cta level (the declared Topology('cta', N), else the product of
the meshes' cta axes), the thread level per the declared thread size (1 on the CPU).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.types.dim import Dim
from ..ir.types.shard import MeshSpec
from ..ir.types.storage import Storage
from ..target import CpuTarget, Target
from ..tir.buffer import Buffer, Literal, Operand
from ..tir.function import KernelParam, PrimFunc, Schedule
from ..tir.mesh import TMesh
from ..tir.stmt import AliasView, Alloc, GmemView, MeshScope, OpCall, Origin, Stmt, Sync, Tag
from .errors import LoweringError
from .opmap import BINARY_TAGS, COMPILED_DTYPES, REDUCE_TAGS, UNARY_OPS, fill_literal, literal, unary_tag
from .params import bind_dimvars, output_params
from .program import Op, Program, Val
from .schedule import Declared
from .structure import (
    Meshes,
    Structure,
    ViewError,
    home_strides,
    operand_strides,
    structure_of,
    tlayout,
)


def is_placed(prog: Program) -> bool:
    """True when the function places its values itself (mesh scopes or layouts), so lowering honours that."""
    values = list(prog.params) + [v for op in prog.ops for v in op.outputs]
    return any(op.meshes for op in prog.ops) or any(v.type.layout is not None for v in values)


@dataclass(eq=False)
class _Held:
    """A value's buffer and the structure / strides its buffer stores it with."""

    buffer: Buffer
    structure: Structure
    strides: tuple[tuple[Dim, ...], ...]


class _MeshLowering:
    def __init__(self, prog: Program, meshes: Meshes) -> None:
        self.prog = prog
        self.meshes = meshes
        self.body: list[Stmt] = []
        self.allocs: list[Stmt] = []
        self.held: dict[int, _Held | Literal] = {}
        self.views = 0

    def refuse(self, op: Op, reason: str) -> LoweringError:
        return LoweringError(op.op, self.prog.name, reason, op.loc)

    # -- buffers ------------------------------------------------------------------------------
    def param(self, v: Val, name: str) -> _Held:
        st = structure_of(v.type)
        strides = home_strides(self.meshes, st, Storage.gmem)
        buf = Buffer(name, v.type.dtype, Storage.gmem, v.type.shape, tlayout(self.meshes, st, strides))
        self.allocs.append(GmemView(buf, name))
        return _Held(buf, st, strides)

    def new(self, v: Val, storage: Storage, st: Structure | None = None) -> _Held:
        st = st or structure_of(v.type)
        if storage in (Storage.gmem, Storage.host):
            storage = Storage.rmem  # an intermediate has no global memory of its own: registers hold it
        strides = home_strides(self.meshes, st, storage)
        buf = Buffer(v.name, v.type.dtype, storage, v.type.shape, tlayout(self.meshes, st, strides))
        self.allocs.append(Alloc(buf))
        return _Held(buf, st, strides)

    def view(self, op: Op, v: Val, target: Structure, reduced: tuple[int, ...] = ()) -> Operand:
        """``v`` as an operand of an op whose result has ``target``'s structure."""
        h = self.held[id(v)]
        if isinstance(h, Literal):
            return h
        if h.structure == target and not reduced:
            return h.buffer
        try:
            strides = operand_strides(self.meshes, h.structure, h.buffer.storage, h.strides, target)
        except ViewError as e:
            raise self.refuse(op, f"operand {v.name} is placed differently from the result ({e}); reshard it to "
                                  "the result's layout (through smem when it sits in another instance's "
                                  "registers)") from None
        self.views += 1
        layout = tlayout(self.meshes, target, strides, reduced)
        buf = Buffer(f"{v.name}_as_{self.views}", h.buffer.dtype, h.buffer.storage, target.shape, layout)
        self.body.append(AliasView(buf, h.buffer))
        return buf

    # -- ops ----------------------------------------------------------------------------------
    def op(self, op: Op, claimed: dict[int, _Held]) -> None:
        origin = Origin(op.op, op.loc, op.composite)
        for v in (*op.inputs, *op.outputs):
            if v.type.dtype.name not in COMPILED_DTYPES:
                raise self.refuse(op, f"dtype {v.type.dtype} is not compiled yet")
        if op.op == "constant":
            self.held[id(op.outputs[0])] = literal(op.attrs["value"], op.attrs["dtype"])
            return
        (out,) = op.outputs if len(op.outputs) == 1 else (None,)
        if out is None:
            raise self.refuse(op, "ops with several results are not compiled yet")
        if op.op == "local":
            self.held[id(out)] = self.held[id(op.inputs[0])]
            return
        try:
            st = structure_of(out.type)
        except (TypeError, ValueError) as e:
            raise self.refuse(op, str(e)) from None
        if op.op == "reshard":
            self._reshard(op, out, st, origin, claimed)
            return
        dst = claimed.get(id(out)) or self.new(out, out.type.storage, st)
        self.held[id(out)] = dst
        if op.op == "reduce":
            self._reduce(op, dst, origin)
        elif op.op in ("full_like", "zeros"):
            self.emit(OpCall("fill", None, (fill_literal(op.attrs, op.op, out.type.dtype),), dst.buffer, origin))
        elif op.op in UNARY_OPS:
            src = self._buffer_operand(op, op.inputs[0], st)
            tag = unary_tag(op.op, op.attrs, op.inputs[0].type.dtype, op.outputs[0].type.dtype)
            self.emit(OpCall("unary", tag, (src,), dst.buffer, origin))
        elif op.op in BINARY_TAGS:
            if op.op in ("div", "pow") and not op.inputs[0].type.dtype.is_float:
                raise self.refuse(op, f"{op.op} on {op.inputs[0].type.dtype} is not compiled; cast to a float dtype")
            a, b = (self.view(op, v, st) for v in op.inputs)
            self.emit(OpCall("binary", Tag(BINARY_TAGS[op.op]), (a, b), dst.buffer, origin))
        elif op.op == "where":
            c, a, b = (self.view(op, v, st) for v in op.inputs)
            self.emit(OpCall("ternary", Tag("select_op"), (c, a, b), dst.buffer, origin))
        else:
            raise self.refuse(op, "it is not compiled yet (placed programs compile elementwise ops, casts, "
                                  "comparisons, where, reshard, local, constants and reductions)")

    def emit(self, call: OpCall) -> None:
        self.body.append(call)
        if call.out.storage is Storage.smem:
            self.body.append(Sync("cta", call.origin))

    def _buffer_operand(self, op: Op, v: Val, target: Structure) -> Buffer:
        o = self.view(op, v, target)
        if isinstance(o, Buffer):
            return o
        h = self.new(v, Storage.rmem, target)
        self.emit(OpCall("fill", None, (o,), h.buffer, Origin(op.op, op.loc, op.composite)))
        return h.buffer

    def _reshard(self, op: Op, out: Val, st: Structure, origin: Origin, claimed: dict[int, _Held]) -> None:
        (x,) = op.inputs
        h = self.held[id(x)]
        if (not isinstance(h, Literal) and id(out) not in claimed and h.structure == st
                and h.buffer.storage is out.type.storage):
            self.held[id(out)] = h  # nothing moves
            return
        dst = claimed.get(id(out)) or self.new(out, out.type.storage, st)
        self.held[id(out)] = dst
        src = self.view(op, x, st)
        if isinstance(src, Literal):
            self.emit(OpCall("fill", None, (src,), dst.buffer, origin))
        else:
            self.emit(OpCall("unary", Tag("cast_op"), (src,), dst.buffer, origin))

    def _reduce(self, op: Op, dst: _Held, origin: Origin) -> None:
        (x,) = op.inputs
        h = self.held[id(x)]
        axes, keepdim = op.attrs["axes"], op.attrs["keepdim"]
        src_st = h.structure if isinstance(h, _Held) else structure_of(x.type)
        src = self._buffer_operand(op, x, src_st)
        if src_st.mesh is not None:
            for a in axes:
                for extent, axis in src_st.axes[a]:
                    if axis is not None and extent != 1 and self.meshes.level_of(src_st.mesh, axis) == "cta":
                        raise self.refuse(op, f"it reduces axis {a}, which mesh axis {axis} splits across CTAs; a "
                                              "reduction may cross threads, not CTAs (reduce within each CTA, then "
                                              "combine in another kernel)")
        # The destination seen in the source's modes: each reduced mode of extent 1 (stride 0), a mesh axis
        # that split it a broadcast; the kept axes as the destination stores them.
        strides: list[tuple[Dim, ...]] = []
        k = 0
        for a, modes in enumerate(src_st.axes):
            if a in axes:
                strides.append((0,) * len(modes))
                k += 1 if keepdim else 0
                continue
            if dst.structure.axes[k] != modes:
                raise self.refuse(op, f"its result keeps axis {a} laid out unlike its operand")
            strides.append(dst.strides[k])
            k += 1
        shaped = Structure(tuple(tuple((1, ax) for _, ax in modes) if a in axes else modes
                                 for a, modes in enumerate(src_st.axes)), src_st.mesh)
        self.views += 1
        layout = tlayout(self.meshes, shaped, tuple(strides), axes)
        out = Buffer(f"{dst.buffer.name}_as_{self.views}", dst.buffer.dtype, dst.buffer.storage, shaped.shape, layout)
        self.body.append(AliasView(out, dst.buffer))
        modes = tuple(i for i, (a, _) in enumerate(src_st.flat()) if a in axes)
        self.emit(OpCall("reduce", Tag(REDUCE_TAGS[op.attrs["kind"]]), (src,), out, origin, axes=modes))


def lower_mesh(prog: Program, target: Target, declared: Declared) -> PrimFunc:
    """The PrimFunction of a function with its own placement."""
    sizes = {k: v for k, v in (("cta", declared.cta), ("thread", declared.thread)) if v is not None}
    meshes = Meshes(sizes)
    specs = _specs(prog)
    for spec in specs:
        try:
            meshes.of(spec)
        except ValueError as e:
            raise LoweringError("mesh", prog.name, str(e), prog.function.loc) from None
    grid, threads = _launch(prog, meshes, specs, declared, target)
    low = _MeshLowering(prog, meshes)
    outs = output_params(prog)
    for p in prog.params:
        low.held[id(p)] = low.param(p, p.name)
    claimed: dict[int, _Held] = {}
    pending = []
    for kp, v in zip(outs, prog.outputs):
        root = v
        while root.producer is not None and root.producer.op == "local":
            root = root.producer.inputs[0]
        st = structure_of(v.type)
        strides = home_strides(meshes, st, Storage.gmem)
        buf = Buffer(kp.name, v.type.dtype, Storage.gmem, v.type.shape, tlayout(meshes, st, strides))
        low.allocs.append(GmemView(buf, kp.name))
        held = _Held(buf, st, strides)
        if root.producer is not None and root.producer.op != "constant" and id(root) not in claimed:
            claimed[id(root)] = held
        else:
            pending.append((held, v))
    for op in prog.ops:
        low.op(op, claimed)
    for held, v in pending:
        src = low.view(_return_op(prog), v, held.structure)
        origin = Origin("return", prog.function.loc)
        if isinstance(src, Literal):
            low.emit(OpCall("fill", None, (src,), held.buffer, origin))
        else:
            low.emit(OpCall("unary", Tag("cast_op"), (src,), held.buffer, origin))
    body: list[Stmt] = [*low.allocs, *low.body]
    tmeshes = list(meshes.by_spec.values())
    scope: list[Stmt] = body
    for tm in reversed(tmeshes):
        scope = [MeshScope(tm, scope)]
    params = tuple(KernelParam(p.name, p.type, False) for p in prog.params) + outs
    sched = Schedule("mesh", grid, threads)
    return PrimFunc(prog.name, params, len(outs), bind_dimvars(prog, params), sched, scope, prog.function.loc)


def _return_op(prog: Program) -> Op:
    return Op("return", (), (), {}, prog.function.loc)


def _specs(prog: Program) -> list[MeshSpec]:
    specs: list[MeshSpec] = []
    values = list(prog.params) + [v for op in prog.ops for v in op.outputs]
    for v in values:
        layout = v.type.layout
        mesh = getattr(layout, "mesh", None)
        if mesh is not None and mesh not in specs:
            specs.append(mesh)
    for op in prog.ops:
        if op.meshes:
            spec = MeshSpec.nest(op.meshes)
            if spec not in specs:
                specs.append(spec)
    return specs


def _launch(prog: Program, meshes: Meshes, specs: list[MeshSpec], declared: Declared,
            target: Target) -> tuple[int, int]:
    counts: dict[str, set[int]] = {"cta": set(), "thread": set()}
    for spec in specs:
        tm: TMesh = meshes.of(spec)
        for level in tm.levels:
            counts[level].add(tm.level_size(level))
    sizes = {}
    for level in ("cta", "thread"):
        want = getattr(declared, level)
        if want is not None:
            sizes[level] = want
        elif len(counts[level]) > 1:
            raise LoweringError("mesh", prog.name, f"its meshes give the {level} level different sizes "
                                f"{sorted(counts[level])}; declare topologies=(Topology('{level}', N), ...)",
                                prog.function.loc)
        else:
            sizes[level] = next(iter(counts[level]), 1)
    if isinstance(target, CpuTarget) and sizes["thread"] != 1:
        raise LoweringError("topologies", prog.name, f"its thread level has {sizes['thread']} threads, but the CPU "
                            "target runs each CTA on one host thread (thread extent 1); place the values over "
                            "CTAs, or compile for CUDA", prog.function.loc)
    return sizes["cta"], sizes["thread"]

"""Stages: a function the row-wise schedule cannot run in one kernel, cut into kernels run one after another.

A function with a ``matmul`` or a view op is cut, in program order, into stages: each matmul is a stage of
its own (``matmul.py`` lowers it), and so are rope (``rope.py``), a cache update, a concat or stack and a
reduction across rows (``reduce_axis.py``), and the other ops are grouped greedily into row-wise stages, a stage
growing while the row-wise analysis still accepts it (``rows.py``; a function's ops stay in their order, so
every stage reads only what earlier stages wrote). View ops run nowhere: each value is a view of a root's
memory (``views.py``), and a stage reads a view through strides. Constants are copied into every stage that
reads them. A value one stage writes and a later one reads lives in a *temporary* of the entry (global
memory it allocates for the call), unless it is a result of the function, which is written straight into
the caller's output (through a contiguous view: a reshaped result is the result). The entry checks its
arguments once and launches the stages in order on its stream.

An operand a matmul, attention, rope, index_add or index_copy kernel cannot read through its view (rows picked by
positions, or repeated, where that kernel takes neither: the activations' rows of a matmul picked by token ids, a
paged cache's keys picked by their slots; positions read from a slice of a tensor) is first copied into contiguous
memory by an identity cast, a row-wise stage that reads the view through its strides and positions (``_unreadable``,
``_copy_site``). So is a view op's operand no view can be taken of (picked rows sliced, reshaped or picked again),
and a row-wise op's whose rows would run along a picked axis.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..ir.types.dim import Dim
from ..ir.types.tensor_type import TensorType
from .errors import LoweringError
from .program import Op, Program, Val
from .reduce_axis import is_reduce_across_rows
from .rows import analyze_rows
from .views import VIEW_OPS, Regroup, View, index_view, plain_index, rows_strided, storage_for, view_of_op, whole

MATMUL_OPS = frozenset({"matmul"})
# Ops with kernels of their own (a stage each): rope rotates a row by rows read at positions on the device; a
# cache update copies the cache and writes the new rows at a position read on the device.
# attention (recognised by fuse_attention.py) runs the keys' slices and their combine. concat and stack copy each
# operand into its place in the result (staged.py's join), a kernel each; index_copy copies x, then writes the
# source's rows at the positions its index holds, read on the device; index_add gathers each result row's sum
# (lower/index_add.py).
OWN_KERNEL_OPS = frozenset({"rope", "cache_update", "attention", "concat", "stack", "index_copy", "index_add"})
# Ops whose result may be stored in any order of its axes (written through the strides a later reshape reads).
STRIDED_RESULT_OPS = MATMUL_OPS | {"attention"}


def needs_stages(prog: Program) -> bool:
    """Whether ``prog`` holds an op that only a staged lowering runs (a matmul, rope, a cache update, a view, a
    reduction across rows)."""
    return any(op.op in MATMUL_OPS or op.op in OWN_KERNEL_OPS or op.op in VIEW_OPS or is_reduce_across_rows(op)
               for op in prog.ops)


@dataclass(eq=False)
class Stage:
    """One kernel of a staged function: its kind (``rows`` or ``matmul``) and its ops in program order."""

    kind: str
    ops: list[Op] = field(default_factory=list)


@dataclass(eq=False)
class StagedProgram:
    """A program cut into stages, with the view each value is read through (by value id)."""

    prog: Program
    stages: list[Stage]
    views: dict[int, View]
    storage: dict[int, tuple[Dim, ...]] = field(default_factory=dict)

    def view(self, v: Val) -> View:
        """The view of ``v`` (a value that is no view of another is its own whole memory, as it is stored)."""
        return self.views.get(id(v)) or whole(v, self.storage.get(id(v)))

    def __str__(self) -> str:
        lines = [f"staged {self.prog.name}"]
        for k, s in enumerate(self.stages):
            lines.append(f"  stage {k} ({s.kind}):")
            lines += [f"    {op}" for op in s.ops]
        return "\n".join(lines)


def split_stages(prog: Program) -> StagedProgram:
    """``prog`` cut into stages (see the module docstring).

    A reshape no strides express, of a value a matmul writes through a permutation of its axes (attention's
    ``(heads, seq, d)`` result read as ``(seq, heads * d)``), has that value stored in the order the reshape
    reads: the matmul writes it through the strides that make the reshape's operand contiguous. Otherwise the
    reshape's operand is first copied into contiguous memory (an identity cast, a row-wise stage reading the
    view through its strides), where its rows are contiguous.
    """
    _cache_row_axes(prog)
    storage: dict[int, tuple[Dim, ...]] = {}
    copied: set[int] = set()
    sites: set[tuple[int, int]] = set()  # the inputs copied for ops that could not read them
    while True:
        try:
            return _split(prog, storage, sites)
        except _Unreadable as e:
            sites.add((id(e.op), e.index))
            _copy_input(prog, e.op, e.index)
        except Regroup as e:
            root = e.view.root
            strided = root.producer is not None and root.producer.op in STRIDED_RESULT_OPS
            strides = storage_for(e.view) if strided else None
            if strides is not None and id(root) not in storage:
                storage[id(root)] = strides
            elif rows_strided(e.view) and id(e.reshape) not in copied:
                copied.add(id(e.reshape))
                _copy_before(prog, e.reshape)
            else:
                raise LoweringError(e.op, e.function, e.reason, e.loc) from None


def _cache_row_axes(prog: Program) -> None:
    """Give each cache update of rows with no axis after the sequence axis (a cache of ``(batch, capacity)``: token
    ids, a score per position) an axis of extent 1 after it: the update runs on reshapes of the cache and the new
    rows to ``(..., 1)``, and its result is reshaped back, so its kernels write rows of one element as they write
    any row (``staged.py``'s cache_update)."""
    for op in [o for o in prog.ops if o.op == "cache_update" and o.inputs[3].type.rank == 2]:
        cache, pos, n_new, new = op.inputs
        (result,) = op.outputs
        cache3, new3 = (_reshaped(prog, op, v, (*v.type.shape, 1)) for v in (cache, new))
        result3 = Val(TensorType((*result.type.shape, 1), result.type.dtype), prog.namer.unique(f"{result.name}_rows"))
        op.inputs, op.outputs, result3.producer = (cache3, pos, n_new, new3), (result3,), op
        back = Op("reshape", (result3,), (result,), {"new_shape": tuple(result.type.shape)}, op.loc, op.meshes,
                  op.composite)
        result.producer = back
        prog.ops.insert(prog.ops.index(op) + 1, back)


def _reshaped(prog: Program, before: Op, v: Val, shape: tuple[Dim, ...]) -> Val:
    """``v`` reshaped to ``shape`` by a reshape inserted before ``before``."""
    out = Val(TensorType(shape, v.type.dtype), prog.namer.unique(f"{v.name}_rows"))
    out.producer = Op("reshape", (v,), (out,), {"new_shape": shape}, before.loc, before.meshes, before.composite)
    prog.ops.insert(prog.ops.index(before), out.producer)
    return out


def _copy_before(prog: Program, reshape: Op) -> None:
    """Insert an identity cast of ``reshape``'s operand before it, and have it reshape the copy instead."""
    _copy_input(prog, reshape, 0)


def _copy_input(prog: Program, op: Op, index: int) -> None:
    """Insert an identity cast of ``op``'s input ``index`` before ``op`` (a row-wise stage reading it through its
    view, writing contiguous memory), and have ``op`` read the copy instead."""
    x = op.inputs[index]
    copy = Val(TensorType(x.type.shape, x.type.dtype), prog.namer.unique(f"{x.name}_contiguous"))
    cast = Op("cast", (x,), (copy,), {"dtype": x.type.dtype}, op.loc, op.meshes, op.composite)
    copy.producer = cast
    prog.ops.insert(prog.ops.index(op), cast)
    op.inputs = (*op.inputs[:index], copy, *op.inputs[index + 1:])


class _Unreadable(Exception):
    """Input ``index`` of ``op`` is to be copied first: a view a kernel cannot read (``_unreadable``), or the value
    of a view op on the way to one (``_copy_site``)."""

    def __init__(self, op: Op, index: int) -> None:
        super().__init__(op.op)
        self.op = op
        self.index = index


def _unreadable(op: Op, views: list[View]) -> int | None:
    """The first input of ``op`` (its inputs' ``views``) that its kernel cannot read through its view: rows picked
    by positions (``index_select``) or repeated (``repeat_interleave``) where the op's lowering takes neither. A
    matmul reads a weight's batch axes picked (a mixture's chosen experts) and either operand's batch axes
    repeated; attention reads its key and value heads repeated (GQA); rope its q and k repeated; index_add
    neither; index_add and index_copy read their positions from a plain tensor (``plain_index``). None: every input
    is readable as it is."""
    rules: dict[int, bool] = {}
    if op.op == "matmul":
        a, b = views[:2]
        rules = {0: _picked(a) or _repeated(a, _last_two(a)),
                 1: _picked(b, _last_two(b)) or _repeated(b, _last_two(b))}
    elif op.op == "attention":
        q, k, v = views[:3]
        rules = {0: _picked(q) or _repeated(q), 1: _picked(k) or _repeated(k, _last_two(k)),
                 2: _picked(v) or _repeated(v, _last_two(v)), **{i: _picked(p) for i, p in enumerate(views[3:], 3)}}
    elif op.op == "rope":
        rules = {i: _picked(v) or (i >= 2 and _repeated(v)) for i, v in enumerate(views)}
    elif op.op == "index_add":
        rules = {i: _picked(views[i]) or _repeated(views[i]) for i in (0, 2)}
    if op.op in ("index_add", "index_copy"):  # positions read from a plain tensor: a slice of one is copied
        rules[1] = not plain_index(views[1])
    return next((i for i, bad in rules.items() if bad), None)


def _picked(v: View, axes: range | None = None) -> bool:
    """Whether ``v`` reads any of ``axes`` (all: None) through positions (``index_select``)."""
    return any(axes is None or a in axes for a, _, _ in v.gathers)


def _repeated(v: View, axes: range | None = None) -> bool:
    """Whether any of ``v``'s ``axes`` (all: None) repeats its elements (``repeat_interleave``)."""
    return any(r != 1 for a, r in enumerate(v.repeats) if axes is None or a in axes)


def _last_two(v: View) -> range:
    return range(max(0, len(v.shape) - 2), len(v.shape))


def _copy_first(site: tuple[Op, int] | None, sites: set[tuple[int, int]]) -> None:
    """Have input ``site[1]`` of ``site[0]`` copied first (``_Unreadable``), unless there is no site or it was
    copied already (then the op's lowering refuses what it still cannot read, naming it)."""
    if site is not None and (id(site[0]), site[1]) not in sites:
        raise _Unreadable(*site)


def _copy_site(op: Op, index: int, view: Callable[[Val], View]) -> tuple[Op, int] | None:
    """Where to copy ``op``'s unreadable input ``index``: that input, where a row-wise stage can read it through its
    view (``rows_strided``), else the nearest value before it, through the view ops it is made by, that one can
    (a weight's rows picked, then transposed: the picked rows, before the transpose), as the op reading that value
    and its input's index. None: no value on the way can be copied (the op's lowering refuses it, naming it)."""
    reader, at = op, index
    while True:
        v = reader.inputs[at]
        if rows_strided(view(v)):
            return reader, at
        if v.producer is None or v.producer.op not in VIEW_OPS or v.producer.op in _PICKS:
            return None  # (before the op that picks or repeats, a copy would not hold what it picks)
        reader, at = v.producer, 0


_PICKS = frozenset({"index_select", "repeat_interleave"})  # view ops that pick or repeat rows


def _split(prog: Program, storage: dict[int, tuple[Dim, ...]], sites: set[tuple[int, int]]) -> StagedProgram:
    views: dict[int, View] = {}
    stages: list[Stage] = []

    def view(v: Val) -> View:
        return views.get(id(v)) or whole(v, storage.get(id(v)))

    for op in prog.ops:
        viewing = op.op in VIEW_OPS or (op.op in ("reshard", "local") and id(op.inputs[0]) in views)
        if op.op == "index_select" or viewing:
            try:
                if op.op == "index_select":
                    views[id(op.outputs[0])] = index_view(prog, op, view(op.inputs[0]), view(op.inputs[1]))
                    continue
                for i, out in enumerate(op.outputs):  # a split's parts, else the one result
                    views[id(out)] = view_of_op(prog, op, view(op.inputs[0]), i)
            except Regroup:
                raise
            except LoweringError:
                # no view of positions read from a slice, or of rows already picked or repeated: the view op reads
                # a copy of them instead
                if op.op == "index_select" and not plain_index(view(op.inputs[1])):
                    _copy_first((op, 1), sites)
                src = view(op.inputs[0])
                if _picked(src) or _repeated(src):
                    _copy_first((op, 0) if rows_strided(src) else None, sites)
                raise
            continue
        if op.op == "constant":
            continue  # copied into the stages that read it
        if op.op in MATMUL_OPS or op.op in OWN_KERNEL_OPS:
            unreadable = _unreadable(op, [view(v) for v in op.inputs])
            _copy_first(_copy_site(op, unreadable, view) if unreadable is not None else None, sites)
            stages.append(Stage(op.op, [op]))
            continue
        for i, v in enumerate(op.inputs):  # a row-wise op reads rows one stride apart: a picked last axis is copied
            if not rows_strided(view(v)):
                _copy_first(_copy_site(op, i, view), sites)
        if is_reduce_across_rows(op):
            stages.append(Stage("reduce_axis", [op]))
            continue
        last = stages[-1] if stages else None
        if last is not None and last.kind == "rows" and not _reads_own_view(last, op, views) and rows_accept(
                prog, views, [*last.ops, op]):
            last.ops.append(op)
        else:
            stages.append(Stage("rows", [op]))
    return StagedProgram(prog, stages, views, storage)


def _reads_own_view(stage: Stage, op: Op, views: dict[int, View]) -> bool:
    """Whether ``op`` reads, through a view, a value ``stage`` computes: that value must reach memory first (a
    row-wise kernel reads a view of memory, not of its registers), so ``op`` starts the next stage."""
    made = {id(v) for o in stage.ops for v in o.outputs}
    return any(id(v) in views and id(views[id(v)].root) in made for v in op.inputs)


def rows_accept(prog: Program, views: dict[int, View], ops: list[Op]) -> bool:
    """Whether the row-wise analysis accepts ``ops`` as one program."""
    try:
        analyze_rows(sub_program(prog, views, ops, "probe")[0])
    except LoweringError:
        return False
    return True


def sub_program(prog: Program, views: dict[int, View], ops: list[Op], name: str) -> tuple[Program, list[Val]]:
    """A program of ``ops`` alone (constants they read copied in): its parameters are the values the ops
    read from outside, each typed as the view it is read through; its outputs are left to the caller.
    Returns the program and, per parameter, the outside value it stands for."""
    params: list[Val] = []
    outside: list[Val] = []
    local: dict[int, Val] = {}
    produced = {id(v) for op in ops for v in op.outputs}
    body: list[Op] = []
    for op in ops:
        ins = []
        for v in op.inputs:
            if id(v) in produced:
                ins.append(v)
                continue
            if id(v) not in local:
                src = v.producer
                if src is not None and src.op == "constant":
                    copy = Val(v.type, v.name)
                    body.append(Op("constant", (), (copy,), dict(src.attrs), src.loc, src.meshes, src.composite))
                    copy.producer = body[-1]
                    local[id(v)] = copy
                else:
                    view = views.get(id(v))
                    shape = view.shape if view is not None else v.type.shape
                    p = Val(TensorType(shape, v.type.dtype), v.name, param=v.name)
                    params.append(p)
                    outside.append(v)
                    local[id(v)] = p
            ins.append(local[id(v)])
        body.append(Op(op.op, tuple(ins), op.outputs, op.attrs, op.loc, op.meshes, op.composite))
    sub = Program(name, prog.function, tuple(params), body, (), prog.structure, prog.namer)
    return sub, outside

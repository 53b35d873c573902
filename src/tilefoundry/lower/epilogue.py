"""Epilogues: the elementwise ops after a matmul, fused into the matmul's kernel.

A matmul stage followed by a row-wise stage of elementwise ops over the matmul's result (a residual added,
a bias, a cast, an activation) becomes one stage: the matmul applies the ops to each result before storing it
(``ops::matmul``'s epilogue, each op computed as its family computes it: ``ops::scalar``), so the result
never goes to memory and back, and one kernel launches instead of two. ``fuse_epilogues`` merges the stages
where every condition holds:

* the matmul is of two 2-D operands (the decode step's ``x @ w.T``), or of two operands with the same batch axes
  before their matrices (a batch of products: a mixture's chunks through their experts' weights), its result
  stored in its own order, read by the row-wise stage alone and not returned;
* every op of the row-wise stage is elementwise (unary, binary, where) with the matmul result's shape, so
  each computes one element at the matmul's (m, n) (of its batch element);
* what the ops read from outside is a scalar constant or a view broadcast to the result's shape (a residual, a
  bias; of a batch of products, each batch element's own matrix or one every element reads), with no positions
  picking its rows;
* of the values the ops compute, one is read after the stage or returned: the stage's result.

Anything else stays a stage of its own.
"""

from __future__ import annotations

from ..ir.types.dim import Dim, dims_equal
from ..tir.buffer import Literal
from ..tir.stmt import Tag
from .opmap import ELEMENTWISE_OPS, elementwise_call, literal
from .program import Op, Val
from .stages import Stage, StagedProgram
from .views import View

# The elementwise ops of one element each (full_like and zeros make a tensor, reshard / local place one).
EPILOGUE_OPS = ELEMENTWISE_OPS - {"full_like", "zeros", "reshard", "local"}


def fuse_epilogues(staged: StagedProgram) -> StagedProgram:
    """``staged`` with each fusable row-wise stage merged into the matmul stage before it."""
    stages: list[Stage] = []
    for stage in staged.stages:
        last = stages[-1] if stages else None
        if (last is not None and last.kind == "matmul" and len(last.ops) == 1 and stage.kind == "rows"
                and _fusable(staged, last.ops[0], stage)):
            last.ops.extend(stage.ops)
            continue
        stages.append(Stage(stage.kind, list(stage.ops)))
    staged.stages = stages
    return staged


def fusable_epilogue(staged: StagedProgram, mm: Op, ops: list[Op]) -> bool:
    """Whether ``ops``, row-wise ops after the matmul ``mm``, may run as its epilogue (the conditions above)."""
    return _fusable(staged, mm, Stage("rows", list(ops)))


def epilogue_inputs(staged: StagedProgram, ops: list[Op]) -> list[Val]:
    """The outside values an epilogue's ops read (no constants, none of their own results), in order of use."""
    made = {id(v) for op in ops for v in op.outputs}
    out: list[Val] = []
    for op in ops[1:]:
        for v in op.inputs:
            if id(v) in made or v.constant or any(v is o for o in out):
                continue
            out.append(v)
    return out


def epilogue_result(staged: StagedProgram, ops: list[Op]) -> Val:
    """The one value of a fused stage's epilogue read after it or returned."""
    return _results(staged, ops[1:])[0]


def _readers(staged: StagedProgram, root: Val) -> list[Op]:
    return [o for o in staged.prog.ops for v in o.inputs if staged.view(v).root is root]


def _returned(staged: StagedProgram, root: Val) -> bool:
    return any(staged.view(v).root is root for v in staged.prog.outputs)


def _results(staged: StagedProgram, ops: list[Op]) -> list[Val]:
    """The values ``ops`` compute that something after them reads or the function returns."""
    inside = {id(o) for o in ops}
    out = []
    for op in ops:
        for v in op.outputs:
            if _returned(staged, v) or any(id(r) not in inside for r in _readers(staged, v)):
                out.append(v)
    return out


def _fusable(staged: StagedProgram, mm: Op, stage: Stage) -> bool:
    result = mm.outputs[0]
    a, b = (staged.view(v) for v in mm.inputs[:2])  # a third: the norm weight of a prologue (prologue.py)
    if not same_batch(a.shape, b.shape) or id(result) in staged.storage or id(result) in staged.views:
        return False
    if _returned(staged, result) or any(r not in stage.ops for r in _readers(staged, result)):
        return False
    shape = result.type.shape
    made = {id(result)}
    for op in stage.ops:
        if op.op not in EPILOGUE_OPS or len(op.outputs) != 1:
            return False
        if op.op in ("div", "pow") and not op.inputs[0].type.dtype.is_float:
            return False  # refused by the row-wise lowering, with its reason
        out = op.outputs[0]
        if len(out.type.shape) != len(shape) or not all(dims_equal(x, y) for x, y in zip(out.type.shape, shape)):
            return False
        for v in op.inputs:
            if id(v) in made:
                if id(v) in staged.views:
                    return False  # read through a view of its own
                continue
            if v.constant:
                if v.type.rank != 0:
                    return False
                continue
            if not _broadcast_operand(staged.view(v), shape):
                return False
        made.add(id(out))
    return len(_results(staged, stage.ops)) == 1


def same_batch(a: tuple[Dim, ...], b: tuple[Dim, ...]) -> bool:
    """Whether the operands of shapes ``a`` and ``b`` are two matrices, or two batches of matrices of the same
    batch axes (no broadcast between them)."""
    return len(a) == len(b) >= 2 and all(dims_equal(x, y) for x, y in zip(a[:-2], b[:-2]))


def _broadcast_operand(view: View, shape: tuple[Dim, ...]) -> bool:
    """Whether an epilogue can read ``view`` at each (m, n) of ``shape``: of no more axes than ``shape``, broadcast
    right-aligned (a batch axis of extent 1, or one it lacks, read at every batch element), no positions picking
    its rows, no repeated axis."""
    if view.gathers or any(r != 1 for r in view.repeats) or len(view.shape) > len(shape):
        return False
    for x, y in zip(reversed(view.shape), reversed(shape)):
        if not (dims_equal(x, y) or dims_equal(x, 1)):
            return False
    return True


def operand_strides(view: View, shape: tuple[Dim, ...]) -> tuple[Dim, Dim]:
    """``view``'s strides for the (m, n) of ``shape``'s last two axes it is broadcast to (0 along a broadcast
    axis)."""
    extents, strides = tuple(view.shape[-2:]), tuple(view.strides[-2:])  # its batch axes: offset by the CTA's
    padded = ((1,) * (2 - len(extents)) + extents, (0,) * (2 - len(strides)) + strides)
    m, n = (0 if dims_equal(x, 1) and not dims_equal(y, 1) else st
            for x, y, st in zip(padded[0], shape[-2:], padded[1]))
    return m, n


def step_of(op: Op) -> tuple[str, Tag]:
    """The ``ops::scalar`` family and tag of an epilogue op (those of its tensor form)."""
    return elementwise_call(op.op, op.attrs, op.inputs[0].type.dtype, op.outputs[0].type.dtype)


def constant_literal(v: Val) -> Literal:
    """A scalar constant operand, as the literal the row-wise lowering would make of it."""
    attrs = v.producer.attrs  # type: ignore[union-attr]
    return literal(attrs["value"], attrs["dtype"])

"""Reductions of a matmul's rows fused after it: greedy decoding's choice (an argmax) and the row's sum, mean,
largest, smallest or largest magnitude, read from the logits as the head's matmul writes them.

A matmul stage (with its prologue and elementwise epilogue, ``prologue.py``, ``epilogue.py``) followed by a row-wise
stage that reduces the matmul stage's result along its last axis becomes one stage
(``fuse_reduction_epilogues``) of two kernels (``reduction_parts`` and ``reduction_merge``, which ``staged.py``
calls):

1. the matmul's own kernel, each CTA then folding its tile of the result (its columns of every row) into one part a
   row for each reduction, all in one pass over the tile (``ops::reduce_parts``): a (value, position) pair for an
   argmax, a float for the others, written to temporaries;
2. one CTA merging every CTA's parts of a row into the row's results, all in one pass over the parts
   (``ops::reduce_merges``: a mean divides there by the row's length).

So no CTA reads a whole row (a vocabulary of 151936 logits through one CTA was slower on the H200 than torch's
argmax after the head), and the reductions' first step costs no launch of its own. An argmax is torch.argmax's: pairs
fold in a total order (the first largest, NaN counting as the largest), whatever CTA finds them; a maximum or
minimum is NaN where the row holds one, as torch's; a sum or mean adds in float, in another order than torch's. The
matmul still stores its result: to the caller's output where the function returns it, else to a temporary. What
the row-wise stage computes from the reductions' results (greedy decoding's "are the logits finite" from the row's
largest and smallest values) stays a row-wise stage of its own after them, reading them from memory.

The stages merge where every condition holds:

* the matmul is of two 2-D operands, its weight's rows not picked by positions, not a pair (``pairs.py``);
* its stage's result is 2-D, (M, N), of a float type of at most 32 bits (parts fold as float, exact for the order of
  f32, bf16 and f16 values, not for every f64 or integer), with M a static row count of at most
  ``FUSED_MAX_ROWS`` (a decode step's token, a few sequences): each CTA's part is M values;
* the row-wise stage's first reduction reads that result as it is stored (no view), along its last axis; or
  elementwise ops that may run as the matmul's epilogue (``epilogue.py``: they then do) come first and it reduces
  their result (greedy decoding after a logit scale or soft-capping). Every reduction of the same value in the stage
  fuses with it; the stage's other ops stay row-wise after the matmul stage, where they read nothing the epilogue
  keeps in registers and form a row-wise program of their own.

Anything else keeps its reductions in a row-wise stage.
"""

from __future__ import annotations

from ..ir.types.dim import Dim, dims_equal
from ..ir.types.dtype import DType, f32, i64
from ..ir.types.storage import Storage
from ..target import CudaTarget, Target
from ..tir.buffer import Buffer
from ..tir.function import Schedule
from ..tir.layout import TLayout
from ..tir.stmt import GmemView, OpCall, Origin, RowLoop, RowOffset, Stmt, Tag
from .epilogue import epilogue_result, fusable_epilogue
from .gemm import gemm_rows
from .opmap import REDUCE_TAGS
from .program import Op, Val
from .stages import Stage, StagedProgram, rows_accept
from .views import View

# The most rows a reduction may have to fuse after its matmul (each CTA writes one part a row).
FUSED_MAX_ROWS = 16
# Threads of the CUDA CTA merging the parts (a row's parts strided over them, then folded by shuffles): a CTA's
# most, for the head's GEMV of a 151936-token vocabulary has 9496 CTAs of 16 columns, so about 9 parts a thread.
CUDA_MERGE_THREADS = 1024


def reduces_rows(op: Op) -> bool:
    """Whether ``op`` is a reduction that may fuse after a matmul: an argmax, or a reduce of a kind ``ops::reduce``
    has, along the last axis of a 2-D value."""
    if op.op not in ("argmax", "reduce") or op.inputs[0].type.rank != 2:  # (an arange, say, has no input)
        return False
    if op.op == "argmax":
        return op.attrs["axis"] == 1
    return op.op == "reduce" and tuple(op.attrs["axes"]) == (1,) and op.attrs["kind"] in REDUCE_TAGS


def fuse_reduction_epilogues(staged: StagedProgram, target: Target) -> StagedProgram:
    """``staged`` with the reductions that may fuse after their matmul (see the module docstring) moved into the
    matmul's stage, as its last ops, and what else their row-wise stage computes left as a row-wise stage after
    it, as lowered for ``target`` (a GEMM of many rows on the tensor cores, ``gemm.gemm_rows``, keeps its
    reductions a row-wise stage of their own)."""
    stages: list[Stage] = []
    for stage in staged.stages:
        last = stages[-1] if stages else None
        if (last is not None and last.kind == "matmul" and stage.kind == "rows" and not split_reductions(last.ops)[1]
                and not gemm_rows(last.ops[0], target)):
            fused = _fuse(staged, last, stage)
            if fused is not None:
                last.ops[:], rest = fused
                if rest:
                    stages.append(Stage("rows", rest))
                continue
        stages.append(stage)
    staged.stages = stages
    return staged


def split_reductions(ops: list[Op]) -> tuple[list[Op], list[Op]]:
    """A matmul stage's ops without the reductions fused after them, and those reductions (in program order)."""
    k = len(ops)
    while k > 1 and ops[k - 1].op in ("argmax", "reduce"):
        k -= 1
    return ops[:k], ops[k:]


def _fuse(staged: StagedProgram, last: Stage, stage: Stage) -> tuple[list[Op], list[Op]] | None:
    """The matmul stage's ops with the reductions (and the elementwise ops before them) of ``stage`` fused, and the
    ops left to a row-wise stage after it; None where they do not fuse."""
    ops = stage.ops
    k = next((i for i, o in enumerate(ops) if reduces_rows(o)), None)
    if k is None:
        return None
    before = ops[:k]
    mm_ops = list(last.ops)
    if before:
        if len(last.ops) != 1 or not fusable_epilogue(staged, last.ops[0], before):
            return None
        mm_ops += before
    if sum(o.op == "matmul" for o in mm_ops) != 1:
        return None
    result = epilogue_result(staged, mm_ops) if len(mm_ops) > 1 else mm_ops[0].outputs[0]
    if not _fusable_result(staged, mm_ops[0], result):
        return None
    reductions = [o for o in ops[k:] if reduces_rows(o) and o.inputs[0] is result]
    taken = {id(o) for o in reductions}
    rest = [o for o in ops[k:] if id(o) not in taken]
    in_registers = {id(v) for o in before for v in o.outputs} - {id(result)}
    if any(id(v) in in_registers for o in rest for v in o.inputs):
        return None
    if rest and not rows_accept(staged.prog, staged.views, rest):
        return None
    return [*mm_ops, *reductions], rest


def _fusable_result(staged: StagedProgram, mm: Op, result: Val) -> bool:
    a, b = (staged.view(v) for v in mm.inputs[:2])
    if len(a.shape) != 2 or len(b.shape) != 2 or b.gathers:
        return False
    if id(result) in staged.views or result.type.rank != 2:
        return False
    dtype = result.type.dtype
    if not dtype.is_float or dtype.bits > 32:
        return False
    rows = result.type.shape[0]
    return isinstance(rows, int) and 1 <= rows <= FUSED_MAX_ROWS


def _origin(op: Op) -> Origin:
    return Origin(op.op, op.loc, op.composite)


def _origins(ops: list[Op]) -> Origin:
    """The origin of one call of several reductions: the first's, naming each kind of op once."""
    first = ops[0]
    return Origin(", ".join(dict.fromkeys(o.op for o in ops)), first.loc, first.composite)


def _tag(op: Op) -> Tag:
    return Tag("argmax_op") if op.op == "argmax" else Tag(REDUCE_TAGS[op.attrs["kind"]])


def part_names(op: Op) -> tuple[str, ...]:
    """What the temporaries of ``op``'s parts hold, one name each: an argmax's values and positions, a reduction's
    values."""
    return ("part_max", "part_at") if op.op == "argmax" else (f"part_{op.attrs['kind']}",)


def part_types(op: Op) -> tuple[DType, ...]:
    """The element types of ``op``'s parts' temporaries (as ``part_names``)."""
    return (f32, i64) if op.op == "argmax" else (f32,)


def reduction_parts(reductions: list[tuple[Op, tuple[str, ...]]], tile_out: Buffer, tile: Dim,
                    tiles: Dim, shared: int = 0) -> list[Stmt]:
    """The statements a matmul's kernel runs after its call: its CTA's part of each row of ``tile_out`` (the CTA's
    tile of the result, whose first column is ``row * tile``, less ``shared`` for the last tile where it is shifted
    back to end at the row's end) for every reduction at once (``ops::reduce_parts``: one pass over the tile),
    written to row ``row`` of the reductions' temporaries (``tiles`` x M each, named as given)."""
    rows = tile_out.shape[0]
    mine = RowOffset(((1, None, rows),))
    col0 = RowOffset() if dims_equal(tiles, 1) else RowOffset(((1, None, tile),))
    if shared:
        col0 = RowOffset((*col0.terms, (tiles - 1, None, -shared)))
    body: list[Stmt] = []
    outs: list[Buffer] = []
    for op, names in reductions:
        bufs = [Buffer(f"{name}_cta", dtype, Storage.gmem, (rows,), TLayout((rows,), (1,)))
                for name, dtype in zip(names, part_types(op))]
        body += [GmemView(b, name, mine) for b, name in zip(bufs, names)]
        outs += bufs
    ops = [op for op, _ in reductions]
    body.append(OpCall("reduce_parts", None, (tile_out,), outs[0], _origins(ops), more_out=tuple(outs[1:]),
                       functors=tuple(_tag(op) for op in ops), indices=(col0,)))
    return body


def reduction_merge(reductions: list[tuple[Op, tuple[str, ...], View, str]], count: Dim, length: Dim,
                    target: Target) -> tuple[list[Stmt], Schedule]:
    """The kernel merging the ``count`` parts of each row into each reduction's result (per reduction: the op, the
    temporaries ``reduction_parts`` writes, its result's view and the parameter it is homed at), of rows of
    ``length`` elements: every reduction at once (``ops::reduce_merges``: one pass over the parts)."""
    body: list[Stmt] = []
    parts: list[Buffer] = []
    results: list[Buffer] = []
    for op, names, out, home in reductions:
        rows = out.shape[0]
        shape = (count, rows)
        mine = [Buffer(f"{name}_all", dtype, Storage.gmem, shape, TLayout(shape, (rows, 1)))
                for name, dtype in zip(names, part_types(op))]
        result = Buffer(f"{out.root.name}_rows", out.root.type.dtype, Storage.gmem, (rows,),
                        TLayout((rows,), (out.strides[0],)))
        body += [GmemView(b, name, RowOffset()) for b, name in zip(mine, names)]
        body.append(GmemView(result, home, RowOffset((), (), out.offset)))
        parts += mine
        results.append(result)
    ops = [op for op, *_ in reductions]
    body.append(OpCall("reduce_merges", None, tuple(parts), results[0], _origins(ops), more_out=tuple(results[1:]),
                       functors=tuple(_tag(op) for op in ops), indices=(RowOffset(base=length),)))
    threads = CUDA_MERGE_THREADS if isinstance(target, CudaTarget) else 1
    return [RowLoop("row", body)], Schedule("reductions", 1, threads, rows=1, rows_per_cta=1)

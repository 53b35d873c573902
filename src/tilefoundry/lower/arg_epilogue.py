"""An argmax fused after the matmul computing its rows: greedy decoding's choice read from the logits as the head's
matmul writes them.

A matmul stage (with its prologue and elementwise epilogue, ``prologue.py``, ``epilogue.py``) followed by a row-wise
stage whose one op is the argmax, along the last axis, of the matmul stage's result becomes one stage
(``fuse_argmax_epilogues``) of two kernels (``argmax_part`` and ``argmax_merge``, which ``staged.py`` calls):

1. the matmul's own kernel, each CTA then folding its tile of the result (its columns of every row) into one
   (value, position) pair a row, the row's *part* (``ops::arg_reduce_part``), written to two temporaries;
2. one CTA merging every CTA's part of a row into the row's position (``ops::arg_reduce_merge``).

So no CTA reads a whole row (a vocabulary of 151936 logits through one CTA was slower on the H200 than torch's
argmax after the head), and the argmax's first step costs no launch of its own. The result is torch.argmax's: pairs
fold in a total order (the first largest, NaN counting as the largest), whatever CTA finds them. The matmul still
stores its result: to the caller's output where the function returns it, else to a temporary.

The stages merge where every condition holds:

* the matmul is of two 2-D operands, its weight's rows not picked by positions, not a pair (``pairs.py``);
* its stage's result is 2-D, (M, N), of a float type (the parts fold values as float, exact for f32, bf16 and f16,
  not for every integer), with M a static row count of at most ``ARGMAX_MAX_ROWS`` (a decode step's token, a few
  sequences): each CTA's part is M pairs;
* the row-wise stage is one argmax of that result, read as it is stored (no view), along its last axis; or
  elementwise ops that may run as the matmul's epilogue (``epilogue.py``: they then do) and the argmax of their
  result (greedy decoding after a logit scale or soft-capping).

Anything else keeps the argmax a row-wise stage of its own.
"""

from __future__ import annotations

from ..ir.types.dim import Dim, dims_equal
from ..ir.types.dtype import f32, i64
from ..ir.types.storage import Storage
from ..target import CudaTarget, Target
from ..tir.buffer import Buffer
from ..tir.function import Schedule
from ..tir.layout import TLayout
from ..tir.stmt import GmemView, OpCall, Origin, RowLoop, RowOffset, Stmt, Tag
from .epilogue import epilogue_result, fusable_epilogue
from .program import Op
from .stages import Stage, StagedProgram
from .views import View

# The most rows an argmax may have to fuse after its matmul (each CTA writes one pair a row).
ARGMAX_MAX_ROWS = 16
# Threads of the CUDA CTA merging the parts (a row's parts strided over them, then folded by shuffles): a CTA's
# most, for the head's GEMV of a 151936-token vocabulary has 9496 CTAs of 16 columns, so about 9 parts a thread.
CUDA_MERGE_THREADS = 1024


def fuse_argmax_epilogues(staged: StagedProgram) -> StagedProgram:
    """``staged`` with each argmax that may fuse after its matmul (see the module docstring) moved into the matmul's
    stage, as its last op."""
    stages: list[Stage] = []
    for stage in staged.stages:
        last = stages[-1] if stages else None
        if last is not None and last.kind == "matmul" and stage.kind == "rows" and stage.ops[-1].op == "argmax":
            before = stage.ops[:-1]
            if before and len(last.ops) == 1 and fusable_epilogue(staged, last.ops[0], before):
                merged = Stage("matmul", [*last.ops, *before])
                if _fusable(staged, merged, Stage("rows", stage.ops[-1:])):
                    last.ops[:] = [*merged.ops, stage.ops[-1]]
                    continue
            elif not before and _fusable(staged, last, stage):
                last.ops.append(stage.ops[0])
                continue
        stages.append(stage)
    staged.stages = stages
    return staged


def split_argmax(ops: list[Op]) -> tuple[list[Op], Op | None]:
    """A matmul stage's ops without the argmax fused after them, and that argmax (None: none)."""
    if ops and ops[-1].op == "argmax":
        return ops[:-1], ops[-1]
    return ops, None


def _fusable(staged: StagedProgram, mm_stage: Stage, stage: Stage) -> bool:
    if len(stage.ops) != 1 or stage.ops[0].op != "argmax":
        return False
    arg = stage.ops[0]
    ops = mm_stage.ops
    mm = ops[0]
    a, b = (staged.view(v) for v in mm.inputs[:2])
    if len(a.shape) != 2 or len(b.shape) != 2 or b.gathers:
        return False
    result = epilogue_result(staged, ops) if len(ops) > 1 else mm.outputs[0]
    (x,) = arg.inputs
    if x is not result or id(x) in staged.views or x.type.rank != 2 or arg.attrs["axis"] != 1:
        return False
    if not x.type.dtype.is_float:
        return False
    rows = x.type.shape[0]
    return isinstance(rows, int) and 1 <= rows <= ARGMAX_MAX_ROWS


def argmax_part(arg: Op, tile_out: Buffer, tile: Dim, tiles: Dim, parts: tuple[str, str]) -> list[Stmt]:
    """The statements a matmul's kernel runs after its call: its CTA's part of each row of ``tile_out`` (the CTA's
    tile of the result, whose first column is ``row * tile``), written to row ``row`` of the ``parts`` temporaries
    (values, positions: ``tiles`` x M each)."""
    rows = tile_out.shape[0]
    origin = Origin(arg.op, arg.loc, arg.composite)
    values = Buffer(f"{parts[0]}_cta", f32, Storage.gmem, (rows,), TLayout((rows,), (1,)))
    positions = Buffer(f"{parts[1]}_cta", i64, Storage.gmem, (rows,), TLayout((rows,), (1,)))
    mine = RowOffset(((1, None, rows),))
    col0 = RowOffset() if dims_equal(tiles, 1) else RowOffset(((1, None, tile),))
    return [GmemView(values, parts[0], mine), GmemView(positions, parts[1], mine),
            OpCall("arg_reduce_part", Tag("argmax_op"), (tile_out,), values, origin, more_out=(positions,),
                   indices=(col0,))]


def argmax_merge(arg: Op, parts: tuple[str, str], count: Dim, out: View, out_home: str,
                 target: Target) -> tuple[list[Stmt], Schedule]:
    """The kernel merging the ``count`` parts of each row (``parts``: the temporaries ``argmax_part`` writes) into
    the argmax's result ``out`` (homed at ``out_home``)."""
    (rows,) = out.shape
    origin = Origin(arg.op, arg.loc, arg.composite)
    shape = (count, rows)
    values = Buffer(f"{parts[0]}_all", f32, Storage.gmem, shape, TLayout(shape, (rows, 1)))
    positions = Buffer(f"{parts[1]}_all", i64, Storage.gmem, shape, TLayout(shape, (rows, 1)))
    result = Buffer(f"{out.root.name}_rows", out.root.type.dtype, Storage.gmem, (rows,), TLayout((rows,),
                                                                                                  out.strides))
    body: list[Stmt] = [GmemView(values, parts[0], RowOffset()), GmemView(positions, parts[1], RowOffset()),
                        GmemView(result, out_home, RowOffset((), (), out.offset)),
                        OpCall("arg_reduce_merge", Tag("argmax_op"), (values, positions), result, origin)]
    threads = CUDA_MERGE_THREADS if isinstance(target, CudaTarget) else 1
    return [RowLoop("row", body)], Schedule("argmax", 1, threads, rows=1, rows_per_cta=1)

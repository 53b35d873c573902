"""Pairs: two matmuls of one first operand whose results meet in elementwise ops, fused into one kernel.

A gated MLP projects one normed input twice and multiplies the two: ``silu(h @ gate.T) * (h @ up.T)``. After
``fuse_epilogues`` (``epilogue.py``) that is two matmul stages: the first stores ``silu(h @ gate.T)`` in a
temporary, the second reads it back in its epilogue. ``fuse_matmul_pairs`` merges the two into one stage of
kind ``matmul_pair``: one kernel reads the first operand once (through its prologue, the norm, once) against
both weights, and each output element is the epilogue of its two dot products (``ops::matmul`` of a pair), so
the temporary, a launch and the second pass over the input are gone. It applies to two consecutive matmul stages
where

* both matmuls read the same first operand (the same value, through the same prologue if any), 2-D, against 2-D
  second operands of one shape and dtype, accumulating in one dtype into results of one dtype; or batches of
  such products of the same batch axes (each batch element one pair: a mixture's chunks through their experts'
  gate and up weights);
* the second stage has an epilogue, and the first stage's result (its matmul's, or its epilogue's) is read by
  that epilogue alone, as a value of the second result's shape (not through a view), and is not returned.

A GEMM of many rows on the tensor cores (``gemm.gemm_rows``) pairs where both products are of 2-D operands (the
schedule reads a pair through three tensor maps, one output tile's columns of both weights a stage: a prompt's
gate and up); a batch of them stays two stages (each its own GEMM).

Anything else stays two stages.
"""

from __future__ import annotations

from ..ir.types.dim import dims_equal
from ..target import Target
from .epilogue import epilogue_result, same_batch
from .gemm import gemm_rows
from .program import Op, Val
from .stages import Stage, StagedProgram


def fuse_matmul_pairs(staged: StagedProgram, target: Target) -> StagedProgram:
    """``staged`` with each fusable pair of matmul stages (see the module docstring) merged into one, as lowered for
    ``target`` (a GEMM of many rows on the tensor cores, ``gemm.gemm_rows``, pairs only products of 2-D
    operands)."""
    stages: list[Stage] = []
    for stage in staged.stages:
        last = stages[-1] if stages else None
        if (last is not None and last.kind == "matmul" and stage.kind == "matmul"
                and (not gemm_rows(last.ops[0], target) or _matrices(staged, last.ops[0], stage.ops[0]))
                and _pair(staged, last, stage)):
            stages[-1] = Stage("matmul_pair", [*last.ops, *stage.ops])
            continue
        stages.append(stage)
    staged.stages = stages
    return staged


def pair_split(ops: list[Op]) -> int:
    """Where a ``matmul_pair`` stage's second matmul is in its ops (its first matmul is ops[0])."""
    return next(i for i in range(1, len(ops)) if ops[i].op == "matmul")


def _pair(staged: StagedProgram, first: Stage, second: Stage) -> bool:
    mm0, mm1 = first.ops[0], second.ops[0]
    if len(second.ops) < 2 or mm0.inputs[0] is not mm1.inputs[0] or len(mm0.inputs) != len(mm1.inputs):
        return False
    if len(mm0.inputs) == 3 and (mm0.inputs[2] is not mm1.inputs[2] or _prologue(mm0) != _prologue(mm1)):
        return False
    if mm0.attrs.get("acc_dtype") != mm1.attrs.get("acc_dtype"):
        return False
    a, b0, b1 = staged.view(mm0.inputs[0]), staged.view(mm0.inputs[1]), staged.view(mm1.inputs[1])
    if not same_batch(a.shape, b0.shape) or not same_batch(a.shape, b1.shape):
        return False
    if not all(dims_equal(x, y) for x, y in zip(b0.shape, b1.shape)) or b0.root.type.dtype != b1.root.type.dtype:
        return False
    r0, r1 = epilogue_result(staged, first.ops) if len(first.ops) > 1 else mm0.outputs[0], mm1.outputs[0]
    if mm0.outputs[0].type.dtype != r1.type.dtype:  # the epilogue reads both products in one dtype
        return False
    if id(r0) in staged.views or id(r0) in staged.storage or _returned(staged, r0):
        return False
    if len(r0.type.shape) != len(r1.type.shape) or not all(dims_equal(x, y)
                                                           for x, y in zip(r0.type.shape, r1.type.shape)):
        return False
    readers = [op for op in staged.prog.ops if any(staged.view(v).root is r0 for v in op.inputs)]
    return bool(readers) and all(any(op is o for o in second.ops[1:]) for op in readers)


def _matrices(staged: StagedProgram, *mms: Op) -> bool:
    """Whether every operand of the matmuls ``mms`` is 2-D (no batch axes)."""
    return all(len(staged.view(v).shape) == 2 for mm in mms for v in mm.inputs[:2])


def _prologue(mm: Op) -> tuple[object, ...]:
    return tuple(mm.attrs.get(k) for k in ("prologue", "prologue_eps", "prologue_compute"))


def _returned(staged: StagedProgram, v: Val) -> bool:
    return any(staged.view(o).root is v for o in staged.prog.outputs)

"""Prologues: the RMSNorm before a projection, fused into the matmul that reads it.

A decoder layer norms its input and projects it (``rms_norm(x, g, eps) @ w.T``, once for q/k/v and once for
gate/up). Unfused, the normed rows go to memory and a second kernel reads them back: a launch and a round trip
for a few kilobytes. ``fuse_prologues`` rewrites

    h = rms_norm(x, g, eps)                   # x (M, K), g (K,)
    y = matmul(h, b)                          # b (K, N); any number of such matmuls reading h

into ``y = matmul(x, b, g)`` with ``prologue="rms_norm"`` (and the norm's ``eps`` and compute dtype) among its
attributes, and drops the ``rms_norm``. The matmul then reads its first operand through the prologue
(``ops::rms_norm_prologue``): each row's scale from the sum of its squares, each element normed as it is read,
rounded where the unfused ops round (``expand.py``), so the result is the same function of the same inputs.

It applies where every reader of ``h`` is a matmul reading it as its 2-D first operand against a 2-D second one,
``h`` is not returned, the norm's weight is a 1-D tensor (no constant), and the matmul has no prologue yet;
anything else is left as written (the norm a row-wise stage of its own). Runs on the ops as written, before
composites are expanded.
"""

from __future__ import annotations

from .expand import compute_dtype
from .program import Op, Program, Val


def fuse_prologues(prog: Program) -> Program:
    """``prog`` with each fusable ``rms_norm`` (see the module docstring) moved into the matmuls reading it."""
    for op in list(prog.ops):
        if op.op != "rms_norm":
            continue
        h = op.outputs[0]
        readers = [o for o in prog.ops if any(v is h for v in o.inputs)]
        if not readers or any(v is h for v in prog.outputs) or not all(_takes(mm, h) for mm in readers):
            continue
        x, g = op.inputs
        if g.type.rank != 1 or x.constant or g.constant:
            continue
        for mm in readers:
            mm.inputs = (x, mm.inputs[1], g)
            mm.attrs = {**mm.attrs, "prologue": "rms_norm", "prologue_eps": op.attrs["eps"],
                        "prologue_compute": compute_dtype(op)}
        prog.ops.remove(op)
    return prog


def _takes(mm: Op, h: Val) -> bool:
    """Whether ``mm`` can read ``h`` through a prologue: a matmul of ``h`` (2-D) by another 2-D operand."""
    return (mm.op == "matmul" and "prologue" not in mm.attrs and len(mm.inputs) == 2 and mm.inputs[0] is h
            and mm.inputs[1] is not h and h.type.rank == 2 and mm.inputs[1].type.rank == 2)

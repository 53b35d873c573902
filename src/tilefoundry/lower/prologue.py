"""Prologues: the RMSNorm before a projection or a rotation, fused into the matmul or rope that reads it.

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
``h`` is not returned, ``x`` is no view of rows picked by positions (an embedding's rows at the token ids: the
matmul reads its first operand through strides only, so the norm's stage reads them and writes ``h``), the norm's
weight is a 1-D tensor (no constant), and the matmul has no prologue yet and
is no GEMM of many rows on the tensor cores (``gemm.gemm_rows``: they read their operand as stored); anything
else is left as written (the norm a row-wise stage of its own). Runs on the ops as written, before
composites are expanded.

Why a GEMM keeps its norm a stage: each element of the normed operand is rounded after its row's scale is applied
(``bf16(bf16(x * scale) * g)``), so a product cannot start before the scale of each of its rows is known, which
takes a pass over the whole row (all of K). Inside the GEMM that pass is a second read of each a tile from L2 before
its main loop (a CTA of Qwen3-1.7B's q/k/v at 1024 rows has one tile of 256 rows x 2048: 1 MiB more through its SM,
doubling what it reads of a, on the critical path of its only tile); outside it, a pass writing the rows' scales
saves only the normed rows' write of the row-wise stage. That stage runs near the copy bandwidth
(``bench/kernels_h100.json``: 12.3 us for 4096 rows of 2048, 91% of a copy of its bytes; about 3 us at a 1024-token
prompt's rows), two a layer: at most about 2% of the engine's 9 ms prefill of 1024 tokens on an H100, the bound of
what any fusion could save there.

Qwen3's q/k norm is the same move into a rope: ``q, k = rope(rms_norm(q, gq), rms_norm(k, gk), cos, sin, pos)``
becomes ``rope(q, k, cos, sin, pos, gq, gk)`` with ``prologue_q`` / ``prologue_k`` (each the norm's ``eps`` and
compute dtype) among its attributes, the weights appended in that order. The rope's row is the norm's row (the
last axis), so each rotated row reads its own normed elements (``ops::rope`` through ``ops::rms_norm_prologue``),
and the norm costs no stage of its own. It applies where the rope is ``h``'s one reader, reading it as q or k
(not both), and ``x`` is no view of rows picked by positions.
"""

from __future__ import annotations

from ..target import Target
from .expand import compute_dtype
from .gemm import gemm_rows
from .program import Op, Program, Val
from .views import VIEW_OPS


def fuse_prologues(prog: Program, target: Target) -> Program:
    """``prog`` with each fusable ``rms_norm`` (see the module docstring) moved into the matmuls reading it, as
    lowered for ``target``."""
    for op in list(prog.ops):
        if op.op != "rms_norm":
            continue
        h = op.outputs[0]
        readers = [o for o in prog.ops if any(v is h for v in o.inputs)]
        x, g = op.inputs
        if not readers or any(v is h for v in prog.outputs) or g.type.rank != 1 or x.constant or g.constant:
            continue
        if len(readers) == 1 and _rotates(readers[0], h, x):
            _into_rope(readers[0], op)
            prog.ops.remove(op)
            continue
        if _gathered(x) or not all(_takes(mm, h) and not gemm_rows(mm, target) for mm in readers):
            continue
        for mm in readers:
            mm.inputs = (x, mm.inputs[1], g)
            mm.attrs = {**mm.attrs, "prologue": "rms_norm", "prologue_eps": op.attrs["eps"],
                        "prologue_compute": compute_dtype(op)}
        prog.ops.remove(op)
    return prog


def _rotates(rope: Op, h: Val, x: Val) -> bool:
    """Whether ``rope`` can read ``h`` = rms_norm(``x``) through a prologue: a rope of ``h`` as its q or its k, not
    both, and ``x`` no rows picked by positions (a rope reads its q and k through strides only, ``rope.py``)."""
    return (rope.op == "rope" and sum(v is h for v in rope.inputs) == 1 and any(v is h for v in rope.inputs[:2])
            and not _gathered(x))


def _gathered(v: Val) -> bool:
    """Whether ``v`` is a view (through view ops) of rows picked by positions (``index_select``)."""
    while v.producer is not None and v.producer.op in VIEW_OPS:
        if v.producer.op == "index_select":
            return True
        v = v.producer.inputs[0]
    return False


def _into_rope(rope: Op, norm: Op) -> None:
    """``rope`` reading ``norm``'s input through the norm (see the module docstring)."""
    h = norm.outputs[0]
    x, g = norm.inputs
    which = "q" if rope.inputs[0] is h else "k"
    q, k, cos, sin, pos, *weights = rope.inputs
    q, k = (x if v is h else v for v in (q, k))
    attrs = {**rope.attrs, f"prologue_{which}": (norm.attrs["eps"], compute_dtype(norm))}
    if which == "q" and "prologue_k" in attrs:
        weights.insert(0, g)  # q's weight before k's
    else:
        weights.append(g)
    rope.inputs = (q, k, cos, sin, pos, *weights)
    rope.attrs = attrs


def rope_prologues(rope: Op) -> dict[str, tuple[Val, float, object]]:
    """The norms a rope reads q and k through (``"q"``, ``"k"``: the norm's weight, eps and compute dtype)."""
    weights = iter(rope.inputs[5:])
    out = {}
    for which in ("q", "k"):
        if f"prologue_{which}" in rope.attrs:
            eps, compute = rope.attrs[f"prologue_{which}"]
            out[which] = (next(weights), eps, compute)
    return out


def _takes(mm: Op, h: Val) -> bool:
    """Whether ``mm`` can read ``h`` through a prologue: a matmul of ``h`` (2-D) by another 2-D operand."""
    return (mm.op == "matmul" and "prologue" not in mm.attrs and len(mm.inputs) == 2 and mm.inputs[0] is h
            and mm.inputs[1] is not h and h.type.rank == 2 and mm.inputs[1].type.rank == 2)

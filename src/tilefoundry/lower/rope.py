"""The kernels of a rope stage: q and k rotated by the cos / sin rows at their positions, one kernel each.

A row is one head of one token (``head_dim`` elements); a CTA takes a row, reads the cos and sin rows at
the token's position (read on the device from ``pos_ids``: a CUDA graph captured once serves every
position) and ``ops::rope`` rotates it in the op's compute dtype. q, k and the results are views: a row
reads its head wherever the view puts it. On CUDA, rows whose halves are whole 16-byte words of one float type
get a vector of a word's elements (``_word``): the entry then checks the tensors' 16-byte alignment and each row's
iterator promises it, so ``ops::rope`` reads and writes words with no address test and no element-by-element path
in the kernel (Qwen3-1.7B's q/k norm + rope + cache launch: PTX of 4279 lines with 100 two-byte loads before,
3746 with none after).

A norm moved into the rope (``prologue.py``: Qwen3's q/k norm) is read with the row: ``ops::rope`` through
``ops::rms_norm_prologue`` of the norm's weight. A result that a cache update writes into a cache and nothing else
reads goes there directly (``RowsInto``, from ``staged.py``): each row at the cache's position read on the device,
only the rows the cache update keeps, so the rotated keys never make a round trip through a temporary.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.types.dim import Dim, product
from ..ir.types.storage import Storage
from ..target import CudaTarget, Target
from ..tir.buffer import Buffer
from ..tir.function import Schedule
from ..tir.layout import TLayout
from ..tir.stmt import (
    Bound,
    Gather,
    GmemView,
    Literal,
    OpCall,
    Origin,
    Prologue,
    RowGuard,
    RowLoop,
    RowOffset,
    Stmt,
    Tag,
)
from .errors import LoweringError
from .program import Op
from .prologue import rope_prologues
from .views import View, lead_offset

# Pairs of elements each thread of a CUDA CTA rotates (the CTA shares a row's pairs), and the most threads a CTA
# takes: a head of 128 elements takes 16 threads, as a row-wise stage of that row does, so that the rope and the
# row-wise stages beside it (a cache write of v) may share one launch (codegen/cuda/launches.py).
CUDA_ROPE_PAIRS_PER_THREAD = 4
CUDA_ROPE_MAX_THREADS = 64


@dataclass(frozen=True)
class RowsInto:
    """Where a rope writes a result a cache update takes as its new rows: ``view``, the cache's result seen as the
    rope's result (its rows numbered as the rope numbers them), plus ``at`` (the write position, read on the
    device), only the rows where ``guard`` holds (the update's ``i < n_new``; past ``cur_pos + i < capacity`` a kernel
    stops)."""

    view: View
    at: tuple[Gather, ...]
    guard: tuple[Bound, ...]


def rope_bodies(name: str, op: Op, views: list[View], outs: list[View], homes: dict[int, str],
                target: Target, into: dict[int, RowsInto] | None = None) -> list[tuple[list[Stmt], Schedule]]:
    """The statements and schedule of the two kernels, q's and k's (``name``: the function, as refusals name it;
    ``homes``: the parameter each root is in; ``into``: by result index, a result written into a cache)."""
    q, k, cos, sin, pos = views[:5]
    norms = rope_prologues(op)
    weights = dict(zip(norms, views[5:]))  # q's and k's norm weights, as the op takes them
    named = (("cos_cache", cos), ("sin_cache", sin), ("pos_ids", pos), ("q", q), ("k", k), ("q's result", outs[0]),
             ("k's result", outs[1]), *((f"{which}'s norm weight", w) for which, w in weights.items()))
    for what, v in named:
        if v.gathers or (v is not q and v is not k and any(r != 1 for r in v.repeats)):
            raise LoweringError(op.op, name, f"its {what} is a view {v} whose axes repeat or are picked by positions; "
                                "not compiled yet", op.loc)
    compute = op.attrs["compute_dtype"].name
    threads = 1
    origin = Origin(op.op, op.loc, op.composite)
    bodies = []
    for i, (which, x, out) in enumerate(zip("qk", (q, k), outs)):
        lead = x.shape[:-1]
        d = x.shape[-1]
        if isinstance(target, CudaTarget):
            half = d // 2 if isinstance(d, int) else CUDA_ROPE_MAX_THREADS * CUDA_ROPE_PAIRS_PER_THREAD
            threads = max(1, min(CUDA_ROPE_MAX_THREADS, half // CUDA_ROPE_PAIRS_PER_THREAD))
        seq_axis = len(lead) - 2  # (..., seq, heads): the position indexes the seq axis
        heads = lead[-1]
        at = RowOffset(((heads, None if seq_axis == 0 else lead[seq_axis], pos.strides[0]),), (), pos.offset)

        body: list[Stmt] = []
        xr = _row(body, x, d, homes, lead_offset(x, lead))
        table = f"rows of {cos.root.name} and {sin.root.name}"
        cr = _row(body, cos, d, homes, RowOffset((), (Gather(homes[id(pos.root)], at, cos.strides[0], cos.shape[0],
                                                              table),), cos.offset))
        sr = _row(body, sin, d, homes, RowOffset((), (Gather(homes[id(pos.root)], at, sin.strides[0], sin.shape[0],
                                                              table),), sin.offset))
        prologue = None
        if which in norms:
            w = weights[which]
            wr = _row(body, w, d, homes, RowOffset((), (), w.offset))
            _, eps, norm_compute = norms[which]
            prologue = Prologue("rms_norm", wr, Literal(float(eps), norm_compute), norm_compute, x.root.type.dtype,
                                origin)
        target_rows = (into or {}).get(i)
        written: list[Stmt] = body
        if target_rows is not None:
            offset = lead_offset(target_rows.view, lead)
            orow = _row([], target_rows.view, d, homes, offset)
            guard = RowGuard(target_rows.guard)
            body.append(guard)
            written = guard.body
            written.append(GmemView(orow, homes[id(target_rows.view.root)],
                                    RowOffset(offset.terms, target_rows.at, offset.base)))
        else:
            orow = _row(written, out, d, homes, lead_offset(out, lead))
        written.append(OpCall("rope", Tag(compute), (xr, cr, sr), orow, origin, prologue=prologue))
        rows = product(lead)
        vector = _word(target, d, (x, cos, sin, out, *((weights[which],) if which in norms else ())))
        bodies.append(([RowLoop("row", body)],
                       Schedule("rope", rows, threads, rows=rows, rows_per_cta=1, vector_width=vector)))
    return bodies


def _word(target: Target, d: Dim, views: tuple[View, ...]) -> int:
    """The vector width of a CUDA rope whose rows ``ops::rope`` reads and writes in 16-byte words: the elements of
    a word, where every row is contiguous in one float type of 2 or 4 bytes and each half of the row a whole number
    of words (the entry then checks the tensors' 16-byte alignment, and rows at offsets that keep it promise it in
    their iterators' types, so the op takes words without testing addresses); 1 otherwise."""
    dtypes = {v.root.type.dtype for v in views}
    if not isinstance(target, CudaTarget) or not isinstance(d, int) or len(dtypes) != 1:
        return 1
    (dtype,) = dtypes
    if not dtype.is_float or dtype.bits not in (16, 32) or any(v.strides[-1] != 1 for v in views):
        return 1
    vector = 128 // dtype.bits
    return vector if (d // 2) % vector == 0 and d % 2 == 0 else 1


def _row(body: list[Stmt], v: View, d: Dim, homes: dict[int, str], offset: RowOffset) -> Buffer:
    """A view of one row of ``d`` elements of ``v``'s memory, from ``offset`` on, declared in ``body``."""
    buf = Buffer(f"{v.root.name}_row", v.root.type.dtype, Storage.gmem, (d,), TLayout((d,), (v.strides[-1],)))
    body.append(GmemView(buf, homes[id(v.root)], offset))
    return buf

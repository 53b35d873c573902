"""The kernel of a reduction across rows: ``reduce(x, axes=(a,))`` over an axis other than the last.

The row-wise lowering reduces along a row; a reduction over another axis (the MoE block's sum of its experts'
outputs per token) folds rows of memory instead. A CTA takes one output row (the kept axes but the last), its
threads the row's columns, and ``ops::reduce_axis`` folds each column down the reduced axis in the compute
type, reading ``x`` through its view (any strides).
"""

from __future__ import annotations

from ..ir.types.dim import dims_equal, product
from ..ir.types.storage import Storage
from ..target import CudaTarget, Target
from ..tir.buffer import Buffer
from ..tir.function import Schedule
from ..tir.layout import TLayout
from ..tir.stmt import GmemView, OpCall, Origin, RowLoop, RowOffset, Stmt, Tag
from .errors import LoweringError
from .opmap import REDUCE_TAGS
from .program import Op
from .views import View, lead_offset

# Threads of a CUDA CTA folding one output row (they share its columns).
CUDA_REDUCE_AXIS_THREADS = 128


def is_reduce_across_rows(op: Op) -> bool:
    """Whether ``op`` is a reduction that keeps the last axis (it folds rows, not along a row)."""
    return op.op == "reduce" and (op.inputs[0].type.rank - 1) not in op.attrs["axes"]


def reduce_axis_body(name: str, op: Op, src: View, out: View, homes: dict[int, str],
                     target: Target) -> tuple[list[Stmt], Schedule]:
    """The statements and schedule of the kernel computing ``op``
    (``name``: the function, as refusals name it; ``homes``: the parameter each root is in)."""
    axes = op.attrs["axes"]
    if len(axes) != 1:
        raise LoweringError(op.op, name, f"over axes {axes}: a compiled reduction across rows takes one axis (reduce "
                            "one axis after the other)", op.loc)
    (a,) = axes
    if src.repeats[a] != 1 or src.gathers:
        raise LoweringError(op.op, name, f"of a view {src} whose axes repeat or are picked by positions; not compiled "
                            "yet", op.loc)
    kept = [i for i in range(len(src.shape)) if i != a]
    lead = tuple(src.shape[i] for i in kept[:-1])
    d = src.shape[-1]
    across = View(src.root, tuple(src.shape[i] for i in kept), tuple(src.strides[i] for i in kept), 0,
                  tuple(src.repeats[i] for i in kept))
    src_at = RowOffset(lead_offset(across, lead).terms, (), src.offset)
    out_kept = tuple(i for i, e in enumerate(out.shape) if not (op.attrs["keepdim"] and i == a))
    out_view = View(out.root, tuple(out.shape[i] for i in out_kept), tuple(out.strides[i] for i in out_kept))
    if not dims_equal(out.offset, 0):
        raise LoweringError(op.op, name, f"its result is a view {out} inside other memory; not compiled yet", op.loc)
    tile = Buffer(f"{src.root.name}_rows", src.root.type.dtype, Storage.gmem, (src.shape[a], d),
                  TLayout((src.shape[a], d), (src.strides[a], src.strides[-1])))
    row = Buffer(f"{out.root.name}_row", out.root.type.dtype, Storage.gmem, (d,), TLayout((d,), (out.strides[-1],)))
    origin = Origin(op.op, op.loc, op.composite)
    body: list[Stmt] = [RowLoop("row", [
        GmemView(tile, homes[id(src.root)], src_at),
        GmemView(row, homes[id(out.root)], lead_offset(out_view, lead)),
        OpCall("reduce_axis", Tag(REDUCE_TAGS[op.attrs["kind"]]), (tile,), row, origin),
    ])]
    rows = product(lead)
    threads = CUDA_REDUCE_AXIS_THREADS if isinstance(target, CudaTarget) else 1
    return body, Schedule("reduce_axis", rows, threads, rows=rows, rows_per_cta=1)

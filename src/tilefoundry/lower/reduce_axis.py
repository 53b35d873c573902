"""The kernel of a reduction across rows: ``reduce(x, axes=(a,))`` over an axis other than the last.

The row-wise lowering reduces along a row; a reduction over another axis (the MoE block's sum of its experts'
outputs per token) folds rows of memory instead. A CTA takes one output row (the kept axes but the last), its
threads the row's columns, and ``ops::reduce_axis`` folds each column down the reduced axis in the compute
type, reading ``x`` through its view (any strides).

A reduction over several axes (a whole tensor's sum or largest value) is first cut into reductions of one axis
each (``split_reductions``), the innermost first: the last axis by the row-wise lowering, the others by this
kernel. A sum or mean of 16-bit floats runs in its accumulate dtype (f32) from the first to the last, rounded once.
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
from .program import Op, Program, adopt_result, make_op
from .views import View, lead_offset

# Threads of a CUDA CTA folding one output row (they share its columns).
CUDA_REDUCE_AXIS_THREADS = 128


def split_reductions(prog: Program) -> Program:
    """``prog`` with each reduction over several axes cut into reductions of one axis each, the innermost first
    (removing the highest axis first keeps the others' indices); a sum or mean of values narrower than its
    accumulate dtype cast to it first and back after, so that it is rounded once as the evaluator rounds it."""
    ops, prog.ops = prog.ops, []
    for op in ops:
        if op.op != "reduce" or len(op.attrs["axes"]) < 2:
            prog.ops.append(op)
            continue
        (x,) = op.inputs
        acc = op.attrs.get("acc_dtype", x.type.dtype)
        widen = op.attrs["kind"] in ("sum", "mean") and acc != x.type.dtype
        v = make_op(prog, "cast", (x,), {"dtype": acc}, op, "wide") if widen else x
        for axis in sorted(op.attrs["axes"], reverse=True):
            v = make_op(prog, "reduce", (v,), {**op.attrs, "axes": (axis,)}, op, f"axis{axis}")
        if widen:
            v = make_op(prog, "cast", (v,), {"dtype": x.type.dtype}, op, "narrow")
        adopt_result(prog, op.outputs[0])  # the last op computes the reduction's result
    return prog


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

"""The kernel of ``index_add(x, index, source, dim, alpha)``: each row of the result gathers its own sum.

torch adds row ``i`` of the source, times alpha, to the result's row ``index[i]`` along ``dim``, in the index's
order, where one position may be named several times. Here a CTA takes one row of the result (its position ``at``
along ``dim``, and the indices of the other leading axes), its threads the columns, and ``ops::index_add`` starts
from x's row and adds every source row whose index names ``at``, in the index's order, rounding after each add as
torch's CPU kernel does: no two CTAs write one element, so the sums are the same on every run. Each CTA reads the
whole index (n positions), checked against the axis's extent (the CPU entry refuses a position outside it, a CUDA
kernel stops at it).
"""

from __future__ import annotations

from ..ir.types.dim import dims_equal, product
from ..ir.types.storage import Storage
from ..target import CudaTarget, Target
from ..tir.buffer import Buffer
from ..tir.function import Schedule
from ..tir.layout import TLayout
from ..tir.stmt import GmemView, OpCall, Origin, RowLoop, RowOffset, Stmt
from .errors import LoweringError
from .opmap import literal
from .program import Op
from .views import View, lead_offset

# Threads of a CUDA CTA sharing one result row's columns.
CUDA_INDEX_ADD_THREADS = 128


def index_add_body(name: str, op: Op, x: View, index: View, src: View, out: View, homes: dict[int, str],
                   target: Target) -> tuple[list[Stmt], Schedule]:
    """The statements and schedule of the kernel computing ``op`` (``name``: the function, as refusals name it;
    ``homes``: the parameter each root is in)."""
    dim = op.attrs["dim"]
    assert dim < len(out.shape) - 1, "gather_last.py moves an index_add along the last axis to a leading one"
    for v, what in ((x, "x"), (src, "source")):
        if v.gathers or any(r != 1 for r in v.repeats):
            raise LoweringError(op.op, name, f"its {what} is a view {v} whose axes repeat or are picked by "
                                "positions; not compiled yet", op.loc)
    if not dims_equal(out.offset, 0):
        raise LoweringError(op.op, name, f"its result is a view {out} inside other memory; not compiled yet", op.loc)
    lead, d = tuple(out.shape[:-1]), out.shape[-1]
    # The source's row for the result's row: the same indices but along dim (stride 0 here: walked by the op).
    along = View(src.root, out.shape, tuple(0 if j == dim else s for j, s in enumerate(src.strides)), src.offset)
    dtype = out.root.type.dtype
    x_row = Buffer(f"{x.root.name}_row", x.root.type.dtype, Storage.gmem, (d,), TLayout((d,), (x.strides[-1],)))
    rows = Buffer(f"{src.root.name}_rows", src.root.type.dtype, Storage.gmem, (src.shape[dim], d),
                  TLayout((src.shape[dim], d), (src.strides[dim], src.strides[-1])))
    positions = Buffer(f"{index.root.name}_all", index.root.type.dtype, Storage.gmem, (index.shape[0],),
                       TLayout((index.shape[0],), (index.strides[0],)))
    row = Buffer(f"{out.root.name}_row", dtype, Storage.gmem, (d,), TLayout((d,), (out.strides[-1],)))
    div = product(lead[dim + 1:])
    at = RowOffset(((div, None if dim == 0 else lead[dim], 1),))
    origin = Origin(op.op, op.loc, op.composite)
    body: list[Stmt] = [RowLoop("row", [
        GmemView(x_row, homes[id(x.root)], lead_offset(x, lead)),
        GmemView(rows, homes[id(src.root)], lead_offset(along, lead)),
        GmemView(positions, homes[id(index.root)], RowOffset((), (), index.offset)),
        GmemView(row, homes[id(out.root)], lead_offset(out, lead)),
        OpCall("index_add", None, (x_row, rows, positions, literal(op.attrs["alpha"], dtype)), row, origin,
               indices=(at, RowOffset((), (), out.shape[dim]))),
    ])]
    n_rows = product(lead)
    threads = CUDA_INDEX_ADD_THREADS if isinstance(target, CudaTarget) else 1
    return body, Schedule("index_add", n_rows, threads, rows=n_rows, rows_per_cta=1)

"""Is a program row-wise, and what is each value per row?

A row-wise program iterates over ``rows = product(lead)`` rows of ``H`` elements: the leading axes of
its widest values are the row index, their last axis the row. Every value is, per row, either a
*vector* (the row's H elements) or a *scalar* (one element: a reduction's result, a ``[rows, 1]``
input), and *invariant* when it does not depend on the row (a weight, a constant). Elementwise ops
(with broadcasting), casts, comparisons, ``where``, constants, ``arange`` (positions along the row, the
same for every row) and reductions along the last axis (``reduce``, ``argmax``, ``topk``) keep a
program row-wise; anything else is refused, naming the op. A
``topk`` result is a third kind of value per row: its ``k`` *picks* (neither the row nor one element),
which the program returns as they are (no op reads them yet). A program without reductions may have
its rows cut into shorter ones (``split_rows``), so that one long row spreads over several CTAs.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.types.dim import Dim, DimVar, dims_equal, product
from .errors import LoweringError
from .opmap import ELEMENTWISE_OPS
from .program import Op, Program, Val

# Ops whose result is aligned with their operands by broadcasting (right-aligned axes): one list, opmap's.
ELEMENTWISE = ELEMENTWISE_OPS


@dataclass(frozen=True)
class RowForm:
    """A value per row.

    Attributes:
        vector: it spans the row (H elements per row); else one element per row.
        lead: for each of the value's axes except its row axis, the lead axis it walks (None: extent 1,
            repeated along that lead axis).
        invariant: it is the same for every row.
        picks: topk's ``k`` results per row (its last axis, of extent k), else None.
    """

    vector: bool
    lead: tuple[int | None, ...]
    invariant: bool
    picks: int | None = None


@dataclass
class RowSpace:
    """The iteration space: lead extents (rows = their product), the row length H, each value's form."""

    lead: tuple[Dim, ...]
    row: Dim
    forms: dict[int, RowForm]
    axis_maps: dict[int, tuple[int, ...]]
    segments: int = 1  # the value's rows are cut into this many rows of ``row`` elements (see split_rows)

    @property
    def rows(self) -> Dim:
        """The number of rows."""
        return product(self.lead)

    def form(self, v: Val) -> RowForm:
        """The form of value ``v``."""
        return self.forms[id(v)]

    def shape_of(self, v: Val) -> tuple[Dim, ...]:
        """``v``'s shape as the row space walks it: a vector's last axis cut into its segments."""
        shape = v.type.shape
        if self.segments == 1 or not self.form(v).vector:
            return shape
        return (*shape[:-1], self.segments, self.row)


# Ops that reduce along the row: ``reduce``, ``argmax`` (the row's position of its largest element) and
# ``topk`` (its k largest or smallest elements and their positions).
REDUCTIONS = frozenset({"reduce", "argmax", "topk"})


def has_reduction(prog: Program) -> bool:
    """Whether some op of ``prog`` reduces along the row (else each element of a row is computed alone)."""
    return any(op.op in REDUCTIONS for op in prog.ops)


def split_rows(space: RowSpace, segments: int) -> RowSpace:
    """The row space of a program without reductions whose rows are cut into ``segments`` rows each: a
    new innermost lead axis of ``segments`` that every vector walks (so none is invariant any longer), rows
    of ``row / segments`` elements. Per-row scalars keep their forms."""
    if segments == 1:
        return space
    assert isinstance(space.row, int) and space.row % segments == 0, (space.row, segments)
    axis = len(space.lead)
    forms = {k: RowForm(True, (*f.lead, axis), False) if f.vector else f for k, f in space.forms.items()}
    return RowSpace((*space.lead, segments), space.row // segments, forms, space.axis_maps, segments)


def analyze_rows(prog: Program) -> RowSpace:
    """The row space of ``prog``, or a LoweringError naming the first op that is not row-wise."""
    values = list(prog.params) + [v for op in prog.ops for v in op.outputs]
    depth = max((v.type.rank for v in values), default=0)
    row_axis = depth - 1  # the iteration axis of the row (-1: no axes at all)
    maps: dict[int, tuple[int, ...]] = {}
    picks: dict[int, int] = {}  # topk's results: k per row
    for p in prog.params:
        maps[id(p)] = tuple(range(depth - p.type.rank, depth))
    for op in prog.ops:
        _map_op(prog, op, maps, row_axis, picks)
    extents = _extents(prog, values, maps, depth, picks)
    lead, row = tuple(extents[:-1]), (extents[-1] if depth else 1)
    forms = {id(v): _form(v, maps[id(v)], row_axis, extents, picks.get(id(v))) for v in values}
    return RowSpace(lead, row, forms, maps)


def _refuse(prog: Program, op: Op, reason: str) -> LoweringError:
    return LoweringError(op.op, prog.name, reason, op.loc)


def _map_op(prog: Program, op: Op, maps: dict[int, tuple[int, ...]], row_axis: int, picks: dict[int, int]) -> None:
    if op.op == "constant":
        maps[id(op.outputs[0])] = ()
        return
    if op.op == "arange":  # positions along the row: a vector the same for every row
        maps[id(op.outputs[0])] = (row_axis,)
        return
    read = next((v for v in op.inputs if id(v) in picks), None)
    if read is not None:
        if op.op not in ("reshard", "local"):
            raise _refuse(prog, op, f"it reads topk's result {read.type}: a compiled row-wise program returns topk's "
                                    "values and indices as they are (no op reads them yet)")
        maps[id(op.outputs[0])], picks[id(op.outputs[0])] = maps[id(read)], picks[id(read)]
        return
    if op.op == "topk":
        _map_topk(prog, op, maps, row_axis, picks)
        return
    if op.op == "reduce":
        (x,) = op.inputs
        xm = maps[id(x)]
        if op.attrs["axes"] != (x.type.rank - 1,) or not xm or xm[-1] != row_axis:
            raise _refuse(prog, op, f"over axes {op.attrs['axes']} of {x.type}: a compiled row-wise program "
                                    "reduces along the last axis only")
        maps[id(op.outputs[0])] = xm if op.attrs["keepdim"] else xm[:-1]
        return
    if op.op == "argmax":
        (x,) = op.inputs
        xm = maps[id(x)]
        if op.attrs["axis"] != x.type.rank - 1 or not xm or xm[-1] != row_axis:
            raise _refuse(prog, op, f"along axis {op.attrs['axis']} of {x.type}: a compiled row-wise program "
                                    "takes the argmax along the last axis only")
        maps[id(op.outputs[0])] = xm[:-1]
        return
    if op.op not in ELEMENTWISE:
        raise _refuse(prog, op, _why_not(op))
    out = op.outputs[0]
    widest = [maps[id(v)] for v in op.inputs if v.type.rank == out.type.rank]
    result = widest[0] if widest else tuple(range(row_axis + 1 - out.type.rank, row_axis + 1))
    for v in op.inputs:
        vm = maps[id(v)]
        if vm != result[len(result) - len(vm):]:
            raise _refuse(prog, op, f"its operands {', '.join(str(i.type) for i in op.inputs)} broadcast across "
                                    "different iteration axes (a per-row value meets the row axis); this is not a "
                                    "row-wise program")
    maps[id(out)] = result


def _map_topk(prog: Program, op: Op, maps: dict[int, tuple[int, ...]], row_axis: int, picks: dict[int, int]) -> None:
    """topk along the row: its results walk the row's lead axes, k picks a row. The row holds at least k
    elements (a DimVar row length's lower bound at least k), as torch requires."""
    (x,) = op.inputs
    xm, k, row = maps[id(x)], op.attrs["k"], x.type.shape[-1]
    if op.attrs["axis"] != x.type.rank - 1 or not xm or xm[-1] != row_axis:
        raise _refuse(prog, op, f"along axis {op.attrs['axis']} of {x.type}: a compiled row-wise program takes the "
                                "topk along the last axis only")
    if not isinstance(row, int) and not (isinstance(row, DimVar) and row.lo >= k):
        low = f"lower bound {row.lo}" if isinstance(row, DimVar) else "no lower bound"
        raise _refuse(prog, op, f"k={k} along a row of {row} elements ({low}): declare the row length as a DimVar "
                                f"whose lower bound is at least k (DimVar('{row}', {k}, ...)), so that every row has "
                                "k elements to pick")
    for v in op.outputs:
        maps[id(v)], picks[id(v)] = xm[:-1], k


def _why_not(op: Op) -> str:
    if op.op == "matmul":
        return "matmul is not compiled yet (the row-wise compiler covers elementwise ops and reductions)"
    if op.op in ("rope", "index_select", "cache_update"):
        return f"{op.op} reads across rows or gathers; the row-wise compiler covers elementwise ops and reductions"
    return (f"{op.op} changes the shape of the data; the row-wise compiler covers elementwise ops, casts, "
            "comparisons, where, constants, arange and reductions along the last axis")


def _extents(prog: Program, values: list[Val], maps: dict[int, tuple[int, ...]], depth: int,
             picks: dict[int, int]) -> list[Dim]:
    extents: list[Dim] = [1] * depth
    seen: list[Val | None] = [None] * depth
    for v in values:
        walked = v.type.shape[:-1] if id(v) in picks else v.type.shape  # a topk result's last axis: its k picks
        for d, axis in zip(walked, maps[id(v)]):
            if dims_equal(d, 1):
                continue
            if seen[axis] is None:
                extents[axis], seen[axis] = d, v
            elif not dims_equal(extents[axis], d):
                op = v.producer
                what = f"{v.producer.op}" if op is not None else f"parameter {v.param}"
                raise LoweringError(
                    what, prog.name, f"iteration axis {axis} has extent {extents[axis]} in {seen[axis].type} "
                    f"and {d} in {v.type}", op.loc if op is not None else prog.function.loc)
    return extents


def _form(v: Val, axis_map: tuple[int, ...], row_axis: int, extents: list[Dim], picks: int | None) -> RowForm:
    if picks is not None:  # its lead axes walk the row's; its last axis holds the k picks
        lead = tuple(None if dims_equal(d, 1) else a for d, a in zip(v.type.shape[:-1], axis_map, strict=True))
        return RowForm(False, lead, all(a is None for a in lead), picks)
    shape = v.type.shape
    has_row = bool(axis_map) and axis_map[-1] == row_axis
    vector = has_row and not dims_equal(shape[-1], 1) and not dims_equal(extents[row_axis], 1)
    lead_axes = axis_map[:-1] if has_row else axis_map
    lead_dims = shape[:-1] if has_row else shape
    lead = tuple(None if dims_equal(d, 1) else a for d, a in zip(lead_dims, lead_axes))
    return RowForm(vector, lead, all(a is None for a in lead))

"""Views: ``transpose``, ``reshape``, ``slice``, ``split``, ``repeat_interleave`` and the placement aliases as layouts
of the memory they read.

A view op moves no data. Each value of a program is a :class:`View` of the memory of a *root* value (a
parameter or an op's result): its shape, the stride of each axis in elements, an offset, and for each axis
how many consecutive indices read one element (``repeats``: a key-value head read by several query heads
is ``repeat_interleave`` of the head axis, index ``h`` reading ``h // repeats``). A transposed weight is the
weight with two strides swapped; a reshape of a contiguous value is the value itself; a slice moves the
offset, and so does each part of a split (a slice of its own along the split axis). A root is stored row-major
unless the lowering chose another order for it (``storage``: a result written in the order its reader wants). A
reshape that no strides express (merging axes a transpose has split apart) needs a copy (stages.split_stages makes
it, reading the view through its strides), refused where its rows repeat in runs or are read through positions.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.types.dim import Dim, dims_equal, floordiv, product, total
from ..tir.stmt import Gather, RowOffset
from .errors import LoweringError
from .program import Op, Program, Val

VIEW_OPS = frozenset({"transpose", "reshape", "slice", "split", "repeat_interleave", "index_select"})
_ALIASES = frozenset({"reshard", "local"})


@dataclass(frozen=True)
class View:
    """``root``'s memory seen as ``shape`` with ``strides`` (elements) from element ``offset`` on."""

    root: Val
    shape: tuple[Dim, ...]
    strides: tuple[Dim, ...]
    offset: Dim = 0
    repeats: tuple[int, ...] = ()
    gathers: tuple[tuple[int, View, Dim], ...] = ()  # (axis, positions read on the device, the table's extent)

    def __post_init__(self) -> None:
        if not self.repeats:
            object.__setattr__(self, "repeats", (1,) * len(self.shape))

    @property
    def contiguous(self) -> bool:
        """Whether the view is its root's memory read in order from the start (row-major, no gaps)."""
        return dims_equal(self.offset, 0) and not self.gathers and all(r == 1 for r in self.repeats) and all(
            dims_equal(d, 1) or dims_equal(s, r) for d, s, r in zip(self.shape, self.strides, row_major(self.shape)))

    def __str__(self) -> str:
        strides = ", ".join(str(s) if r == 1 else f"{s}/{r}" for s, r in zip(self.strides, self.repeats))
        at = "" if dims_equal(self.offset, 0) else f" at {self.offset}"
        return f"%{self.root.name}[{', '.join(str(d) for d in self.shape)}]:({strides}){at}"


@dataclass(frozen=True)
class GatheredAxis:
    """An axis of a view whose index is a position read on the device: element ``i`` of the axis is element
    ``index[i]`` (the parameter ``index``, read at stride ``index_stride``) of a table of ``bound`` rows."""

    axis: int
    index: str
    index_stride: Dim
    bound: Dim
    table: str


@dataclass(frozen=True)
class Strided:
    """How a row-wise kernel reads or writes a parameter that is a view of other memory (see
    ``rowwise._RowLowering._offset``): each axis's stride and repeat, the axes indexed through positions read
    on the device, positions added to every row (``shifts``: a cache row written at ``cur_pos``), and where the
    view starts (``base``: a slice from a non-zero start)."""

    strides: tuple[Dim, ...]
    repeats: tuple[int, ...]
    gathered: tuple[GatheredAxis, ...] = ()
    shifts: tuple[Gather, ...] = ()
    base: Dim = 0


def lead_offset(view: View, lead: tuple[Dim, ...]) -> RowOffset:
    """Where row ``row`` of ``view`` starts, its rows numbered over the ``lead`` axes (all but the last) in order:
    each lead axis's index times its stride (a repeated axis at index // repeats)."""
    terms = []  # where the view starts (a slice's start), then each lead axis's index times its stride
    for j, extent in enumerate(lead):
        stride, times = view.strides[j], view.repeats[j]
        if dims_equal(extent, 1) or dims_equal(stride, 0):
            continue
        div = product((*lead[j + 1:], times))
        terms.append((div, None if j == 0 else floordiv(extent, times), stride))
    return RowOffset(tuple(terms), (), view.offset)


def row_major(shape: tuple[Dim, ...]) -> tuple[Dim, ...]:
    """The strides of a contiguous row-major array of ``shape``."""
    return tuple(product(shape[i + 1:]) for i in range(len(shape)))


def whole(v: Val, strides: tuple[Dim, ...] | None = None) -> View:
    """``v`` as the view of its own memory (stored row-major, or with ``strides``)."""
    return View(v, v.type.shape, strides if strides is not None else row_major(v.type.shape))


class Regroup(LoweringError):
    """A reshape (``op``) no strides express: ``view`` (of a root) would have to be contiguous first."""

    def __init__(self, error: LoweringError, view: View, op: Op) -> None:
        super().__init__(error.op, error.function, error.reason, error.loc)
        self.view = view
        self.reshape = op


def rows_strided(view: View) -> bool:
    """Whether ``view``'s rows (its last axis) are elements one stride apart (consecutive, or a transposed axis's,
    or one element repeated: stride 0), so a row-wise op can read them through that stride: not repeated in runs
    (``repeat_interleave`` along the last axis) nor indexed through positions read on the device."""
    last = len(view.shape) - 1
    if last < 0 or dims_equal(view.shape[-1], 1):
        return True
    return view.repeats[-1] == 1 and all(a != last for a, _, _ in view.gathers)


def storage_for(view: View) -> tuple[Dim, ...] | None:
    """Strides to store ``view``'s root with so that ``view`` reads it contiguously, where ``view`` only permutes
    the root's axes (None otherwise)."""
    root_shape = view.root.type.shape
    if not dims_equal(view.offset, 0) or any(r != 1 for r in view.repeats) or len(view.shape) != len(root_shape):
        return None
    own = row_major(root_shape)
    order = []
    for s in view.strides:  # which root axis each view axis walks
        axes = [a for a, t in enumerate(own) if dims_equal(t, s) and a not in order]
        if len(axes) != 1:
            return None
        order.append(axes[0])
    wanted = row_major(view.shape)
    strides: list[Dim] = [0] * len(root_shape)
    for i, a in enumerate(order):
        if not dims_equal(root_shape[a], view.shape[i]):
            return None
        strides[a] = wanted[i]
    return tuple(strides)


def view_of_op(prog: Program, op: Op, src: View, output: int = 0) -> View:
    """The view ``op`` (a view op or a placement alias) makes of its operand's view ``src`` as its result
    ``output`` (a split's part; every other view op has one result)."""
    if op.op in _ALIASES:
        return src
    if op.op == "transpose":
        perm = op.attrs["perm"]
        return View(src.root, tuple(src.shape[p] for p in perm), tuple(src.strides[p] for p in perm), src.offset,
                    tuple(src.repeats[p] for p in perm), tuple((perm.index(a), i, n) for a, i, n in src.gathers))
    if op.op == "index_select":
        raise AssertionError("index_select views are made by index_view")  # pragma: no cover
    if op.op == "reshape" and src.gathers:  # only axes of extent 1 added or dropped: the rows stay picked
        axes = _unit_reshape(src.shape, op.outputs[0].type.shape)
        if axes is not None and all(a in axes for a, _, _ in src.gathers):
            return View(src.root, op.outputs[0].type.shape, tuple(0 if a is None else src.strides[a] for a in axes),
                        src.offset, tuple(1 if a is None else src.repeats[a] for a in axes),
                        tuple((axes.index(a), i, n) for a, i, n in src.gathers))
    if src.gathers:
        raise LoweringError(op.op, prog.name, f"of a view {src} whose rows are picked by positions (index_select); "
                            f"apply {op.op} before the index_select instead", op.loc)
    if op.op == "repeat_interleave":
        axis, times = op.attrs["axis"], op.attrs["repeats"]
        strides = src.strides
        if dims_equal(src.shape[axis], 1) and src.repeats[axis] == 1:  # one element repeated: a broadcast
            strides = tuple(0 if a == axis else s for a, s in enumerate(src.strides))
        if isinstance(strides[axis], int) and strides[axis] == 0:
            times = 1  # an axis read at stride 0 reads one element however it repeats
        shape = tuple(product((d, op.attrs["repeats"])) if a == axis else d for a, d in enumerate(src.shape))
        return View(src.root, shape, strides, src.offset,
                    tuple(r * times if a == axis else r for a, r in enumerate(src.repeats)))
    if any(r != 1 for r in src.repeats):
        raise LoweringError(op.op, prog.name, f"of a view {src} whose axes repeat (repeat_interleave); apply "
                            f"{op.op} before the repeat instead", op.loc)
    if op.op == "slice":
        steps = op.attrs.get("strides") or (1,) * len(src.shape)
        offset = total([src.offset, *(product((a, s)) for a, s in zip(op.attrs["starts"], src.strides))])
        return View(src.root, tuple(op.attrs["sizes"]), tuple(product((s, k)) for s, k in zip(src.strides, steps)),
                    offset)
    if op.op == "split":  # part ``output``: the slice of its extent along the axis
        axis, shape = op.attrs["axis"], op.outputs[output].type.shape
        start = product((output, shape[axis], src.strides[axis]))
        return View(src.root, shape, src.strides, total([src.offset, start]))
    if op.op == "reshape":
        strides = _reshaped(src.shape, src.strides, op.outputs[0].type.shape)
        if strides is None:
            raise Regroup(LoweringError(op.op, prog.name, f"of a view {src} whose axes no strides can regroup into "
                                        f"{op.outputs[0].type.shape} (it would need a copy of a view whose rows repeat "
                                        "in runs or are read through positions, not compiled yet); reshape before "
                                        "the repeat or the gather instead",
                                        op.loc), src, op)
        return View(src.root, op.outputs[0].type.shape, strides, src.offset)
    raise AssertionError(op.op)  # pragma: no cover - callers pass view ops only


def plain_index(index: View) -> bool:
    """Whether ``index`` is a plain 1-D tensor of positions: one axis, from its start, none of its elements picked
    or repeated."""
    return (len(index.shape) == 1 and dims_equal(index.offset, 0) and not index.gathers
            and all(r == 1 for r in index.repeats))


def require_plain_index(function: str, op: Op, index: View) -> None:
    """Refuse (naming ``op`` in ``function``) an ``index`` of positions that is not a plain 1-D tensor
    (``plain_index``)."""
    if not plain_index(index):
        raise LoweringError(op.op, function, f"its index {index} is not a plain 1-D tensor; not compiled yet", op.loc)


def index_view(prog: Program, op: Op, src: View, index: View) -> View:
    """``index_select(x, index, dim)`` as a view of ``x``'s memory: axis ``dim`` indexed through ``index``'s
    positions (an embedding's rows at the token ids)."""
    dim = op.attrs["dim"]
    require_plain_index(prog.name, op, index)
    if src.gathers or src.repeats[dim] != 1:
        raise LoweringError(op.op, prog.name, f"of a view {src} whose axis {dim} is already picked or repeated; not "
                            "compiled yet", op.loc)
    shape = tuple(index.shape[0] if a == dim else d for a, d in enumerate(src.shape))
    return View(src.root, shape, src.strides, src.offset, src.repeats, ((dim, index, src.shape[dim]),))


def _unit_reshape(shape: tuple[Dim, ...], new: tuple[Dim, ...]) -> list[int | None] | None:
    """For a reshape of ``shape`` into ``new`` that only adds or drops axes of extent 1: each new axis's old axis
    (None for an added one); None for any other reshape."""
    old = [a for a, d in enumerate(shape) if not dims_equal(d, 1)]
    kept = [a for a, d in enumerate(new) if not dims_equal(d, 1)]
    if len(old) != len(kept) or any(not dims_equal(shape[o], new[k]) for o, k in zip(old, kept)):
        return None
    axes: list[int | None] = [None] * len(new)
    for o, k in zip(old, kept):
        axes[k] = o
    return axes


def _reshaped(shape: tuple[Dim, ...], strides: tuple[Dim, ...], new: tuple[Dim, ...]) -> tuple[Dim, ...] | None:
    """Strides for ``new`` over memory laid out as ``shape`` / ``strides``, or None where none exist.

    Axes of extent 1 are left aside (any stride serves them); the others are matched in groups of old and
    new axes with equal products. A group of old axes that is contiguous within itself (each stride the next
    one's times that one's extent) can be regrouped into any new axes of the same product, strided from its
    innermost stride.
    """
    old = [(d, s) for d, s in zip(shape, strides) if not dims_equal(d, 1)]
    wanted = [k for k, d in enumerate(new) if not dims_equal(d, 1)]
    out: list[Dim] = [0] * len(new)
    i = k = 0
    while k < len(wanted):
        if i >= len(old):
            return None
        group_old, group_new = [old[i]], [wanted[k]]
        i, k = i + 1, k + 1
        while not dims_equal(p_old := product(d for d, _ in group_old), p_new := product(new[n] for n in group_new)):
            take_old = _less(p_old, p_new)
            if take_old is None:
                return None
            if take_old and i < len(old):
                group_old.append(old[i])
                i += 1
            elif not take_old and k < len(wanted):
                group_new.append(wanted[k])
                k += 1
            else:
                return None
        for (_, s0), (d1, s1) in zip(group_old, group_old[1:]):
            if not dims_equal(s0, product((d1, s1))):
                return None
        inner = group_old[-1][1]
        for n, axis in enumerate(group_new):
            out[axis] = product((inner, *(new[m] for m in group_new[n + 1:])))
    return tuple(out) if i == len(old) else None


def _less(a: Dim, b: Dim) -> bool | None:
    """Whether the group of product ``a`` must grow to reach ``b`` (True) or ``b``'s to reach ``a`` (False);
    None where neither extent divides the other."""
    if isinstance(a, int) and isinstance(b, int):
        return a < b
    if dims_equal(product((floordiv(b, a), a)), b):
        return True
    if dims_equal(product((floordiv(a, b), b)), a):
        return False
    return None

"""argmax and topk along an axis other than the last, read through a transposed view.

A row-wise kernel picks along its rows. ``argmax(x, axis=a)`` is ``argmax`` along the last axis of ``x`` with axis
``a`` moved last (a transpose: a view, read through its strides, no copy); its result drops that axis either way, in
the same order. ``topk(x, k, axis=a)`` picks along the moved axis too, and its two results are transposed back,
their ``k`` picks returning to axis ``a``.
"""

from __future__ import annotations

from .program import Program, adopt_result, make_op, make_ops


def _moved_last(rank: int, axis: int) -> tuple[int, ...]:
    """The permutation that moves ``axis`` last, keeping the others in order."""
    return (*(i for i in range(rank) if i != axis), axis)


def _moved_back(rank: int, axis: int) -> tuple[int, ...]:
    """The permutation that moves the last axis back to ``axis`` (the inverse of ``_moved_last``)."""
    order = list(range(rank - 1))
    order.insert(axis, rank - 1)
    return tuple(order)


def picks_to_last_axis(prog: Program) -> Program:
    """``prog`` with each argmax and topk along an axis other than the last rewritten to pick along the last axis of
    a transposed view of its operand (topk's results transposed back)."""
    ops, prog.ops = prog.ops, []
    for op in ops:
        if op.op not in ("argmax", "topk") or op.attrs["axis"] == op.inputs[0].type.rank - 1:
            prog.ops.append(op)
            continue
        (x,) = op.inputs
        rank, axis = x.type.rank, op.attrs["axis"]
        moved = make_op(prog, "transpose", (x,), {"perm": _moved_last(rank, axis)}, op, "moved")
        if op.op == "argmax":
            make_op(prog, "argmax", (moved,), {**op.attrs, "axis": rank - 1}, op, "last")
            adopt_result(prog, op.outputs[0])
            continue
        picked = make_ops(prog, "topk", (moved,), {**op.attrs, "axis": rank - 1}, op, "last")
        for i, part in enumerate(picked):
            make_op(prog, "transpose", (part,), {"perm": _moved_back(rank, axis)}, op, f"back{i}")
            adopt_result(prog, op.outputs[i])
    return prog


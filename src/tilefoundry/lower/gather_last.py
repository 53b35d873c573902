"""Gathers and scatters along the last axis, moved to a leading one.

A row-wise kernel reads rows of elements one stride apart; positions read on the device index its leading axes
only (an embedding's rows at the token ids), and index_copy / index_add write or add whole rows. So an op that picks
along the last axis is rewritten to pick along a leading one:

- ``index_select(x, idx)`` along the last axis (``x[..., idx]``): ``x`` reshaped with a trailing axis of 1, gathered
  along the axis that was last (now a leading one, each row one element), copied into memory of its own (an
  identity cast: a row-wise kernel reading the gathered rows), and that copy reshaped back (contiguous: a view);
- ``repeat_interleave(x, r)`` along the last axis: ``x`` reshaped with a trailing axis of 1, repeated along that
  axis (one element read r times: a broadcast), copied into memory of its own and reshaped back;
- ``index_copy`` and ``index_add`` along the last axis: the same op along the axis before it, of ``x`` and the
  source with their last two axes swapped (views, read through their strides), the result swapped back (a view); a
  vector is first reshaped into a column.

One element a row is slow for long rows; it is correct.
"""

from __future__ import annotations

from typing import Any

from .program import Op, Program, Val, adopt_result, make_op


def gathers_to_leading_axes(prog: Program) -> Program:
    """``prog`` with each index_select, repeat_interleave, index_copy and index_add along the last axis rewritten as
    described in the module docstring."""
    ops, prog.ops = prog.ops, []
    for op in ops:
        x = op.inputs[0] if op.inputs else None
        axis = op.attrs.get("axis" if op.op == "repeat_interleave" else "dim")
        if (op.op not in ("index_select", "index_copy", "index_add", "repeat_interleave") or x is None
                or axis != x.type.rank - 1):
            prog.ops.append(op)
            continue
        if op.op == "index_select":
            _gather(prog, op, x)
        elif op.op == "repeat_interleave":
            _repeat(prog, op, x)
        else:
            _scatter(prog, op, x)
    return prog


def _gather(prog: Program, op: Op, x: Val) -> None:
    _column_picked(prog, op, x, "index_select", (op.inputs[1],), {"dim": op.attrs["dim"]})


def _repeat(prog: Program, op: Op, x: Val) -> None:
    _column_picked(prog, op, x, "repeat_interleave", (), {"repeats": op.attrs["repeats"], "axis": x.type.rank})


def _column_picked(prog: Program, op: Op, x: Val, pick: str, more: tuple[Val, ...], attrs: dict[str, Any]) -> None:
    """``op``'s result as ``pick`` (with operands ``more`` and ``attrs``) of ``x`` reshaped with a trailing axis of 1,
    copied into memory of its own (an identity cast) and reshaped back."""
    column = make_op(prog, "reshape", (x,), {"new_shape": (*x.type.shape, 1)}, op, "column")
    picked = make_op(prog, pick, (column, *more), attrs, op, "picked")
    copied = make_op(prog, "cast", (picked,), {"dtype": x.type.dtype}, op, "copied")
    make_op(prog, "reshape", (copied,), {"new_shape": op.outputs[0].type.shape}, op, "rows")
    adopt_result(prog, op.outputs[0])


def _scatter(prog: Program, op: Op, x: Val) -> None:
    _, index, source = op.inputs
    rank = x.type.rank
    if rank == 1:  # a vector: a column of one-element rows
        xs = make_op(prog, "reshape", (x,), {"new_shape": (x.type.shape[0], 1)}, op, "column")
        ss = make_op(prog, "reshape", (source,), {"new_shape": (source.type.shape[0], 1)}, op, "source_column")
        done = make_op(prog, op.op, (xs, index, ss), {**op.attrs, "dim": 0}, op, "rows")
        make_op(prog, "reshape", (done,), {"new_shape": x.type.shape}, op, "vector")
    else:
        perm = (*range(rank - 2), rank - 1, rank - 2)
        xs = make_op(prog, "transpose", (x,), {"perm": perm}, op, "swapped")
        ss = make_op(prog, "transpose", (source,), {"perm": perm}, op, "source_swapped")
        done = make_op(prog, op.op, (xs, index, ss), {**op.attrs, "dim": rank - 2}, op, "rows")
        make_op(prog, "transpose", (done,), {"perm": perm}, op, "back")
    adopt_result(prog, op.outputs[0])


"""``index_select`` along the last axis, copied into rows of its own.

A row-wise kernel reads rows of elements one stride apart; positions read on the device index its leading axes
only (an embedding's rows at the token ids). A gather along the last axis (``x[..., idx]``) is rewritten so that the
gathered axis leads: ``x`` reshaped with a trailing axis of 1, gathered along the axis that was last (now a leading
one, each row one element), copied into memory of its own (an identity cast: a row-wise kernel reading the gathered
rows), and that copy reshaped back (contiguous: a view). One element a row is slow for long gathers; it is correct.
"""

from __future__ import annotations

from .program import Program, make_op


def gathers_to_leading_axes(prog: Program) -> Program:
    """``prog`` with each index_select along the last axis rewritten as described in the module docstring."""
    ops, prog.ops = prog.ops, []
    for op in ops:
        x = op.inputs[0] if op.inputs else None
        if op.op != "index_select" or x is None or op.attrs["dim"] != x.type.rank - 1:
            prog.ops.append(op)
            continue
        index = op.inputs[1]
        (out,) = op.outputs
        column = make_op(prog, "reshape", (x,), {"new_shape": (*x.type.shape, 1)}, op, "column")
        picked = make_op(prog, "index_select", (column, index), {"dim": op.attrs["dim"]}, op, "picked")
        copied = make_op(prog, "cast", (picked,), {"dtype": x.type.dtype}, op, "copied")
        make_op(prog, "reshape", (copied,), {"new_shape": out.type.shape}, op, "rows")
        last = prog.ops[-1]
        last.outputs = (out,)
        out.producer = last
    return prog

"""Composite ops (rms_norm, layer_norm, softmax) rewritten as the primitive ops they compute.

Each expansion computes in the op's compute dtype and follows the evaluator's order of operations,
so the compiled kernel rounds where the reference rounds, but for softmax's normalisation: one
reciprocal of the row's sum and a multiply per element, not a division per element. Every primitive
is typed by its own type rule and keeps the composite's source line.
"""

from __future__ import annotations

from collections.abc import Callable

from ..ir.types.dtype import DType, f32
from .opmap import is_16_bit_float
from .program import Op, Program, Val, make_op


def compute_dtype(op: Op) -> DType:
    """The dtype a composite computes in: its ``compute_dtype`` attribute, else f32."""
    dt = op.attrs.get("compute_dtype")
    return dt if isinstance(dt, DType) else f32


def _cast(prog: Program, v: Val, dtype: DType, like: Op, role: str) -> Val:
    if v.type.dtype == dtype:
        return v
    return make_op(prog, "cast", (v,), {"dtype": dtype}, like, role)


def _const(prog: Program, value: float, dtype: DType, like: Op, role: str) -> Val:
    return make_op(prog, "constant", (), {"value": value, "dtype": dtype}, like, role)


def _rms_norm(prog: Program, op: Op) -> Val:
    x, w = op.inputs
    cd = compute_dtype(op)
    last = x.type.rank - 1
    xf = _cast(prog, x, cd, op, "x")
    sq = make_op(prog, "square", (xf,), {}, op, "square")
    ms = make_op(prog, "reduce", (sq,), {"axes": (last,), "keepdim": True, "kind": "mean"}, op, "mean_square")
    eps = _const(prog, op.attrs["eps"], cd, op, "eps")
    var = make_op(prog, "add", (ms, eps), {}, op, "plus_eps")
    inv = make_op(prog, "rsqrt", (var,), {}, op, "rstd")
    normed = make_op(prog, "mul", (xf, inv), {}, op, "normed")
    # Rounded to the weight's dtype before the multiply (as Hugging Face's Llama / Qwen RMSNorm), which
    # multiplies in the weight's dtype; the product is returned in x's.
    rounded = _cast(prog, normed, w.type.dtype, op, "rounded")
    y = make_op(prog, "mul", (rounded, w), {}, op, "scaled")
    return _cast(prog, y, x.type.dtype, op, "out")


def _layer_norm(prog: Program, op: Op) -> Val:
    """Along any axis: its reductions keep that axis, and a weight and bias along another axis than the last are
    reshaped to stand along it (``(n, 1, ...)``), as the evaluator broadcasts them."""
    x, w, b = op.inputs
    cd = compute_dtype(op)
    axis = op.attrs["axis"]
    xf = _cast(prog, x, cd, op, "x")
    mean = make_op(prog, "reduce", (xf,), {"axes": (axis,), "keepdim": True, "kind": "mean"}, op, "mean")
    xc = make_op(prog, "sub", (xf, mean), {}, op, "centred")
    sq = make_op(prog, "square", (xc,), {}, op, "square")
    var = make_op(prog, "reduce", (sq,), {"axes": (axis,), "keepdim": True, "kind": "mean"}, op, "var")
    eps = _const(prog, op.attrs["eps"], cd, op, "eps")
    inv = make_op(prog, "rsqrt", (make_op(prog, "add", (var, eps), {}, op, "plus_eps"),), {}, op, "rstd")
    normed = make_op(prog, "mul", (xc, inv), {}, op, "normed")
    scaled = make_op(prog, "mul", (normed, _along(prog, _cast(prog, w, cd, op, "weight"), x, axis, op)), {}, op,
                     "scaled")
    y = make_op(prog, "add", (scaled, _along(prog, _cast(prog, b, cd, op, "bias"), x, axis, op)), {}, op, "shifted")
    return _cast(prog, y, x.type.dtype, op, "out")


def _along(prog: Program, v: Val, x: Val, axis: int, like: Op) -> Val:
    """A vector along ``axis`` of ``x`` as it broadcasts against ``x``: itself along the last axis, else reshaped to
    ``(n, 1, ...)`` with an axis of 1 for each axis after ``axis``."""
    after = x.type.rank - 1 - axis
    if after == 0:
        return v
    return make_op(prog, "reshape", (v,), {"new_shape": (v.type.shape[0], *(1,) * after)}, like, f"{v.name}_along")


def _softmax(prog: Program, op: Op) -> Val:
    """Along any axis: its reductions keep that axis (of extent 1), broadcast back against x. Along the last, a
    row-wise kernel; along another, the reductions fold rows (lower/reduce_axis.py) and the rest runs row-wise."""
    (x,) = op.inputs
    cd = compute_dtype(op)
    axis = op.attrs["axis"]
    xf = _cast(prog, x, cd, op, "x")
    mx = make_op(prog, "reduce", (xf,), {"axes": (axis,), "keepdim": True, "kind": "max"}, op, "max")
    shifted = make_op(prog, "sub", (xf, mx), {}, op, "shifted")
    # The exponentials feed only the result: when that is a 16-bit float they may take the faster form whose
    # error is far below its rounding (opmap.ROUNDED_TAGS).
    e = make_op(prog, "exp", (shifted,), {"rounded": True} if is_16_bit_float(x.type.dtype) else {}, op, "exp")
    total = make_op(prog, "reduce", (e,), {"axes": (axis,), "keepdim": True, "kind": "sum"}, op, "sum")
    # One division per row, then a multiply per element: within an ulp or two of dividing each element
    # (the compute dtype's rounding), at a fraction of the cost of a division per element.
    inv = make_op(prog, "div", (_const(prog, 1.0, cd, op, "one"), total), {}, op, "inv_sum")
    y = make_op(prog, "mul", (e, inv), {}, op, "probs")
    return _cast(prog, y, x.type.dtype, op, "out")


EXPANSIONS: dict[str, Callable[[Program, Op], Val]] = {
    "rms_norm": _rms_norm,
    "layer_norm": _layer_norm,
    "softmax": _softmax,
}


def expand_composites(prog: Program) -> Program:
    """The program with every composite op replaced by its primitives (its result keeps its name)."""
    ops, prog.ops = prog.ops, []
    replaced: dict[int, Val] = {}
    for op in ops:
        op.inputs = tuple(replaced.get(id(v), v) for v in op.inputs)
        expand = EXPANSIONS.get(op.op)
        if expand is None:
            prog.ops.append(op)
            continue
        result = expand(prog, op)
        (out,) = op.outputs
        if result.producer is not None and result.type == out.type:
            prog.namer.taken.discard(result.name)
            result.name = out.name
        replaced[id(out)] = result
    prog.outputs = tuple(replaced.get(id(v), v) for v in prog.outputs)
    return prog

"""Attention recognised: the ops the families write for it, replaced by one ``attention`` op.

The pattern, as ``models/decoder.py`` writes it (each intermediate read by the next op alone, none returned)::

    scores = matmul(q, keys)                  # q (B, M, D) or (M, D); keys (B, D, N) or (D, N)
    scaled = scores * c   (or c * scores, scores / c; optional, c a scalar constant)
    masked = where(visible, scaled, -inf)     (or where(hidden, -inf, scaled); optional)
    probs  = softmax(masked, axis=-1)         (computed in f32)
    out    = matmul(probs, vals)              # vals (B, N, Dv) or (N, Dv); accumulated in f32

where ``visible = cmp(a, b)`` compares key positions ``(1, N)`` with query positions ``(M, 1)`` (either way
round: ``kv_pos <= pos_ids`` is the causal mask). The result is ``attention(q, keys, vals[, qpos[, kpos]])``
with the scale, the comparison (normalised to ``cmp(kpos[n], qpos[m])``) and the dtypes as attributes; key
positions that are ``arange(N)`` (a cache in position order) are not read (``key_index``: key n's position is
n, and a causal mask bounds the keys scanned by the largest query position, read on the device); the
ops it replaces that nothing else reads are dropped. ``attention.py`` lowers it as one fused kernel (online
softmax: the score matrix never reaches memory) and a combine. Anything else is left as written and
compiled op by op.
"""

from __future__ import annotations

import math
from collections import Counter

from ..ir.types.dim import Dim, dims_equal
from ..ir.types.dtype import f32
from .program import Op, Program, Val

# cmp(b, a) == MIRRORED[cmp](a, b); not cmp(a, b) == NEGATED[cmp](a, b).
MIRRORED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}
NEGATED = {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt", "eq": "ne", "ne": "eq"}


def fuse_attention(prog: Program) -> Program:
    """``prog`` with every attention pattern (see the module docstring) replaced by an ``attention`` op."""
    while True:
        found = _find(prog)
        if found is None:
            return prog
        chain, fused = found
        at = prog.ops.index(chain[-1])
        prog.ops[at] = fused
        fused.outputs[0].producer = fused
        for op in chain[:-1]:
            prog.ops.remove(op)
        _drop_unread(prog, [v.producer for op in chain for v in op.inputs if v.producer is not None])


def _uses(prog: Program) -> Counter[int]:
    uses: Counter[int] = Counter()
    for op in prog.ops:
        for v in op.inputs:
            uses[id(v)] += 1
    for v in prog.outputs:
        uses[id(v)] += 2  # a returned value is never fused away
    return uses


def _scalar_constant(v: Val) -> float | None:
    op = v.producer
    if op is None or op.op != "constant" or v.type.rank != 0:
        return None
    return float(op.attrs["value"])


def _find(prog: Program) -> tuple[list[Op], Op] | None:
    uses = _uses(prog)
    for out_op in prog.ops:
        found = _match(out_op, uses)
        if found is not None:
            return found
    return None


def _match(out_op: Op, uses: Counter[int]) -> tuple[list[Op], Op] | None:
    """The ops of the pattern ending at ``out_op`` and the fused op, or None."""
    if out_op.op != "matmul" or out_op.attrs.get("acc_dtype") != f32:
        return None
    probs, vals = out_op.inputs
    soft = _only_reader_input(probs, "softmax", uses)
    if soft is None or soft.attrs.get("axis") not in (-1, probs.type.rank - 1) or \
            soft.attrs.get("compute_dtype", f32) != f32:
        return None
    chain = [soft, out_op]
    x = soft.inputs[0]
    cmp = qpos = kpos = None
    where = _only_reader_input(x, "where", uses)
    if where is not None:
        mask, a, b = where.inputs
        fill_a, fill_b = _scalar_constant(a), _scalar_constant(b)
        if fill_b == -math.inf:
            x, negate = a, False
        elif fill_a == -math.inf:
            x, negate = b, True
        else:
            return None
        visible = _positions(mask)
        if visible is None:
            return None
        cmp, qpos, kpos = visible
        if negate:
            cmp = NEGATED[cmp]
        chain.insert(0, where)
    scale: tuple[str, float] | None = None
    scaled = _only_reader_input(x, ("mul", "div"), uses)
    if scaled is not None:
        s, c = scaled.inputs
        if scaled.op == "mul" and _scalar_constant(s) is not None:
            s, c = c, s
        value = _scalar_constant(c)
        if value is None or uses[id(s)] != 1:
            return None
        scale = (scaled.op, value)
        chain.insert(0, scaled)
        x = s
    mm = x.producer
    if mm is None or mm.op != "matmul" or mm.attrs.get("acc_dtype") != f32 or uses[id(x)] != 1:
        return None
    chain.insert(0, mm)
    q, keys = mm.inputs
    if not _shapes_fit(q, keys, vals, x) or (qpos is not None and not _positions_fit(qpos, kpos, x)):
        return None
    key_index = kpos is not None and _key_indices(kpos, keys.type.shape[-1])
    inputs = (q, keys, vals) if cmp is None else (q, keys, vals, qpos) if key_index else (q, keys, vals, qpos, kpos)
    attrs = {"scale": scale, "cmp": cmp, "key_index": key_index, "acc_dtype": f32}
    fused = Op("attention", inputs, out_op.outputs, attrs, out_op.loc, out_op.meshes, "attention")
    return chain, fused


def _only_reader_input(v: Val, kinds: str | tuple[str, ...], uses: Counter[int]) -> Op | None:
    """The op producing ``v`` if it is one of ``kinds`` and ``v`` is read once (by the op after it)."""
    op = v.producer
    kinds = (kinds,) if isinstance(kinds, str) else kinds
    if op is None or op.op not in kinds or uses[id(v)] != 1 or len(op.outputs) != 1:
        return None
    return op


def _positions(mask: Val) -> tuple[str, Val, Val] | None:
    """``(cmp, qpos, kpos)`` where ``mask`` is ``cmp(kpos, qpos)`` of key positions (1, N) and query positions
    (M, 1), integer-valued (either order; the comparison mirrored to that form)."""
    op = mask.producer
    if op is None or op.op not in MIRRORED or len(op.inputs) != 2:
        return None
    a, b = op.inputs
    if any(v.type.rank != 2 or not (v.type.dtype.is_int) for v in (a, b)):
        return None
    if dims_equal(a.type.shape[0], 1) and dims_equal(b.type.shape[1], 1):
        return op.op, b, a
    if dims_equal(b.type.shape[0], 1) and dims_equal(a.type.shape[1], 1):
        return MIRRORED[op.op], a, b
    return None


def _key_indices(kpos: Val, keys: Dim) -> bool:
    """Whether the key positions are the keys' own indices, ``arange(N)`` (reshaped to (1, N)): the keys a cache
    in position order, whose causal mask bounds the keys scanned by the largest query position."""
    op = kpos.producer
    if op is not None and op.op in ("reshape", "expand_dims") and len(op.inputs) == 1:
        op = op.inputs[0].producer
    if op is None or op.op != "arange" or op.attrs.get("step", 1) != 1:
        return False
    return dims_equal(op.attrs["start"], 0) and dims_equal(op.attrs["end"], keys)


def _shapes_fit(q: Val, keys: Val, vals: Val, scores: Val) -> bool:
    """q (B, M, D), keys (B, D, N), vals (B, N, Dv) (or all without B): one batch axis at most, no broadcast."""
    rank = q.type.rank
    if rank not in (2, 3) or keys.type.rank != rank or vals.type.rank != rank:
        return False
    if rank == 3 and not (dims_equal(q.type.shape[0], keys.type.shape[0])
                          and dims_equal(q.type.shape[0], vals.type.shape[0])):
        return False
    d, n = keys.type.shape[-2:]
    return (dims_equal(q.type.shape[-1], d) and dims_equal(vals.type.shape[-2], n)
            and q.type.dtype == keys.type.dtype == vals.type.dtype == scores.type.dtype)


def _positions_fit(qpos: Val, kpos: Val, scores: Val) -> bool:
    m, n = scores.type.shape[-2:]
    return dims_equal(qpos.type.shape[0], m) and dims_equal(kpos.type.shape[1], n)


def _drop_unread(prog: Program, candidates: list[Op]) -> None:
    """Drop those of ``candidates`` (the producers of what the fused ops read), and then theirs, whose results
    nothing reads or returns any more: what only the replaced ops read (the mask, the scale)."""
    while candidates:
        uses = _uses(prog)
        dead = [op for op in candidates if op in prog.ops and all(uses[id(v)] == 0 for v in op.outputs)]
        if not dead:
            return
        for op in dead:
            prog.ops.remove(op)
        candidates = [v.producer for op in dead for v in op.inputs if v.producer is not None]

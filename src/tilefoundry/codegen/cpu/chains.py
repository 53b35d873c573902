"""Chains of elementwise ops on the CPU target, run as one call: the unary op that reads only the result of the
elementwise call just before it is applied inside that call (``OpCall.then``, ``ops::then``), its buffer skipped.

On the CPU each runtime call is a pass over the row held in the CTA's register buffers (a host thread's stack),
so a softmax written as subtract, exponentiate, sum, scale and cast makes a pass per op where torch makes three;
folding each unary op into the call before it takes two of them away (subtract with exponentiate, scale with
the cast to the output). On CUDA a thread's elements stay in its registers from op to op, so nvcc fuses the
ops already and the calls stay as they are.

A call B folds into the call A before it when B is a unary op whose one operand is A's result ``t``, ``t`` is a
register buffer of 32- or 64-bit floats (so storing it rounded nothing: B reads exactly what A computed), and
the memory ``t`` lives in is left as it would have been: either B writes that same memory through ``t``'s
layout (an op in place, the memory then holding B's results either way), or no later statement reads that
memory at all (through ``t`` or any view sharing it).

A reduction folds the same way into the elementwise call whose result it reads (``OpCall.fold``,
``ops::fold``): a reduce call R right after call A, R's one operand A's result ``t``, ``t`` a register buffer of
32- or 64-bit floats, and A folding no reduction yet. A still stores ``t`` (later statements may read it) and folds
each result into R's accumulators as it stores it, so the pass R makes over ``t`` goes away: a softmax's sum runs
in the pass of its exponential, and in bf16 the max of the row in the pass casting it to f32. The runtime folds in
the order ``ops::reduce`` folds, so R's result is the same. No unary op then folds into A (it would change what A
stores, and so what R reduces).
"""

from __future__ import annotations

import dataclasses

from ...ir.types.storage import Storage
from ...tir.buffer import Buffer
from ...tir.function import PrimFunc
from ...tir.stmt import AliasView, Alloc, MeshScope, OpCall, RowGuard, RowLoop, Stmt

ELEMENTWISE = frozenset({"unary", "binary", "ternary"})


def fuse_chains(fn: PrimFunc) -> list[Stmt]:
    """``fn``'s body with each chain of elementwise calls that may run as one (module docstring) made one call,
    and the declarations of the buffers no call then reads or writes left out."""
    if not fn.body:
        return fn.body
    flat = _flatten(fn.body)
    body = _fuse(fn.body, _roots(flat), flat, {id(s): i for i, s in enumerate(flat)})
    return _without_declarations(body, _used(_flatten(body)))


def _used(flat: list[Stmt]) -> set[int]:
    """The buffers (ids) a statement other than a declaration reads or writes, and the memory they view: an
    ``AliasView`` comes after the declaration of its source, so one pass from the end follows every chain."""
    used = {id(b) for s in flat if not isinstance(s, (Alloc, AliasView)) for b in _buffers_of(s)}
    for s in reversed(flat):
        if isinstance(s, AliasView) and id(s.buffer) in used:
            used.add(id(s.source))
    return used


def _without_declarations(body: list[Stmt], used: set[int]) -> list[Stmt]:
    """``body`` without the Alloc and AliasView statements of buffers outside ``used``."""
    out: list[Stmt] = []
    for s in body:
        if isinstance(s, (Alloc, AliasView)) and id(s.buffer) not in used:
            continue
        if isinstance(s, (RowLoop, RowGuard, MeshScope)):
            s = dataclasses.replace(s, body=_without_declarations(s.body, used))
        out.append(s)
    return out


def _roots(flat: list[Stmt]) -> dict[int, Buffer]:
    """Each buffer's memory: the buffer it views (``AliasView``), followed to the one that owns it."""
    source: dict[int, Buffer] = {}
    for s in flat:
        if isinstance(s, AliasView):
            source[id(s.buffer)] = s.source
    roots: dict[int, Buffer] = {}

    def root(b: Buffer) -> Buffer:
        while id(b) in source:
            b = source[id(b)]
        return b

    for s in flat:
        for b in _buffers_of(s):
            roots[id(b)] = root(b)
    return roots


def _flatten(body: list[Stmt]) -> list[Stmt]:
    """Every statement in program order, nested bodies in place."""
    out: list[Stmt] = []
    for s in body:
        out.append(s)
        if isinstance(s, (RowLoop, RowGuard, MeshScope)):
            out += _flatten(s.body)
    return out


def _reads(s: Stmt) -> list[Buffer]:
    """The buffers a statement reads."""
    if isinstance(s, OpCall):
        read = [o for o in s.operands if isinstance(o, Buffer)]
        if s.epilogue is not None:
            read += [o for step in s.epilogue.steps for o in step.operands if isinstance(o, Buffer)]
        if s.prologue is not None:
            read.append(s.prologue.weight)
        if s.fold is not None:
            read += _reads(s.fold)
        return read
    if isinstance(s, AliasView):
        return [s.source]
    return []


def _buffers_of(s: Stmt) -> list[Buffer]:
    out = _reads(s)
    if isinstance(s, OpCall):
        out += [s.out, *s.more_out]
        if s.fold is not None:
            out.append(s.fold.out)
    if isinstance(s, AliasView):
        out.append(s.buffer)
    return out


def _folds(a: OpCall, b: Stmt, roots: dict[int, Buffer], later: list[Stmt]) -> bool:
    """Whether call ``b`` may run inside call ``a`` (module docstring); ``later``: the statements after ``b``."""
    if not (isinstance(b, OpCall) and b.family == "unary" and a.family in ELEMENTWISE) or a.fold is not None:
        return False
    t = a.out
    if b.operands != (t,) or not _exact(a):
        return False
    memory = roots.get(id(t), t)
    if roots.get(id(b.out), b.out) is memory:
        return b.out.layout == t.layout
    return all(roots.get(id(r), r) is not memory for s in later for r in _reads(s))


def _exact(a: OpCall) -> bool:
    """Whether what call ``a`` stores is exactly what it computed, one result in a register buffer: 32- or 64-bit
    floats."""
    t = a.out
    return not a.more_out and t.storage is Storage.rmem and t.dtype.name in ("f32", "f64")


def _reduces(a: OpCall, b: Stmt) -> bool:
    """Whether reduce call ``b`` may run inside elementwise call ``a`` (module docstring)."""
    return (isinstance(b, OpCall) and b.family == "reduce" and a.family in ELEMENTWISE and a.fold is None
            and b.operands == (a.out,) and b.workspace is None and _exact(a))


def _fuse(body: list[Stmt], roots: dict[int, Buffer], flat: list[Stmt], place: dict[int, int]) -> list[Stmt]:
    """``body`` with each call folded into the one before it where it may be; ``flat``: the whole body's
    statements in order, ``place``: each one's index there."""
    out: list[Stmt] = []
    for s in body:
        if isinstance(s, (RowLoop, RowGuard, MeshScope)):
            s = dataclasses.replace(s, body=_fuse(s.body, roots, flat, place))
        prev = out[-1] if out else None
        if isinstance(prev, OpCall) and isinstance(s, OpCall) and _folds(prev, s, roots, flat[place[id(s)] + 1:]):
            out[-1] = dataclasses.replace(prev, out=s.out, then=(*prev.then, s.tag, *s.then))
            continue
        if isinstance(prev, OpCall) and _reduces(prev, s):
            out[-1] = dataclasses.replace(prev, fold=s)
            continue
        out.append(s)
    return out


"""What an integer input of a checked callable feeds, read from the IR, and values valid for it.

An arbitrary integer is a valid input only where the IR does nothing with it but arithmetic. Where it indexes,
it must lie within the axis it indexes; where it is a position, it must lie within the rotary table and the
cache, and the positions a causal mask compares must leave every query row a key it may see (a row that sees
none is all ``-inf`` before its softmax: NaN). The IR says which, op by op, through views (reshape, transpose,
cast, placement) and calls (a sibling ``@func``, a child's function):

=====================================  ===================  ================================================
use in the IR                          role                 drawn
=====================================  ===================  ================================================
``index_select`` / ``index_add`` /     index                uniform in ``[0, N)``, N the extent of the axis
``index_copy`` index                                        it indexes (token ids: the vocabulary)
``rope(..., pos_ids)``                 position             the last S of the positions held, ``P-S..P-1``
ordering compare with a position       held position        the positions held after the step, ``0..P-1``
``cache_update(cache, at, n, new)``    cache position /     ``at = P - S`` and ``n = S``: the new entries,
                                       cache count          written after the held ones
=====================================  ===================  ================================================

S is the count of new positions (the extent of the rope positions, else of the entries a cache write takes),
P the count held after the step (the extent of the held positions, at least S): one causal step, whose
queries each see key 0. Every value is clamped into what its consumer accepts (a position below the rotary
table's rows, a write inside the cache). An integer the IR gives no such use stays uniform in ``--int-range``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch

from ..ir.core.function import Function
from ..ir.types.dim import Dim, evaluate_dim
from ..ir.types.tensor_type import TensorType

__all__ = ["IntPlan", "IntUse", "int_uses"]

# Ops whose result is its first operand's elements, rearranged or retyped: a use of the result is a use of it.
_VIEWS = frozenset({"reshape", "transpose", "cast", "local", "reshard"})
_ORDERINGS = frozenset({"lt", "le", "gt", "ge"})
_INDEXING = frozenset({"index_select", "index_add", "index_copy"})

# When one integer has several uses, the one that decides its values (positions bind more than an index).
_PRECEDENCE = ("cache_at", "cache_count", "position", "held", "index")


@dataclass(frozen=True)
class IntUse:
    """One use of an integer activation in the IR.

    Attributes:
        kind: ``index``, ``position``, ``held`` (a position a causal mask compares with the query positions),
            ``cache_at`` (where a cache write starts) or ``cache_count`` (how many entries it writes).
        extent: index: the extent of the axis indexed; position: the rotary table's rows; cache_at: the
            cache's length. None for the others.
        new: cache_at / cache_count: the length of the entries offered to the write (``new``'s axis 1).
        where: the op and the function it is in, for the report (``index_select in embed``).
    """

    kind: str
    extent: Dim | None = None
    new: Dim | None = None
    where: str = ""


def int_uses(fn: Function) -> dict[str, list[IntUse]]:
    """The uses of every integer activation of ``fn`` (by parameter name), its callees' included."""
    return _uses(fn, set())


def _uses(fn: Function, active: set[int]) -> dict[str, list[IntUse]]:
    if id(fn) in active:  # a recursive call graph: what the outer call found is all there is
        return {}
    active = active | {id(fn)}
    if fn.variants:
        merged: dict[str, list[IntUse]] = {}
        for variant in fn.variants:
            for name, found in _uses(variant, active).items():
                merged.setdefault(name, []).extend(u for u in found if u not in merged.get(name, []))
        return merged
    graph = fn.graph
    origin: dict[int, str] = {id(v): v.param for v in graph.params if v.param is not None and v.dtype.is_int}
    uses: dict[str, list[IntUse]] = {}
    compared: list[tuple[str, str]] = []

    def add(value: object, use: IntUse) -> None:
        name = origin.get(id(value))
        if name is not None and use not in uses.setdefault(name, []):
            uses[name].append(use)

    for node in graph.nodes:
        op, ins = node.op, node.inputs
        if op in _VIEWS and ins and id(ins[0]) in origin:
            for out in node.outputs:
                if out.dtype.is_int:
                    origin[id(out)] = origin[id(ins[0])]
        elif op in _INDEXING and len(ins) >= 2:
            table = ins[0].type
            axis = int(node.attrs.get("dim", 0)) % max(table.rank, 1)
            add(ins[1], IntUse("index", table.shape[axis] if table.rank else None, where=f"{op} in {fn.name}"))
        elif op == "rope" and len(ins) == 5:
            add(ins[4], IntUse("position", ins[2].type.shape[0], where=f"rope in {fn.name}"))
        elif op == "cache_update" and len(ins) == 4:
            cache, new = ins[0].type, ins[3].type
            add(ins[1], IntUse("cache_at", cache.shape[1], new.shape[1], where=f"cache_update in {fn.name}"))
            add(ins[2], IntUse("cache_count", None, new.shape[1], where=f"cache_update in {fn.name}"))
        elif op in _ORDERINGS and len(ins) == 2:
            a, b = origin.get(id(ins[0])), origin.get(id(ins[1]))
            if a is not None and b is not None and a != b:
                compared.append((a, b))
        elif op in ("call", "call_module") and node.callee is not None:
            callee = node.callee
            params = callee.params if op == "call" else callee.activations
            inner = _uses(callee, active)
            for param, value in zip(params, ins):
                for use in inner.get(param.name, ()):
                    add(value, use)
    for a, b in compared:
        for held, query in ((a, b), (b, a)):
            kinds = {u.kind for u in uses.get(query, ())}
            if "position" in kinds and not {u.kind for u in uses.get(held, ())} & {"position", "cache_at"}:
                use = IntUse("held", where=f"causal mask in {fn.name}")
                if use not in uses.setdefault(held, []):
                    uses[held].append(use)
    return uses


def _deciding(uses: Sequence[IntUse]) -> IntUse:
    return min(uses, key=lambda u: _PRECEDENCE.index(u.kind))


@dataclass
class IntPlan:
    """Valid values for the integer inputs of one checked callable: one causal step, indices within extents.

    Built from each parameter's uses (``uses``: name -> its uses, from :func:`int_uses` of the function whose
    activation it is) and the DimVar extents; ``draw`` gives the value of one parameter.
    """

    uses: Mapping[str, Sequence[IntUse]]
    dims: Mapping[str, int]
    types: Mapping[str, TensorType]
    new: int = field(init=False)
    held: int = field(init=False)

    def __post_init__(self) -> None:
        counts: dict[str, list[int]] = {}
        for name, found in self.uses.items():
            kind = _deciding(found).kind
            if kind in ("position", "held"):
                counts.setdefault(kind, []).append(self._numel(name))
            elif kind in ("cache_at", "cache_count"):
                news = [self._extent(u.new) for u in found if u.new is not None]
                counts.setdefault("written", []).extend(news)
        new = min(counts.get("position") or counts.get("written") or counts.get("held") or [1])
        self.new = max(new, 0)
        self.held = max([self.new, *counts.get("held", [])])

    def _extent(self, dim: Dim | None) -> int:
        return int(evaluate_dim(dim, self.dims)) if dim is not None else 0

    def _numel(self, name: str) -> int:
        return math.prod(self.types[name].concrete_shape(self.dims))

    def covers(self, name: str) -> bool:
        """Whether the IR tells how ``name``'s values are used (else it is drawn in the integer range)."""
        return bool(self.uses.get(name)) and name in self.types and self.types[name].dtype.is_int

    def draw(self, name: str, gen: torch.Generator) -> torch.Tensor:
        """A CPU tensor of ``name``'s type holding values valid for what it feeds."""
        ty = self.types[name]
        shape = ty.concrete_shape(self.dims)
        n = math.prod(shape)
        found = self.uses[name]
        use = _deciding(found)
        if use.kind == "index":
            bound = min(self._extent(u.extent) for u in found if u.kind == "index")
            values = torch.randint(0, max(bound, 1), shape, generator=gen)
        elif use.kind == "position":
            rows = min(self._extent(u.extent) for u in found if u.kind in ("position", "index"))
            start = max(0, min(self.held - n, rows - n))
            values = torch.arange(start, start + n).reshape(shape)
        elif use.kind == "held":
            values = torch.arange(n).reshape(shape)
        else:
            count, at = self._write()
            values = torch.full(shape, at if use.kind == "cache_at" else count)
        return values.to(ty.dtype.torch_dtype)

    def _write(self) -> tuple[int, int]:
        """(count, position) of the cache writes: the new entries, after the held ones, inside every cache."""
        writes = [u for found in self.uses.values() for u in found if u.kind in ("cache_at", "cache_count")]
        count = min([self.new, *(self._extent(u.new) for u in writes if u.new is not None)])
        limit = min([self._extent(u.extent) for u in writes if u.kind == "cache_at"] or [count])
        count = max(0, min(count, limit))
        at = max(0, min(self.held - self.new, limit - count))
        return count, at

    def describe(self) -> list[str]:
        """One phrase per covered parameter, for the report's header (``ids: index in [0, 11) (index_select in
        embed)``)."""
        out = []
        for name in self.uses:
            if not self.covers(name):
                continue
            found = self.uses[name]
            use = _deciding(found)
            if use.kind == "index":
                bound = min(self._extent(u.extent) for u in found if u.kind == "index")
                what = f"index in [0, {bound})"
            elif use.kind == "position":
                what = f"the {self.new} new position(s) of {self.held} held"
            elif use.kind == "held":
                what = f"the {self.held} position(s) held"
            else:
                count, at = self._write()
                what = f"cache write at {at}" if use.kind == "cache_at" else f"cache write of {count}"
            out.append(f"{name}: {what} ({use.where})")
        return out

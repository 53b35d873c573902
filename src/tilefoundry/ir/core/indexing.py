"""Indexing a traced value: ``x[:, :K]``, ``x[..., a:b]``, ``x[:, i]``, ``x[None]``, recorded as slice + reshape.

Static bounds follow Python's rules (negative bounds count from the end, out-of-range slice bounds clamp,
an out-of-range int index is an IndexError). On an axis whose extent is symbolic (a DimVar expression) no
clamping can be recorded, so every bound must provably lie inside the axis for each extent its DimVars
admit (against the axis's lower bound), else the index is refused. A traced (data-dependent) index is
refused in favour of ``tf.index_select``; steps are positive ints.
"""

from __future__ import annotations

import builtins
from typing import Any

from ..types.dim import Dim, DimExpr, dim_range, floordiv, provably_nonnegative
from .errors import IRIndexError, IRTypeError
from .graph import Value
from .source import user_source

__all__ = ["index_value"]


def _key_text(key: Any) -> str:
    items = key if isinstance(key, tuple) else (key,)

    def one(it: Any) -> str:
        if it is Ellipsis:
            return "..."
        if it is None:
            return "None"
        if isinstance(it, builtins.slice):
            parts = ["" if v is None else str(v) for v in (it.start, it.stop, it.step)]
            text = f"{parts[0]}:{parts[1]}"
            return text + (f":{parts[2]}" if it.step is not None else "")
        if isinstance(it, Value):
            return "<tensor>"
        return repr(it)

    return f"x[{', '.join(one(it) for it in items)}]"


def _is_bound(v: Any) -> bool:
    return v is None or (isinstance(v, (int, DimExpr)) and not isinstance(v, bool))


def _as_int(it: Any) -> Any:
    """An integer-like index or slice bound (numpy ints, ...) as a Python int; anything else unchanged."""
    if isinstance(it, builtins.slice):
        return builtins.slice(_as_int(it.start), _as_int(it.stop), _as_int(it.step))
    if isinstance(it, (int, bool, Value, DimExpr)) or it is None or it is Ellipsis:
        return it
    index = getattr(type(it), "__index__", None)
    if index is None or type(it).__module__.startswith("torch"):
        return it
    return int(index(it))


def index_value(x: Value, key: Any) -> Value:
    """``x[key]`` recorded in the active trace: one slice (when any axis is narrowed) and one reshape (when an
    int index drops an axis or None adds one). ``x[...]`` / ``x[:]`` record nothing and return ``x``."""
    from .tracer import emit

    text = _key_text(key)
    loc = user_source()

    def refuse(reason: str, exc: type[IRTypeError] = IRTypeError) -> IRTypeError:
        return exc("slice", [x.type], f"{text}: {reason}", loc)

    items = [_as_int(it) for it in (key if isinstance(key, tuple) else (key,))]
    for it in items:
        if isinstance(it, Value):
            raise refuse("a traced (data-dependent) index cannot be sliced statically; gather with "
                         "tf.index_select(x, index, dim)")
        if isinstance(it, builtins.slice):
            if not all(_is_bound(v) for v in (it.start, it.stop)) or not (it.step is None or (
                    isinstance(it.step, int) and not isinstance(it.step, bool))):
                if any(isinstance(v, Value) for v in (it.start, it.stop, it.step)):
                    raise refuse("a slice bound is a traced (data-dependent) value; gather with "
                                 "tf.index_select(x, index, dim)")
                raise refuse("slice bounds must be ints or DimVar expressions and the step an int")
        elif not (it is None or it is Ellipsis or (isinstance(it, int) and not isinstance(it, bool))):
            raise refuse(f"an index must be an int, a slice, ..., or None, got {type(it).__name__} {it!r}"
                         f"{'; to gather, use tf.index_select(x, index, dim)' if isinstance(it, list) else ''}")
    if items.count(Ellipsis) > 1:
        raise refuse("an index can only have a single ellipsis ('...')")
    used = sum(1 for it in items if it is not None and it is not Ellipsis)
    if used > x.type.rank:
        raise refuse(f"too many indices for a tensor of rank {x.type.rank} ({x.type})", IRIndexError)
    if Ellipsis in items:
        at = items.index(Ellipsis)
        items[at:at + 1] = [builtins.slice(None)] * (x.type.rank - used)
    else:
        items += [builtins.slice(None)] * (x.type.rank - used)

    starts: list[Dim] = []
    sizes: list[Dim] = []
    strides: list[int] = []
    out_shape: list[Dim] = []
    narrowed = reshaped = False
    axis = 0
    for it in items:
        if it is None:
            out_shape.append(1)
            reshaped = True
            continue
        extent = x.type.shape[axis]
        if isinstance(it, int):
            start = _int_index(it, extent, axis, refuse)
            starts.append(start)
            sizes.append(1)
            strides.append(1)
            narrowed = reshaped = True
        else:
            start, size, step = _slice_axis(it, extent, axis, refuse)
            starts.append(start)
            sizes.append(size)
            strides.append(step)
            out_shape.append(size)
            narrowed = narrowed or not (start == 0 and step == 1 and size == extent)
        axis += 1
    value = x
    if narrowed:
        value = emit("slice", (x,), {"starts": tuple(starts), "sizes": tuple(sizes), "strides": tuple(strides)})
    if reshaped:
        value = emit("reshape", (value,), {"new_shape": tuple(out_shape)})
    return value


def _describe(extent: Dim) -> str:
    r = dim_range(extent)
    if isinstance(extent, int) or r is None:
        return f"{extent}"
    return f"{extent}, at least {r[0]}"


def _int_index(i: int, extent: Dim, axis: int, refuse: Any) -> Dim:
    if isinstance(extent, int):
        if not -extent <= i < extent:
            raise refuse(f"index {i} is out of bounds for axis {axis} with size {extent}", IRIndexError)
        return i % extent if extent else i
    start = extent + i if i < 0 else i
    if not (provably_nonnegative(start) and provably_nonnegative(extent - start - 1)):
        raise refuse(f"index {i} on axis {axis} of symbolic extent {_describe(extent)} is not inside the axis for "
                     "every extent its DimVars admit; narrow the DimVar's range or index a static axis")
    return start


def _slice_axis(s: builtins.slice, extent: Dim, axis: int, refuse: Any) -> tuple[Dim, Dim, int]:
    step = 1 if s.step is None else s.step
    if step == 0:
        raise refuse("slice step cannot be zero")
    if step < 0:
        raise refuse(f"slice step {step} is negative; steps must be >= 1 (reverse with another op)")
    if isinstance(extent, int) and all(v is None or isinstance(v, int) for v in (s.start, s.stop)):
        start, stop, _ = s.indices(extent)
        return start, len(range(start, stop, step)), step

    def bound(v: Dim | None, default: Dim, which: str) -> Dim:
        if v is None:
            return default
        value = extent + v if isinstance(v, int) and v < 0 else v
        if not (provably_nonnegative(value) and provably_nonnegative(extent - value)):
            raise refuse(f"{which} {v} on axis {axis} of extent {_describe(extent)} is not inside the axis for "
                         "every extent its DimVars admit (Python would clamp it, which cannot be recorded); "
                         "narrow the DimVar's range or slice a static axis")
        return value

    start = bound(s.start, 0, "start")
    stop = bound(s.stop, extent, "stop")
    length = stop - start
    if not provably_nonnegative(length):
        if provably_nonnegative(-length):
            return start, 0, step
        raise refuse(f"stop {stop} may lie before start {start} on axis {axis}: the slice's length is not known "
                     "to be >= 0 for every extent the DimVars admit")
    size = length if step == 1 else floordiv(length + (step - 1), step)
    return start, size, step

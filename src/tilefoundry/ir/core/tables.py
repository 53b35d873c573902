"""Positional tables: activations a function reads only at the rows its positions name (RoPE's cos and sin).

A decoder layer takes its rotary cos / sin tables as activations and reads only the rows at the tokens'
positions. Model sources written for the reference implementation build such tables with fewer rows than they
declare (its Gemma2 builds ``sliding_window`` rows where ``max_position_embeddings`` are declared), and the
reference binds an activation as it is given. Here the binder accepts fewer rows (at least one) on the first axis
of a *positional table* alone: a parameter whose every use is as RoPE's cos or sin table, or as a parameter of a
called function (a sibling ``@func`` or a child's) that is itself a positional table there. The rope then refuses
a position past the rows it was given, naming them. Every other activation is bound to its declared extents.
"""

from __future__ import annotations

import weakref
from typing import Any

__all__ = ["positional_tables"]

# Each function's tables, found once: its traced graph does not change, and every call binds its arguments.
_FOUND: weakref.WeakKeyDictionary[Any, frozenset[str]] = weakref.WeakKeyDictionary()

# The inputs of an op that are tables read at positions: RoPE's cos and sin rows.
_TABLE_INPUTS = {"rope": (2, 3)}


def positional_tables(fn: Any) -> frozenset[str]:
    """The names of ``fn``'s parameters that are positional tables (see the module docstring); none for a function
    with variants (each variant binds its own) or without a body to read."""
    found = _FOUND.get(fn)
    if found is None:
        found = _FOUND[fn] = _tables(fn, {})
    return found


def _tables(fn: Any, seen: dict[int, frozenset[str]]) -> frozenset[str]:
    if id(fn) in seen:
        return seen[id(fn)]
    seen[id(fn)] = frozenset()  # a call cycle reads no table
    if getattr(fn, "variants", None):
        return frozenset()
    try:
        graph = fn.graph
    except Exception:  # noqa: BLE001 - a function the tracer refuses binds its arguments as declared
        return frozenset()
    names = {id(v): v.param for v in graph.params}
    table_use: dict[str, bool] = {}

    def use(v: Any, is_table: bool) -> None:
        name = names.get(id(v))
        if name is not None:
            table_use[name] = table_use.get(name, True) and is_table

    for node in graph.nodes:
        callee_params: tuple[Any, ...] = ()
        callee_tables: frozenset[str] = frozenset()
        if node.op in ("call", "call_module") and node.callee is not None:
            callee_params = node.callee.params if node.op == "call" else node.callee.activations
            callee_tables = _tables(node.callee, seen)
        for i, v in enumerate(node.inputs):
            if i in _TABLE_INPUTS.get(node.op, ()):
                use(v, True)
            elif callee_params and i < len(callee_params):
                use(v, callee_params[i].name in callee_tables)
            else:
                use(v, False)
    for v in _flatten(graph.outputs):
        use(v, False)
    out = frozenset(name for name, table in table_use.items() if table)
    seen[id(fn)] = out
    return out


def _flatten(outputs: Any) -> list[Any]:
    if isinstance(outputs, (tuple, list)):
        return [v for o in outputs for v in _flatten(o)]
    return [] if outputs is None else [outputs]

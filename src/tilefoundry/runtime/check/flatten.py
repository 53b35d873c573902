"""Flattening nested tuples of tensors into ``(path, tensor)`` leaves, and comparing their structures.

A value accepted here is a bare tensor or an arbitrarily nested tuple of them. Leaves are addressed by a
path built from a root name and one ``[i]`` per tuple level: a bare tensor is ``"output"``, the first
element of a tuple result is ``"output[0]"``, and ``"output[1][0]"`` is the first element of the second.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["clone_leaves", "describe", "first_structure_difference", "flatten"]


def describe(value: Any) -> str:
    """A short phrase for what sits at one place in a result (``"a tensor"``, ``"a tuple of 2"``, ...)."""
    if isinstance(value, torch.Tensor):
        return "a tensor"
    if isinstance(value, tuple):
        return f"a tuple of {len(value)}"
    return f"a value of type {type(value).__name__}"


def flatten(value: Any, root: str) -> list[tuple[str, torch.Tensor]]:
    """Every tensor in ``value`` with its path, depth first in tuple order.

    Args:
        value: a tensor or a nested tuple of tensors.
        root: the path of ``value`` itself (``"output"``, ``"inputs"``).

    Raises:
        TypeError: a leaf is not a tensor; the message names its path and what it is.
    """
    leaves: list[tuple[str, torch.Tensor]] = []
    _collect(value, root, leaves)
    return leaves


def _collect(value: Any, path: str, leaves: list[tuple[str, torch.Tensor]]) -> None:
    if isinstance(value, torch.Tensor):
        leaves.append((path, value))
        return
    if isinstance(value, tuple):
        for i, item in enumerate(value):
            _collect(item, f"{path}[{i}]", leaves)
        return
    hint = " (use a tuple, not a list)" if isinstance(value, list) else ""
    raise TypeError(f"{path} is {describe(value)}; every leaf must be a torch.Tensor inside nested tuples{hint}")


def first_structure_difference(a: Any, b: Any, root: str) -> tuple[str, str, str] | None:
    """Where two nested-tuple values first differ in shape of nesting, or None when they agree.

    Tensors are not looked into: only the tuple nesting and lengths are compared (empty tuples included,
    so ``(x, ())`` and ``(x,)`` differ although they flatten to the same leaves).

    Returns:
        ``(path, description of a there, description of b there)`` for the first difference.
    """
    a_is_tuple = isinstance(a, tuple)
    b_is_tuple = isinstance(b, tuple)
    if not a_is_tuple and not b_is_tuple:
        return None
    if a_is_tuple != b_is_tuple or len(a) != len(b):
        return root, describe(a), describe(b)
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        found = first_structure_difference(x, y, f"{root}[{i}]")
        if found is not None:
            return found
    return None


def clone_leaves(value: Any, memo: dict[int, torch.Tensor] | None = None) -> Any:
    """A copy of a nested tuple of tensors whose tensors are fresh clones.

    A tensor that appears more than once is cloned once, so aliasing between arguments is kept.
    """
    if memo is None:
        memo = {}
    if isinstance(value, torch.Tensor):
        key = id(value)
        if key not in memo:
            memo[key] = value.detach().clone()
        return memo[key]
    if isinstance(value, tuple):
        items = [clone_leaves(item, memo) for item in value]
        if hasattr(value, "_fields"):  # a namedtuple keeps its type
            return type(value)(*items)
        return tuple(items)
    return value

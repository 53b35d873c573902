"""Nested tuples of leaves (tensors or Values), flattened with stable paths."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# A spec is None for a leaf, or a tuple of child specs for a tuple.
TreeSpec = Any


def flatten(tree: Any, is_leaf: Callable[[Any], bool]) -> tuple[list[Any], TreeSpec]:
    """Leaves in depth-first order and the spec that rebuilds the nesting.

    Lists are accepted and treated as tuples; any other non-leaf raises TypeError naming its path.
    """
    leaves: list[Any] = []

    def walk(node: Any, path: str) -> TreeSpec:
        if is_leaf(node):
            leaves.append(node)
            return None
        if isinstance(node, (tuple, list)):
            return tuple(walk(child, f"{path}[{i}]") for i, child in enumerate(node))
        raise TypeError(f"{path} is a {type(node).__name__}, expected a tensor or a tuple of tensors")

    spec = walk(tree, "output")
    return leaves, spec


def unflatten(spec: TreeSpec, leaves: list[Any]) -> Any:
    """Rebuild the nested tuples ``spec`` describes from ``leaves`` (consumed in order)."""
    it = iter(leaves)

    def build(s: TreeSpec) -> Any:
        if s is None:
            return next(it)
        return tuple(build(c) for c in s)

    return build(spec)


def leaf_paths(spec: TreeSpec, root: str = "output") -> list[str]:
    """The path of every leaf: ``output``, ``output[0]``, ``output[1][0]``..."""
    if spec is None:
        return [root]
    out: list[str] = []
    for i, child in enumerate(spec):
        out.extend(leaf_paths(child, f"{root}[{i}]"))
    return out

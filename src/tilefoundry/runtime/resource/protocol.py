"""The ``RuntimeResource`` protocol: what ``Module.load`` / ``Module.prepare`` and runtime twins read from."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch

__all__ = ["RuntimeResource"]


@runtime_checkable
class RuntimeResource(Protocol):
    """A scoped, alias-resolving source of weight tensors.

    A resource resolves names and reads tensors; it never stacks and never changes a stored element type.
    """

    def load(self, name: str) -> torch.Tensor:
        """Return the tensor ``name`` resolves to in this scope.

        Raises KeyError when no such tensor exists, and TypeError (naming ``load_group``) when ``name`` is a
        one-to-many alias.
        """
        ...

    def load_group(self, name: str) -> tuple[torch.Tensor, ...] | None:
        """Return the raw tensors of the one-to-many alias ``name``, in declared order.

        Returns None when ``name`` has no tuple-valued alias (the ordinary, one-to-one case).
        """
        ...

    def subtree(self, seg: str) -> RuntimeResource:
        """Return a view scoped one path segment deeper; ``seg`` is itself alias-resolved."""
        ...

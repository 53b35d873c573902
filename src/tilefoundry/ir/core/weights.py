"""A Module node's weights: read by name and checked strictly against their ConstTensor declarations.

The one routine every reader uses (``Module.load``, a runtime twin's ``load``, ``Module.prepare``): the
weights of one node are bound together by one :class:`~tilefoundry.ir.core.binding.Binder`, so a DimVar
two weights share must agree, and no tensor is converted on the way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from .binding import CONFLICT, EXPRESSION, NOT_TENSOR, RANGE, UNBOUND, Binder, Mismatch

if TYPE_CHECKING:
    from .module import Module

__all__ = ["NodeWeights", "WeightMismatchError", "read_node_weights"]


class WeightMismatchError(ValueError):
    """A weight whose shape or dtype differs from its declaration; the message names the way out."""


def converter_hint(mod: Module, weight: str) -> str:
    """``@<function>.converter('<weight>')``: the converter that would change ``weight`` of ``mod``.

    The function is the one declaring the weight: a function of the Module, or a dispatch variant of one.
    """
    for function in mod.functions.values():
        for fn, p in function.declared_weights():
            if p.name == weight:
                return f"@{fn.name}.converter({weight!r})"
    return f"a converter for {weight!r}"


class NodeWeights:
    """Collects and checks the weights of one Module node, in any order, then hands them out by name.

    Args:
        mod: the node whose declarations the weights are held to.
        path: the node's dotted path in the tree ('' for the root); messages name a weight by
            ``path.weight``.
    """

    def __init__(self, mod: Module, path: str) -> None:
        self.mod = mod
        self.path = path
        self._binder = Binder("weight")
        self._tensors: dict[str, torch.Tensor] = {}

    def key(self, name: str) -> str:
        """The path-qualified key of weight ``name``."""
        return f"{self.path}.{name}" if self.path else name

    def add(self, name: str, tensor: object) -> torch.Tensor:
        """Check ``tensor`` against the declaration of weight ``name`` (no conversion) and keep it."""
        declared = self.mod.weights[name]
        try:
            self._binder.bind(self.key(name), tensor, declared)
        except Mismatch as m:
            raise self._refusal(name, tensor, m) from None
        assert isinstance(tensor, torch.Tensor)
        self._tensors[name] = tensor
        return tensor

    def finish(self) -> dict[str, torch.Tensor]:
        """Check the dim-expression axes across the node's weights; return the weights by name.

        An expression only activations can bind stays for the call to check.
        """
        from .module import variant_only_weights

        optional = variant_only_weights(self.mod)
        missing = [n for n in self.mod.weights if n not in self._tensors and n not in optional]
        if missing:
            raise KeyError(f"weights {', '.join(self.key(n) for n in missing)} were never read")
        try:
            self._binder.finish(complete=False)
        except Mismatch as m:
            name = next(n for n in self._tensors if self.key(n) == m.name)
            raise self._refusal(name, self._tensors[name], m) from None
        return dict(self._tensors)

    def _refusal(self, name: str, tensor: object, m: Mismatch) -> Exception:
        key = self.key(name)
        if m.kind == NOT_TENSOR:
            return TypeError(f"weight {key}: expected a torch.Tensor, got {type(tensor).__name__}")
        assert isinstance(tensor, torch.Tensor)
        detail = f" ({m})" if m.kind in (RANGE, CONFLICT, EXPRESSION, UNBOUND) else ""
        return WeightMismatchError(
            f"weight {key}: the checkpoint holds {tensor.dtype} {tuple(tensor.shape)}, declared "
            f"{self.mod.weights[name]}{detail}; a weight converter ({converter_hint(self.mod, name)}) is the way "
            "to change it"
        )


def read_node_weights(mod: Module, resource: Any, path: str,
                      on_read: Callable[[], None] | None = None) -> dict[str, torch.Tensor]:
    """Read every weight ``mod`` declares from ``resource`` by its bare name and check them together.

    ``resource`` is scoped to the node already (``resource.subtree`` per child); ``on_read`` is called
    after each read (a progress bar). Raises KeyError for an absent weight, WeightMismatchError (naming
    ``path.weight`` and its converter) for a shape or dtype that differs from the declaration. A weight only
    dispatch variants declare is read when the resource holds it and passed over when not: only the variant
    a call selects needs its weights, and that call names a missing one.
    """
    from .module import variant_only_weights

    optional = variant_only_weights(mod)
    node = NodeWeights(mod, path)
    for name in mod.weights:
        try:
            tensor = resource.load(name)
        except KeyError:
            if name not in optional:
                raise
        else:
            node.add(name, tensor)
        if on_read is not None:
            on_read()
    return node.finish()

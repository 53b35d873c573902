"""Strict validation of a weight tensor against its declared ConstTensor type."""

from __future__ import annotations

import torch

from ..types.dim import DimVar
from ..types.tensor_type import TensorType


class WeightMismatchError(ValueError):
    """A weight whose shape or dtype differs from its declaration; the message names the way out."""


def validate_weight(key: str, tensor: object, declared: TensorType, bindings: dict[str, int],
                    converter_hint: str) -> torch.Tensor:
    """Check ``tensor`` against ``declared`` exactly (no conversion), binding DimVars into ``bindings``.

    ``converter_hint`` names the converter that would fix a mismatch, e.g. ``@attention.converter('wq')``.
    """
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"weight {key}: expected a torch.Tensor, got {type(tensor).__name__}")
    got = f"{tensor.dtype} {tuple(tensor.shape)}"
    way_out = f"; a weight converter ({converter_hint}) is the way to change it"
    if tensor.dtype != declared.dtype.torch_dtype:
        raise WeightMismatchError(f"weight {key}: the checkpoint holds {got}, declared {declared}{way_out}")
    ok = tensor.dim() == declared.rank
    if ok:
        for d, n in zip(declared.shape, tensor.shape):
            n = int(n)
            if isinstance(d, int):
                ok = d == n
            elif isinstance(d, DimVar):
                ok = d.contains(n) and bindings.setdefault(d.name, n) == n
            else:
                try:
                    ok = d.evaluate(bindings) == n
                except KeyError:
                    ok = True
            if not ok:
                break
    if not ok:
        raise WeightMismatchError(f"weight {key}: the checkpoint holds {got}, declared {declared}{way_out}")
    return tensor

"""A tensor-parallel rank's share of a checkpoint: the twin of its slice, each weight read as only that slice.

The split is the engine's (``tilefoundry.engine.parallel``): whole heads, intermediate columns and vocabulary rows
a rank. :func:`rank_config` is the model a rank holds (its heads, key/value heads, intermediate sizes and
vocabulary divided by N); the twin built from it declares exactly the slices' shapes, and :func:`load_rank_twin`
loads it through a view of the checkpoint that reads each split weight with ``load_slice`` (safetensors'
``get_slice``: only the rank's bytes leave the file) and every other weight whole. The prepared format does not
change: every rank reads the one checkpoint.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..engine.parallel import LAYER_SPLIT_AXES, TensorParallel, split_size
from ..runtime import RuntimeModule
from .checkpoint import OpenedCheckpoint
from .config import ModelConfig
from .decoder import build_causal_lm
from .twins import build_twin

__all__ = ["SPLIT_AXES", "load_rank_twin", "rank_config"]

SPLIT_AXES = {"embed_tokens": 0, "lm_head": 0, **LAYER_SPLIT_AXES}  # the vocabulary rows, and the engine's split
"""The axis along which a rank holds 1/N of each split weight (by the name the model families declare it under);
every other weight (norms, the router) is whole on every rank."""

# ModelConfig's fields by the names config.json gives them (what a refusal names).
_JSON_NAMES = {"num_heads": "num_attention_heads", "num_kv_heads": "num_key_value_heads"}


def _divided(config: ModelConfig, field: str, world: int) -> int:
    return split_size("the model's", getattr(config, field), world, _JSON_NAMES.get(field, field))


def rank_config(config: ModelConfig, world: int) -> ModelConfig:
    """The sizes of one rank's slice of ``config``'s model split over ``world`` ranks (head_dim kept)."""
    sizes = {field: _divided(config, field, world) for field in ("num_heads", "num_kv_heads", "vocab_size")}
    sizes["intermediate_size"] = _divided(config, "intermediate_size", world) if config.intermediate_size else 0
    if config.is_moe:
        sizes["moe_intermediate_size"] = _divided(config, "moe_intermediate_size", world)
    return dataclasses.replace(config, **sizes)


class _RankSlices:
    """A view of a resource (and of each of its subtrees) that reads a split weight's slice for one rank."""

    def __init__(self, resource: Any, rank: int, world: int) -> None:
        if not callable(getattr(resource, "load_slice", None)):
            raise TypeError(f"tensor parallel loading reads slices of each weight, and {type(resource).__name__} "
                            "cannot (it has no load_slice); open the checkpoint as a folder")
        self._resource, self._rank, self._world = resource, rank, world

    def load(self, name: str) -> Any:
        axis = SPLIT_AXES.get(name)
        if axis is None:
            return self._resource.load(name)
        whole = self._resource.shape_of(name)[axis]  # from the file's header: no tensor is read
        share = split_size(f"the weight {name}'s", whole, self._world, f"extent along axis {axis}")
        return self._resource.load_slice(name, axis, self._rank * share, (self._rank + 1) * share)

    def load_group(self, name: str) -> Any:
        if name in SPLIT_AXES:
            raise TypeError(f"tensor parallel loading reads {name!r} as one stored tensor, and the checkpoint stores "
                            "it as a group; prepare the checkpoint first (tilefoundry prepare)")
        return self._resource.load_group(name)

    def subtree(self, seg: str) -> _RankSlices:
        return _RankSlices(self._resource.subtree(seg), self._rank, self._world)

    def __getattr__(self, attr: str) -> Any:  # everything else (describe, read_keys, ...) is the resource's
        return getattr(self._resource, attr)


def load_rank_twin(opened: OpenedCheckpoint, device: str, tp: TensorParallel) -> RuntimeModule:
    """The twin of rank ``tp.rank``'s slice of ``opened``'s model, loaded with only that slice of each split weight
    read (an engine built from it with ``parallel=tp`` runs it). Checkpoint tensors nothing read are refused, as
    for a whole load.

    Raises:
        ValueError: a size that does not divide by ``tp.world``, named.
    """
    local = rank_config(opened.config, tp.world)
    twin = build_twin(build_causal_lm(local), local, rank=(tp.rank, tp.world))
    resource = opened.resource(device)
    twin.load(_RankSlices(resource, tp.rank, tp.world))
    opened.refuse_unread(resource)
    return twin

"""What a decode engine needs to know of a decoder-only causal LM: its sizes and its weights, unpacked.

A model family hands these to the engine (``tilefoundry.models`` does it for the twins it builds: the twin
carries a ``decoder_spec`` and answers ``decoder_weights()``), so the engine never reads a checkpoint's names
or a twin's tree itself. Linear weights keep ``nn.Linear``'s (out features, in features) layout.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

import torch

__all__ = ["DecoderLayerWeights", "DecoderSpec", "DecoderWeights"]


@dataclass(frozen=True)
class DecoderSpec:
    """The sizes and constants of a decoder-only causal LM.

    ``heads`` query heads and ``kv_heads`` key/value heads of ``head_dim`` (grouped-query attention: query
    head h reads KV head ``h // (heads // kv_heads)``); ``eps`` is every RMSNorm's; ``max_positions`` is
    ``max_position_embeddings``, the rows of the rotary tables and the most positions a cache may hold.
    Routed (MoE) layers choose ``experts_per_token`` experts, renormalising their weights when
    ``normalize_experts``.
    """

    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    eps: float
    max_positions: int
    experts_per_token: int = 0
    normalize_experts: bool = False

    def __post_init__(self) -> None:
        for name in ("hidden", "heads", "kv_heads", "head_dim", "vocab", "max_positions"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"DecoderSpec.{name} must be a positive integer, got {value!r}")
        if self.heads % self.kv_heads:
            raise ValueError(f"DecoderSpec: heads {self.heads} is not a multiple of kv_heads {self.kv_heads}")
        if self.head_dim % 2:
            raise ValueError(f"DecoderSpec: head_dim {self.head_dim} must be even (rotary halves)")

    @property
    def scale(self) -> float:
        """The softmax scale of attention, ``head_dim ** -0.5``."""
        return 1.0 / self.head_dim**0.5


@dataclass(frozen=True)
class DecoderLayerWeights:
    """One decoder layer's weights, unpacked, in ``nn.Linear`` layout.

    Attention: ``q_proj`` / ``k_proj`` / ``v_proj`` (with ``*_bias`` for Qwen2) and ``o_proj``, ``q_norm`` /
    ``k_norm`` for Qwen3's per-head norms. Feed-forward: either a dense SwiGLU MLP (``gate_proj``, ``up_proj``,
    ``down_proj``) or routed experts (``router`` (E, hidden) and ``experts_gate`` / ``experts_up`` (E, I,
    hidden), ``experts_down`` (E, hidden, I)).
    """

    input_norm: torch.Tensor
    q_proj: torch.Tensor
    k_proj: torch.Tensor
    v_proj: torch.Tensor
    o_proj: torch.Tensor
    post_norm: torch.Tensor
    q_bias: torch.Tensor | None = None
    k_bias: torch.Tensor | None = None
    v_bias: torch.Tensor | None = None
    q_norm: torch.Tensor | None = None
    k_norm: torch.Tensor | None = None
    gate_proj: torch.Tensor | None = None
    up_proj: torch.Tensor | None = None
    down_proj: torch.Tensor | None = None
    router: torch.Tensor | None = None
    experts_gate: torch.Tensor | None = None
    experts_up: torch.Tensor | None = None
    experts_down: torch.Tensor | None = None

    def __post_init__(self) -> None:
        dense = [self.gate_proj, self.up_proj, self.down_proj]
        routed = [self.router, self.experts_gate, self.experts_up, self.experts_down]
        if not (all(w is not None for w in dense) and all(w is None for w in routed)
                or all(w is None for w in dense) and all(w is not None for w in routed)):
            raise ValueError("DecoderLayerWeights: give a dense MLP (gate_proj, up_proj, down_proj) or routed experts "
                             "(router, experts_gate, experts_up, experts_down), whole and not both")
        for group in (("q_bias", "k_bias", "v_bias"), ("q_norm", "k_norm")):
            given = [getattr(self, name) is not None for name in group]
            if any(given) and not all(given):
                raise ValueError(f"DecoderLayerWeights: give all of {', '.join(group)} or none")

    @property
    def routed(self) -> bool:
        """True for a layer of routed experts (MoE)."""
        return self.router is not None


@dataclass(frozen=True)
class DecoderWeights:
    """A decoder's weights: the embedding, the layers, the final norm and the lm_head, and the rotary tables.

    ``lm_head`` is the embedding tensor itself when the model ties them. ``cos`` / ``sin`` are the
    (max_positions, head_dim) rotary tables (halves duplicated, rotate-half convention) in the model's dtype,
    the ones the semantic Module reads in a decode step. ``forward_tables``, for a RoPE whose frequencies depend
    on the sequence (longrope, dynamic NTK), gives the tables of a forward that ends at position ``n - 1`` (a
    prompt's prefill reads them; see ``tilefoundry.models.rope``); None for every other RoPE.
    """

    embed: torch.Tensor
    layers: tuple[DecoderLayerWeights, ...]
    final_norm: torch.Tensor
    lm_head: torch.Tensor
    cos: torch.Tensor
    sin: torch.Tensor
    forward_tables: Callable[[int], tuple[torch.Tensor, torch.Tensor]] | None = None

    @property
    def device(self) -> torch.device:
        """Where the weights are (all of them: the engine refuses a split)."""
        return self.embed.device

    @property
    def dtype(self) -> torch.dtype:
        """The model's dtype (the embedding's)."""
        return self.embed.dtype

    def tensors(self) -> dict[str, torch.Tensor]:
        """Every tensor by a dotted name (``layer3.q_proj``), for placement checks and messages."""
        out = {"embed": self.embed, "final_norm": self.final_norm, "lm_head": self.lm_head, "cos": self.cos,
               "sin": self.sin}
        for i, layer in enumerate(self.layers):
            for f in fields(layer):
                value = getattr(layer, f.name)
                if value is not None:
                    out[f"layer{i}.{f.name}"] = value
        return out

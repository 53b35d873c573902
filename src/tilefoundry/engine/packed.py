"""The weights as the engine's kernel slots read them, packed once when an engine is built.

* q, k and v projections stacked row-wise (``(heads + 2 kv_heads) * head_dim`` x hidden), their biases too:
  one GEMV computes all three, read back as q heads, then k heads, then v heads.
* gate and up projections interleaved row by row (row 2j is ``gate_proj[j]``, row 2j + 1 is ``up_proj[j]``):
  one GEMV computes both, and a fused SwiGLU epilogue finds gate_j and up_j side by side.
* a tied lm_head is the embedding tensor itself (never copied); every other weight is used as loaded.

These are the layouts the compiled slots read (:mod:`.packing` makes them): their ``@func``s take the packed
weights as the engine holds them, so no slot packs anything per step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from .decoder import DecoderLayerWeights, DecoderWeights
from .packing import pack_gate_up, pack_qkv

__all__ = ["PackedDecoder", "PackedLayer", "pack_decoder"]


@dataclass(frozen=True)
class PackedLayer:
    """One layer in the slots' layout (see the module docstring); ``gate_up`` / ``down_proj`` for a dense
    layer, the expert tensors for a routed one."""

    input_norm: torch.Tensor
    qkv: torch.Tensor
    qkv_bias: torch.Tensor | None
    q_norm: torch.Tensor | None
    k_norm: torch.Tensor | None
    o_proj: torch.Tensor
    post_norm: torch.Tensor
    gate_up: torch.Tensor | None
    down_proj: torch.Tensor | None
    router: torch.Tensor | None
    experts_gate: torch.Tensor | None
    experts_up: torch.Tensor | None
    experts_down: torch.Tensor | None

    @property
    def routed(self) -> bool:
        """True for a layer of routed experts."""
        return self.router is not None


@dataclass(frozen=True)
class PackedDecoder:
    """Every weight of a decoder in the slots' layout, with the rotary tables."""

    embed: torch.Tensor
    layers: tuple[PackedLayer, ...]
    final_norm: torch.Tensor
    lm_head: torch.Tensor
    cos: torch.Tensor
    sin: torch.Tensor
    forward_tables: Callable[[int], tuple[torch.Tensor, torch.Tensor]] | None = None


def _pack_layer(w: DecoderLayerWeights) -> PackedLayer:
    bias = torch.cat((w.q_bias, w.k_bias, w.v_bias)).contiguous() if w.q_bias is not None else None
    dense = not w.routed
    return PackedLayer(
        input_norm=w.input_norm, qkv=pack_qkv(w.q_proj, w.k_proj, w.v_proj), qkv_bias=bias, q_norm=w.q_norm,
        k_norm=w.k_norm, o_proj=w.o_proj.contiguous(), post_norm=w.post_norm,
        gate_up=pack_gate_up(w.gate_proj, w.up_proj) if dense else None,
        down_proj=w.down_proj.contiguous() if dense else None,
        router=w.router, experts_gate=w.experts_gate, experts_up=w.experts_up, experts_down=w.experts_down,
    )


def pack_decoder(weights: DecoderWeights) -> PackedDecoder:
    """Pack every layer (q/k/v together, gate/up together); the tied lm_head stays the embedding tensor."""
    tied = weights.lm_head is weights.embed
    embed = weights.embed.contiguous()
    return PackedDecoder(embed=embed, layers=tuple(_pack_layer(w) for w in weights.layers),
                         final_norm=weights.final_norm, lm_head=embed if tied else weights.lm_head.contiguous(),
                         cos=weights.cos, sin=weights.sin, forward_tables=weights.forward_tables)

"""Hugging Face checkpoint names -> the names the decoder Module declares (spec 1.5 alias tables).

Per-layer segments are literal entries (``layer3 -> model.layers.3``); leaf names inside a layer are
bare entries shared by every layer. Routed experts are read in either on-disk layout: one tensor per
expert (a tuple alias, stacked by prepare) or already fused (slices of ``gate_up_proj``).
"""

from __future__ import annotations

from collections.abc import Collection

from ..runtime.resource import AliasValue, Preprocessed
from .config import ModelConfig

_LAYER_LEAVES = {
    "input_norm": "input_layernorm.weight",
    "post_norm": "post_attention_layernorm.weight",
    "q_proj": "self_attn.q_proj.weight",
    "k_proj": "self_attn.k_proj.weight",
    "v_proj": "self_attn.v_proj.weight",
    "o_proj": "self_attn.o_proj.weight",
    "q_bias": "self_attn.q_proj.bias",
    "k_bias": "self_attn.k_proj.bias",
    "v_bias": "self_attn.v_proj.bias",
    "q_norm": "self_attn.q_norm.weight",
    "k_norm": "self_attn.k_norm.weight",
    "gate_proj": "mlp.gate_proj.weight",
    "up_proj": "mlp.up_proj.weight",
    "down_proj": "mlp.down_proj.weight",
    "router": "mlp.gate.weight",
}


def hf_alias_table(c: ModelConfig, checkpoint_keys: Collection[str]) -> dict[str, AliasValue]:
    """The alias table reading a Hugging Face checkpoint of ``c``'s family.

    ``checkpoint_keys`` (every raw key the checkpoint holds) decides the expert layout. With tied embeddings
    (``tie_word_embeddings``) the Module declares no lm_head, so the table maps none.
    """
    alias: dict[str, AliasValue] = {
        "embed_tokens": "model.embed_tokens.weight",
        "norm": "model.norm.weight",
    }
    if not c.tie_word_embeddings:  # tied: the Module's head reads embed_tokens, and declares no lm_head
        alias["lm_head"] = "lm_head.weight"
    alias.update(_LAYER_LEAVES)
    for i in range(c.num_layers):
        alias[f"layer{i}"] = f"model.layers.{i}"
    if c.is_moe:
        first = f"model.layers.{c.moe_layers[0]}.mlp.experts"
        if f"{first}.gate_up_proj" in checkpoint_keys:
            inter = c.moe_intermediate_size
            alias["experts_gate"] = Preprocessed("mlp.experts.gate_up_proj", lambda t: t[:, :inter])
            alias["experts_up"] = Preprocessed("mlp.experts.gate_up_proj", lambda t: t[:, inter:])
            alias["experts_down"] = "mlp.experts.down_proj"
        else:
            for ours, theirs in (("experts_gate", "gate_proj"), ("experts_up", "up_proj"),
                                 ("experts_down", "down_proj")):
                alias[ours] = tuple(f"mlp.experts.{e}.{theirs}.weight" for e in range(c.num_experts))
    return alias


def hf_known_extras(c: ModelConfig) -> tuple[str, ...]:
    """Glob patterns of raw keys a Hugging Face checkpoint of ``c``'s family may hold that no weight reads.

    Rotary tables some exporters store (``rotary_emb.inv_freq``: the Module computes them), and a stored
    ``lm_head.weight`` when the embeddings are tied (the head reads ``embed_tokens``). Any other unread tensor
    is refused by prepare and generate.
    """
    extras = ("*rotary_emb.inv_freq",)
    if c.tie_word_embeddings:
        extras += ("lm_head.weight",)
    return extras


def needs_prepare(alias: dict[str, AliasValue]) -> bool:
    """True when some weight is assembled from several raw tensors (only prepare stacks)."""
    return any(isinstance(v, tuple) for v in alias.values())

"""Runtime twins of the decoder families: the same tree, with kernel bodies in plain torch.

The bodies use what torch does fastest (F.linear, fused scaled-dot-product attention, index-based expert
dispatch) instead of the semantic ops, and are held to the semantic Module by ``check`` (tests compare
every kernel of every node). Orchestration (forward, init_caches, ...) is the semantic Module's own.

A twin's public step follows the spec: it returns new caches and never mutates those it was given. The
fast path is the decode engine (``tilefoundry.engine.DecodeEngine``) built from a loaded twin: the root
twin describes itself to it with ``decoder_spec`` and ``decoder_weights()``.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from ..engine import DecoderLayerWeights, DecoderSpec, DecoderWeights
from ..engine.reference import rms_norm, rotate
from ..ir.core.module import Module
from ..runtime import RuntimeModule, bound_weights, runtime_func, runtime_module
from .config import ModelConfig
from .rope import rope_tables


def _written(cache: torch.Tensor, cur_pos: torch.Tensor, n_new: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
    """A copy of ``cache`` with ``new`` written at ``cur_pos``; the given cache stays untouched."""
    pos, n = int(cur_pos), int(n_new)
    out = cache.clone()
    out[0, pos:pos + n] = new[:n]
    return out


def _layer_twin(sem: Module, c: ModelConfig) -> type[RuntimeModule]:
    """The twin class of one decoder-layer Module (dense or routed)."""
    eps = c.rms_norm_eps
    H, KV, D = c.num_heads, c.num_kv_heads, c.head_dim
    K, normalize = c.num_experts_per_tok, c.norm_topk_prob

    class Kernels:
        def attend(self, x, q, k, v, pos_ids, kv_pos, cos, sin, cache_k, cache_v, cur_pos, n_new, o_proj):
            cos_rows, sin_rows = cos[pos_ids].float(), sin[pos_ids].float()  # rows first: the tables are long
            q = rotate(q, cos_rows[:, None], sin_rows[:, None])
            k = rotate(k, cos_rows[:, None], sin_rows[:, None])
            cache_k = _written(cache_k, cur_pos, n_new, k)
            cache_v = _written(cache_v, cur_pos, n_new, v)
            ctx = kv_pos.shape[0]
            keys = cache_k[0, :ctx].transpose(0, 1)
            vals = cache_v[0, :ctx].transpose(0, 1)
            seq = x.shape[0]
            mask = None if seq == 1 else kv_pos[None, :] <= pos_ids[:, None]
            out = F.scaled_dot_product_attention(q.transpose(0, 1), keys, vals, attn_mask=mask, enable_gqa=True)
            return x + F.linear(out.transpose(0, 1).reshape(seq, H * D), o_proj), cache_k, cache_v

        def mlp(self, x, post_norm, gate_proj, up_proj, down_proj):
            h = rms_norm(x, post_norm, eps)
            return x + F.linear(F.silu(F.linear(h, gate_proj)) * F.linear(h, up_proj), down_proj)

        def moe(self, x, post_norm, router, experts_gate, experts_up, experts_down):
            h = rms_norm(x, post_norm, eps)
            probs = torch.softmax(F.linear(h, router).float(), dim=-1)
            top, chosen = torch.topk(probs, K, dim=-1)
            if normalize:
                top = top / top.sum(dim=-1, keepdim=True)
            top = top.to(x.dtype)
            out = torch.zeros_like(x)
            for e in torch.unique(chosen).tolist():
                rows, slot = torch.nonzero(chosen == e, as_tuple=True)
                hx = h[rows]
                y = F.linear(F.silu(F.linear(hx, experts_gate[e])) * F.linear(hx, experts_up[e]), experts_down[e])
                out.index_add_(0, rows, y * top[rows, slot, None])
            return x + out

    def qkv_plain(self, x, input_norm, q_proj, k_proj, v_proj):
        h = rms_norm(x, input_norm, eps)
        seq = x.shape[0]
        return (F.linear(h, q_proj).view(seq, H, D), F.linear(h, k_proj).view(seq, KV, D),
                F.linear(h, v_proj).view(seq, KV, D))

    def qkv_bias(self, x, input_norm, q_proj, k_proj, v_proj, q_bias, k_bias, v_bias):
        h = rms_norm(x, input_norm, eps)
        seq = x.shape[0]
        return (F.linear(h, q_proj, q_bias).view(seq, H, D), F.linear(h, k_proj, k_bias).view(seq, KV, D),
                F.linear(h, v_proj, v_bias).view(seq, KV, D))

    def qk_norm(self, q, k, q_norm, k_norm):
        return rms_norm(q, q_norm, eps), rms_norm(k, k_norm, eps)

    body: dict[str, Any] = {"qkv": runtime_func(qkv_bias if c.attention_bias else qkv_plain),
                            "attend": runtime_func(Kernels.attend)}
    if "qk_norm" in sem.functions:
        body["qk_norm"] = runtime_func(qk_norm)
    for name in ("mlp", "moe"):
        if name in sem.functions:
            body[name] = runtime_func(getattr(Kernels, name))
    return runtime_module(sem)(type(f"{sem.name}Twin", (), body))


def decoder_spec(c: ModelConfig) -> DecoderSpec:
    """What the decode engine needs to know of the model ``c`` describes."""
    return DecoderSpec(hidden=c.hidden_size, heads=c.num_heads, kv_heads=c.num_kv_heads, head_dim=c.head_dim,
                       vocab=c.vocab_size, eps=c.rms_norm_eps, max_positions=c.max_position_embeddings,
                       experts_per_token=c.num_experts_per_tok, normalize_experts=c.norm_topk_prob)


_LAYER_FIELDS = ("input_norm", "q_proj", "k_proj", "v_proj", "o_proj", "post_norm", "q_bias", "k_bias", "v_bias",
                 "q_norm", "k_norm", "gate_proj", "up_proj", "down_proj", "router", "experts_gate", "experts_up",
                 "experts_down")


def _decoder_weights(twin: RuntimeModule, c: ModelConfig) -> DecoderWeights:
    """The loaded twin's weights as the decode engine reads them (by the names ``build_causal_lm`` declares)."""
    root = bound_weights(twin)
    layers = []
    for child in twin.modules:
        own = bound_weights(child)
        layers.append(DecoderLayerWeights(**{name: own[name] for name in _LAYER_FIELDS if name in own}))
    embed = root["embed_tokens"]
    # The engine's decode steps read the step table (exact for every decode step); a prefill of longrope / dynamic
    # NTK that ends past the switch reads its forward's own table instead (see models.rope).
    cos, sin = rope_tables(c.rope, c.head_dim, c.max_position_embeddings, embed.dtype, embed.device)

    def forward_tables(seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
        return rope_tables(c.rope, c.head_dim, c.max_position_embeddings, embed.dtype, embed.device, seq_len=seq_len)

    per_forward = c.rope.rope_type in ("longrope", "dynamic")
    return DecoderWeights(embed=embed, layers=tuple(layers), final_norm=root["norm"],
                          lm_head=root.get("lm_head", embed), cos=cos, sin=sin,
                          forward_tables=forward_tables if per_forward else None)


def build_twin(sem: Module, config: ModelConfig, *, rank: tuple[int, int] | None = None) -> RuntimeModule:
    """A runtime twin of the causal LM ``sem`` (built by ``build_causal_lm(config)``), not yet loaded.

    Once loaded, it is what ``DecodeEngine(twin, capacity)`` is built from (``decoder_spec``,
    ``decoder_weights()``). ``rank`` = (r, N) marks the twin of tensor-parallel rank r's slice of a model split
    over N ranks (``config`` the slice's sizes: :mod:`.tensor_parallel`), which only an engine of that rank runs.
    """
    eps = config.rms_norm_eps
    classes: dict[int, type[RuntimeModule]] = {}
    children = []
    for child in sem.modules:
        key = id(child.functions)  # renamed copies of one layer Module share its functions
        if key not in classes:
            classes[key] = _layer_twin(child, config)
        children.append(classes[key])

    def embed(self, input_ids, embed_tokens):
        return F.embedding(input_ids, embed_tokens)

    def head(self, x, norm, lm_head):
        return F.linear(rms_norm(x, norm, eps), lm_head)

    def tied_head(self, x, norm, embed_tokens):
        return F.linear(rms_norm(x, norm, eps), embed_tokens)

    tied = [p.name for p in sem.functions["head"].weights] == ["norm", "embed_tokens"]
    def decoder_weights(self) -> DecoderWeights:
        """The loaded weights as the decode engine reads them (tied: the lm_head is the embedding tensor)."""
        return _decoder_weights(self, config)

    body = {"embed": runtime_func(embed), "head": runtime_func(tied_head if tied else head),
            "decoder": tuple(children), "decoder_spec": decoder_spec(config), "decoder_weights": decoder_weights,
            "decoder_rank": rank}
    return runtime_module(sem)(type("CausalLMTwin", (), body))()

"""The decoder-only causal LM every family shares, authored in the DSL and built from a ModelConfig.

Tree: the root holds ``embed`` and ``head`` (final norm + lm_head) and children ``layer0..`` whose
kernels are ``qkv`` (+ ``qk_norm`` for Qwen3), ``attend`` and ``mlp`` (or ``moe`` on routed layers).
With tied embeddings ``head`` reads ``embed_tokens`` itself: the root declares that weight once, so it is
read, prepared and stored once.
Linear weights keep Hugging Face's (out, in) layout, so a checkpoint needs no transposes.

The Module is built once per config (``build_causal_lm`` memoises it): nothing in it depends on a prompt.
Caches are the caller's: one (key, value) pair per layer, each (1, capacity, kv_heads, head_dim), where
``capacity`` is a DimVar bounded by ``max_position_embeddings`` and chosen when the caches are made
(``init_caches(capacity=...)``). A step writes the new entries into copies and returns them; attention reads
the first ``ctx`` entries (``ctx`` is bound by the ``kv_pos`` input, the positions held after the step). The
rotary tables cover every position the model has (``max_position_embeddings`` rows), made once per device; each
step is handed the table of its own last position (``rope_tables(..., seq_len=...)``), which for longrope and
dynamic NTK rope scaling is how transformers chooses the frequencies of a forward.
"""

from __future__ import annotations

import functools
import math
import numbers
from typing import Any

import torch

from ..dsl import ConstTensor, DimVar, Tensor, func, module, tf
from ..ir.core.module import Module
from ..ir.types.dtype import dtype_of
from .config import ModelConfig
from .rope import rope_tables


def _linear(x: Any, w: Any) -> Any:
    """x @ w.T for a weight stored (out, in), as Hugging Face stores linear layers."""
    return tf.matmul(x, tf.transpose(w, (1, 0)))


@functools.lru_cache(maxsize=16)
def build_causal_lm(c: ModelConfig) -> Module:
    """The semantic Module of the causal LM ``c`` describes, built once per config.

    Prompt lengths and cache capacities are DimVars bounded by ``max_position_embeddings``, so one Module
    serves every prompt: the same config (equal ModelConfigs) gives the same Module object, whose traced
    functions are reused. A Module is pure IR (reading it never changes it), so sharing it is safe.
    """
    dt = c.dtype
    HID, V, H, KV, D = c.hidden_size, c.vocab_size, c.num_heads, c.num_kv_heads, c.head_dim
    if H % KV:
        raise ValueError(f"num_attention_heads {H} is not a multiple of num_key_value_heads {KV}")
    eps, MAXPOS = c.rms_norm_eps, c.max_position_embeddings
    seq = DimVar("seq", 1, MAXPOS + 1)
    ctx = DimVar("ctx", 1, MAXPOS + 1)
    capacity = DimVar("capacity", 1, MAXPOS + 1)
    scale = 1.0 / math.sqrt(D)

    if c.attention_bias:
        @func
        def qkv(x: Tensor[(seq, HID), dt], input_norm: ConstTensor[(HID,), dt],
                q_proj: ConstTensor[(H * D, HID), dt], k_proj: ConstTensor[(KV * D, HID), dt],
                v_proj: ConstTensor[(KV * D, HID), dt], q_bias: ConstTensor[(H * D,), dt],
                k_bias: ConstTensor[(KV * D,), dt], v_bias: ConstTensor[(KV * D,), dt]):
            h = tf.rms_norm(x, input_norm, eps)
            q = tf.reshape(_linear(h, q_proj) + q_bias, (seq, H, D))
            k = tf.reshape(_linear(h, k_proj) + k_bias, (seq, KV, D))
            v = tf.reshape(_linear(h, v_proj) + v_bias, (seq, KV, D))
            return q, k, v
    else:
        @func
        def qkv(x: Tensor[(seq, HID), dt], input_norm: ConstTensor[(HID,), dt],
                q_proj: ConstTensor[(H * D, HID), dt], k_proj: ConstTensor[(KV * D, HID), dt],
                v_proj: ConstTensor[(KV * D, HID), dt]):
            h = tf.rms_norm(x, input_norm, eps)
            q = tf.reshape(_linear(h, q_proj), (seq, H, D))
            k = tf.reshape(_linear(h, k_proj), (seq, KV, D))
            v = tf.reshape(_linear(h, v_proj), (seq, KV, D))
            return q, k, v

    qk_norm = None
    if c.qk_norm:
        @func
        def qk_norm(q: Tensor[(seq, H, D), dt], k: Tensor[(seq, KV, D), dt], q_norm: ConstTensor[(D,), dt],
                    k_norm: ConstTensor[(D,), dt]):
            return tf.rms_norm(q, q_norm, eps), tf.rms_norm(k, k_norm, eps)

    @func
    def attend(x: Tensor[(seq, HID), dt], q: Tensor[(seq, H, D), dt], k: Tensor[(seq, KV, D), dt],
               v: Tensor[(seq, KV, D), dt], pos_ids: Tensor[(seq,), "i64"], kv_pos: Tensor[(ctx,), "i64"],
               cos: Tensor[(MAXPOS, D), dt], sin: Tensor[(MAXPOS, D), dt],
               cache_k: Tensor[(1, capacity, KV, D), dt], cache_v: Tensor[(1, capacity, KV, D), dt],
               cur_pos: Tensor[(), "i64"], n_new: Tensor[(), "i64"], o_proj: ConstTensor[(HID, H * D), dt]):
        q, k = tf.rope(q, k, cos, sin, pos_ids)  # (seq, heads, head_dim), rows of cos / sin at pos_ids
        cache_k = tf.cache_update(cache_k, cur_pos, n_new, tf.reshape(k, (1, seq, KV, D)))
        cache_v = tf.cache_update(cache_v, cur_pos, n_new, tf.reshape(v, (1, seq, KV, D)))
        q = tf.transpose(q, (1, 0, 2))  # (H, seq, D)
        keys = tf.reshape(tf.slice(cache_k, (0, 0, 0, 0), (1, ctx, KV, D)), (ctx, KV, D))
        vals = tf.reshape(tf.slice(cache_v, (0, 0, 0, 0), (1, ctx, KV, D)), (ctx, KV, D))
        keys = tf.repeat_interleave(tf.transpose(keys, (1, 2, 0)), H // KV, 0)  # (H, D, ctx)
        vals = tf.repeat_interleave(tf.transpose(vals, (1, 0, 2)), H // KV, 0)  # (H, ctx, D)
        scores = tf.matmul(q, keys) * scale
        visible = tf.reshape(kv_pos, (1, ctx)) <= tf.reshape(pos_ids, (seq, 1))
        probs = tf.softmax(tf.where(visible, scores, float("-inf")))
        out = tf.reshape(tf.transpose(tf.matmul(probs, vals), (1, 0, 2)), (seq, H * D))
        return x + _linear(out, o_proj), cache_k, cache_v

    INTER = c.intermediate_size

    @func
    def mlp(x: Tensor[(seq, HID), dt], post_norm: ConstTensor[(HID,), dt],
            gate_proj: ConstTensor[(INTER, HID), dt], up_proj: ConstTensor[(INTER, HID), dt],
            down_proj: ConstTensor[(HID, INTER), dt]):
        h = tf.rms_norm(x, post_norm, eps)
        return x + _linear(tf.silu(_linear(h, gate_proj)) * _linear(h, up_proj), down_proj)

    E, K, MI = c.num_experts, c.num_experts_per_tok, c.moe_intermediate_size
    normalize = c.norm_topk_prob
    moe = None
    if c.is_moe:
        @func
        def moe(x: Tensor[(seq, HID), dt], post_norm: ConstTensor[(HID,), dt], router: ConstTensor[(E, HID), dt],
                experts_gate: ConstTensor[(E, MI, HID), dt], experts_up: ConstTensor[(E, MI, HID), dt],
                experts_down: ConstTensor[(E, HID, MI), dt]):
            h = tf.rms_norm(x, post_norm, eps)
            probs = tf.softmax(tf.cast(_linear(h, router), "f32"))
            top, _ = tf.topk(probs, K)
            kth = tf.slice(top, (0, K - 1), (seq, 1))
            weights = tf.where(probs >= kth, probs, 0.0)
            if normalize:
                weights = weights / tf.reduce(weights, axes=(-1,), keepdim=True, kind="sum")
            weights = tf.reshape(tf.transpose(tf.cast(weights, dt), (1, 0)), (E, seq, 1))
            hs = tf.reshape(h, (1, seq, HID))
            gate = tf.matmul(hs, tf.transpose(experts_gate, (0, 2, 1)))
            up = tf.matmul(hs, tf.transpose(experts_up, (0, 2, 1)))
            y = tf.matmul(tf.silu(gate) * up, tf.transpose(experts_down, (0, 2, 1)))  # (E, seq, HID)
            return x + tf.reduce(y * weights, axes=(0,), keepdim=False, kind="sum")

    use_qk_norm = c.qk_norm

    def attention(self, x, pos_ids, kv_pos, cos, sin, cache_k, cache_v, cur_pos, n_new):
        q, k, v = self.qkv(x)
        if use_qk_norm:
            q, k = self.qk_norm(q, k)
        return self.attend(x, q, k, v, pos_ids, kv_pos, cos, sin, cache_k, cache_v, cur_pos, n_new)

    def dense_forward(self, x, pos_ids, kv_pos, cos, sin, cache_k, cache_v, cur_pos, n_new):
        h, cache_k, cache_v = self.attention(x, pos_ids, kv_pos, cos, sin, cache_k, cache_v, cur_pos, n_new)
        return self.mlp(h), cache_k, cache_v

    def routed_forward(self, x, pos_ids, kv_pos, cos, sin, cache_k, cache_v, cur_pos, n_new):
        h, cache_k, cache_v = self.attention(x, pos_ids, kv_pos, cos, sin, cache_k, cache_v, cur_pos, n_new)
        return self.moe(h), cache_k, cache_v

    def layer_module(name: str, ffn: Any, forward: Any) -> Module:
        functions = {"qkv": qkv, "attend": attend, ffn.name: ffn}
        if use_qk_norm:
            functions["qk_norm"] = qk_norm
        return Module(name, functions, methods={"attention": attention, "forward": forward})

    dense = layer_module("DecoderLayer", mlp, dense_forward)
    routed = layer_module("MoeDecoderLayer", moe, routed_forward) if c.is_moe else None
    moe_set = set(c.moe_layers)
    layers = tuple((routed if i in moe_set else dense).renamed(f"layer{i}") for i in range(c.num_layers))

    torch_dtype = dtype_of(dt).torch_dtype
    n_layers = c.num_layers
    tied = c.tie_word_embeddings

    @module
    class CausalLM:
        """A decoder-only causal LM: embed, decoder layers, final norm and lm_head."""

        decoder = layers

        @func
        def embed(input_ids: Tensor[(seq,), "i64"], embed_tokens: ConstTensor[(V, HID), dt]):
            return tf.index_select(embed_tokens, input_ids, 0)

        if tied:
            # Tied embeddings: the lm_head is the embedding table, one weight the Module declares once.
            @func
            def head(x: Tensor[(seq, HID), dt], norm: ConstTensor[(HID,), dt],
                     embed_tokens: ConstTensor[(V, HID), dt]):
                return _linear(tf.rms_norm(x, norm, eps), embed_tokens)
        else:
            @func
            def head(x: Tensor[(seq, HID), dt], norm: ConstTensor[(HID,), dt], lm_head: ConstTensor[(V, HID), dt]):
                return _linear(tf.rms_norm(x, norm, eps), lm_head)

        def forward(self, input_ids, pos_ids, kv_pos, cur_pos, n_new, cos, sin, caches):
            x = self.embed(input_ids)
            new_caches = []
            for layer, (cache_k, cache_v) in zip(self.modules, caches):
                x, cache_k, cache_v = layer(x, pos_ids, kv_pos, cos, sin, cache_k, cache_v, cur_pos, n_new)
                new_caches.append((cache_k, cache_v))
            return self.head(x), tuple(new_caches)

        def init_caches(self, *, capacity, device="cpu"):
            shape = (1, _checked_capacity(capacity, MAXPOS), KV, D)
            return tuple((torch.zeros(shape, dtype=torch_dtype, device=device),
                          torch.zeros(shape, dtype=torch_dtype, device=device)) for _ in range(n_layers))

        def prepare_inputs_for_generation(self, input_ids, step, caches, *, device="cpu"):
            total = int(input_ids.shape[0])
            if not 0 <= step < total:
                raise ValueError(f"step {step} must index the {total} tokens given")
            held = int(caches[0][0].shape[1]) if caches else MAXPOS
            if total > held:
                raise ValueError(
                    f"position {total - 1} is past the caches' capacity of {held} positions (0..{held - 1}); make "
                    f"the caches with init_caches(capacity=...) large enough for the prompt and every new token "
                    f"(at most {MAXPOS}, the model's max_position_embeddings)"
                )
            ids = input_ids[step:].to(device=device, dtype=torch.int64, copy=True)
            # this forward's table: longrope and dynamic NTK choose frequencies by its last position, as transformers
            cos, sin = rope_tables(c.rope, D, MAXPOS, torch_dtype, device, seq_len=total)
            return (
                ids,
                torch.arange(step, total, device=device),
                torch.arange(total, device=device),
                torch.tensor(step, device=device),
                torch.tensor(total - step, device=device),
                cos,
                sin,
                caches,
            )

        def append_cache(self, caches, outputs):
            return outputs[1]

    return CausalLM


def _checked_capacity(capacity: object, limit: int) -> int:
    """``capacity`` as a cache length in [1, limit] (limit: max_position_embeddings); refused naming both."""
    if isinstance(capacity, bool) or not isinstance(capacity, numbers.Integral):
        raise TypeError(f"init_caches: capacity must be an integer (positions the caches hold), got "
                        f"{type(capacity).__name__} {capacity!r}")
    if not 1 <= capacity <= limit:
        raise ValueError(f"init_caches: capacity {capacity} must lie in [1, {limit}] ({limit} is the model's "
                         "max_position_embeddings)")
    return int(capacity)

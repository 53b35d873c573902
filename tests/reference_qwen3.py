"""A tiny Qwen3 written the way model sources for the spec's reference implementation are written.

Everything a model can take from the authoring surface is used here: activations laid out ``[B, S, H, D]``
for ``rope``, one growing KV cache per layer that starts empty (``DimVar("ctx_len", 0, N)``) with attention
merged by an online softmax over the cache and the new tokens, slicing of traced values, variadic ``concat``,
``ReduceKind``, a base function specialised per sequence length (``DimVarRangePat``), an ``hf_alias`` table
reading a Hugging Face checkpoint through ``Preprocessed`` / ``Absolute`` entries, the causal-LM
orchestration methods (``init_caches`` allocating through ``DType.from_name`` and ``to_torch_dtype``), and a
runtime twin whose kernels take ``self, *args``.

``build(cfg, dtype)`` returns ``(Qwen3, Qwen3Twin, HF_ALIAS)`` for a Hugging Face ``Qwen3Config``.
"""

# The reference style takes every op by bare name from tilefoundry.dsl.tf:
# ruff: noqa: F403, F405
import math

import torch
import torch.nn.functional as F

from tilefoundry import DType, func, module
from tilefoundry.dsl import ConstTensor, DimVar, DimVarRangePat, ReduceKind, Tensor
from tilefoundry.dsl.tf import *
from tilefoundry.evaluator.value import to_torch_dtype
from tilefoundry.runtime import Absolute, Preprocessed, runtime_func, runtime_module

B = 1  # batch


def _t(t: torch.Tensor) -> torch.Tensor:
    """(out, in) as Hugging Face stores a linear layer -> (in, out) as this model declares it."""
    return t.t()


def build(cfg, dtype: str):  # noqa: ANN001, ANN201 - one model definition, as a source file would hold it
    HID, V, L = cfg.hidden_size, cfg.vocab_size, cfg.num_hidden_layers
    H, KV, D = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    INTER, EPS = cfg.intermediate_size, cfg.rms_norm_eps
    MAXPOS = cfg.max_position_embeddings
    THETA = cfg.rope_parameters["rope_theta"]
    N = 64  # positions a cache holds
    dt = dtype
    S = DimVar("seq", 1, N + 1)
    CTX = DimVar("ctx_len", 0, N)
    REP = H // KV
    SCALE = 1.0 / math.sqrt(D)

    def linear(x, w):
        return x @ w

    def attend_part(q, k, v, mask):
        """Softmax statistics of q against one block of keys: running max m, sum l and unnormalised output o.

        q: [B, H, S, D] f32; k, v: [B, T, KV, D] (T may be 0); mask: None or a [S, T] bool of visible keys.
        """
        k = repeat_interleave(transpose(cast(k, "f32"), (0, 2, 1, 3)), REP, 1)  # [B, H, T, D]
        v = repeat_interleave(transpose(cast(v, "f32"), (0, 2, 1, 3)), REP, 1)
        scores = (q @ transpose(k, (0, 1, 3, 2))) * SCALE  # [B, H, S, T]
        if mask is not None:
            scores = where(mask, scores, float("-inf"))
        m = reduce(scores, axes=(-1,), keepdim=True, kind=ReduceKind.max)  # -inf over an empty cache
        p = exp(scores - m)  # an empty block has no elements: nothing to exponentiate
        l_ = reduce(p, axes=-1, keepdim=True, kind="sum")
        return m, l_, p @ v

    def merge_and_project(x, q, k, v, cache_k, cache_v, o_proj, mask):
        qf = transpose(cast(q, "f32"), (0, 2, 1, 3))  # [B, H, S, D]
        m_c, l_c, o_c = attend_part(qf, cache_k, cache_v, None)
        m_n, l_n, o_n = attend_part(qf, k, v, mask)
        m = maximum(m_c, m_n)
        a_c, a_n = exp(m_c - m), exp(m_n - m)
        o = (o_c * a_c + o_n * a_n) / (l_c * a_c + l_n * a_n)
        o = reshape(transpose(cast(o, dt), (0, 2, 1, 3)), (B, x.shape[1], H * D))
        return x + linear(o, o_proj), concat(cache_k, k, axis=1), concat(cache_v, v, axis=1)

    @module
    class Qwen3Layer:
        @func
        def qkv(x: Tensor[(B, S, HID), dt], cos: Tensor[(MAXPOS, D), dt], sin: Tensor[(MAXPOS, D), dt],
                pos_ids: Tensor[(S,), "i64"], input_norm: ConstTensor[(HID,), dt],
                q_proj: ConstTensor[(HID, H * D), dt], k_proj: ConstTensor[(HID, KV * D), dt],
                v_proj: ConstTensor[(HID, KV * D), dt], q_norm: ConstTensor[(D,), dt],
                k_norm: ConstTensor[(D,), dt]):
            h = rms_norm(x, input_norm, EPS)
            q = rms_norm(reshape(linear(h, q_proj), (B, S, H, D)), q_norm, EPS)
            k = rms_norm(reshape(linear(h, k_proj), (B, S, KV, D)), k_norm, EPS)
            v = reshape(linear(h, v_proj), (B, S, KV, D))
            q, k = rope(q, k, cos, sin, pos_ids)
            return q, k, v

        @func
        def attend(x: Tensor[(B, S, HID), dt], q: Tensor[(B, S, H, D), dt], k: Tensor[(B, S, KV, D), dt],
                   v: Tensor[(B, S, KV, D), dt], cache_k: Tensor[(B, CTX, KV, D), dt],
                   cache_v: Tensor[(B, CTX, KV, D), dt], o_proj: ConstTensor[(H * D, HID), dt]):
            pass

        @attend.specialize(DimVarRangePat(S, 1, 2))
        def decode(x, q, k, v, cache_k, cache_v, o_proj):
            # One new token sees the whole cache and itself: no mask.
            return merge_and_project(x, q, k, v, cache_k, cache_v, o_proj, None)

        @attend.specialize(DimVarRangePat(S, 2, N + 1))
        def prefill(x, q, k, v, cache_k, cache_v, o_proj):
            rows = reshape(arange(x.shape[1]), (x.shape[1], 1))
            cols = reshape(arange(x.shape[1]), (1, x.shape[1]))
            return merge_and_project(x, q, k, v, cache_k, cache_v, o_proj, cols <= rows)

        @func
        def mlp(x: Tensor[(B, S, HID), dt], post_norm: ConstTensor[(HID,), dt],
                gate_proj: ConstTensor[(HID, INTER), dt], up_proj: ConstTensor[(HID, INTER), dt],
                down_proj: ConstTensor[(INTER, HID), dt]):
            h = rms_norm(x, post_norm, EPS)
            return x + linear(silu(linear(h, gate_proj)) * linear(h, up_proj), down_proj)

        def forward(self, x, cos, sin, pos_ids, cache_k, cache_v):
            q, k, v = self.qkv(x, cos, sin, pos_ids)
            x, cache_k, cache_v = self.attend(x, q, k, v, cache_k, cache_v)
            return self.mlp(x), cache_k, cache_v

    @module
    class Qwen3:
        layers = tuple(Qwen3Layer.renamed(f"layer{i}") for i in range(L))

        @func
        def embed(input_ids: Tensor[(B, S), "i64"], embed_tokens: ConstTensor[(V, HID), dt]):
            return reshape(index_select(embed_tokens, reshape(input_ids, (S,)), 0), (B, S, HID))

        @func
        def head(x: Tensor[(B, S, HID), dt], norm: ConstTensor[(HID,), dt], lm_head: ConstTensor[(HID, V), dt]):
            last = x[:, -1]  # [B, HID]: only the last position's logits are needed to choose the next token
            return linear(rms_norm(last, norm, EPS), lm_head)

        def forward(self, input_ids, pos_ids, cos, sin, caches):
            x = self.embed(input_ids)
            new_caches = []
            for layer, (cache_k, cache_v) in zip(self.modules, caches):
                x, cache_k, cache_v = layer(x, cos, sin, pos_ids, cache_k, cache_v)
                new_caches.append((cache_k, cache_v))
            return self.head(x), tuple(new_caches)

        def init_caches(self, *, device="cpu"):
            torch_dtype = to_torch_dtype(DType.from_name(dt))
            return tuple((torch.zeros(B, 0, KV, D, dtype=torch_dtype, device=device),
                          torch.zeros(B, 0, KV, D, dtype=torch_dtype, device=device)) for _ in range(L))

        def prepare_inputs_for_generation(self, input_ids, step, caches, *, device="cpu"):
            total = int(input_ids.shape[0])
            ids = input_ids[step:].to(device=device, dtype=torch.int64).reshape(B, total - step)
            inv = 1.0 / (THETA ** (torch.arange(0, D, 2, dtype=torch.int64).float() / D))
            angles = torch.arange(MAXPOS, dtype=torch.float32)[:, None] * inv[None, :]
            emb = torch.cat((angles, angles), dim=-1)
            torch_dtype = to_torch_dtype(DType.from_name(dt))
            cos, sin = emb.cos().to(torch_dtype).to(device), emb.sin().to(torch_dtype).to(device)
            return ids, torch.arange(step, total, device=device), cos, sin, caches

        def append_cache(self, caches, outputs):
            return outputs[1]

    def rms(x, w):
        xf = x.float()
        return ((xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + EPS)).to(w.dtype) * w).to(x.dtype)

    @runtime_module(Qwen3Layer)
    class Qwen3LayerTwin:
        @runtime_func
        def qkv(self, *args):
            x, cos, sin, pos_ids, input_norm, q_proj, k_proj, v_proj, q_norm, k_norm = args
            h = rms(x, input_norm)
            s = x.shape[1]
            q = rms((h @ q_proj).view(B, s, H, D), q_norm)
            k = rms((h @ k_proj).view(B, s, KV, D), k_norm)
            c, sn = cos.float()[pos_ids][:, None], sin.float()[pos_ids][:, None]

            def rot(t):
                tf32 = t.float()
                return (tf32 * c + torch.cat((-tf32[..., D // 2:], tf32[..., :D // 2]), -1) * sn).to(t.dtype)

            return rot(q), rot(k), (h @ v_proj).view(B, s, KV, D)

        @runtime_func
        def attend(self, x, q, k, v, cache_k, cache_v, o_proj):
            keys, vals = torch.cat((cache_k, k), 1), torch.cat((cache_v, v), 1)
            s, total = x.shape[1], keys.shape[1]
            visible = torch.arange(total)[None, :] <= torch.arange(total - s, total)[:, None]
            out = F.scaled_dot_product_attention(q.float().transpose(1, 2), keys.float().transpose(1, 2),
                                                 vals.float().transpose(1, 2), attn_mask=visible, enable_gqa=True)
            out = out.to(x.dtype).transpose(1, 2).reshape(B, s, H * D)
            return x + out @ o_proj, keys, vals

        @runtime_func
        def mlp(self, x, post_norm, gate_proj, up_proj, down_proj):
            h = rms(x, post_norm)
            return x + (F.silu(h @ gate_proj) * (h @ up_proj)) @ down_proj

    @runtime_module(Qwen3)
    class Qwen3Twin:
        layers = tuple(Qwen3LayerTwin for _ in range(L))

        @runtime_func
        def embed(self, input_ids, embed_tokens):
            return F.embedding(input_ids, embed_tokens)

        @runtime_func
        def head(self, x, norm, lm_head):
            return rms(x[:, -1], norm) @ lm_head

    HF_ALIAS = {
        "embed_tokens": "model.embed_tokens.weight",
        "norm": "model.norm.weight",
        "lm_head": Preprocessed(Absolute("lm_head.weight"), _t),
        "input_norm": "input_layernorm.weight",
        "post_norm": "post_attention_layernorm.weight",
        "q_proj": Preprocessed("self_attn.q_proj.weight", _t),
        "k_proj": Preprocessed("self_attn.k_proj.weight", _t),
        "v_proj": Preprocessed("self_attn.v_proj.weight", _t),
        "o_proj": Preprocessed("self_attn.o_proj.weight", _t),
        "q_norm": "self_attn.q_norm.weight",
        "k_norm": "self_attn.k_norm.weight",
        "gate_proj": Preprocessed("mlp.gate_proj.weight", _t),
        "up_proj": Preprocessed("mlp.up_proj.weight", _t),
        "down_proj": Preprocessed("mlp.down_proj.weight", _t),
        **{f"layer{i}": f"model.layers.{i}" for i in range(L)},
    }
    return Qwen3, Qwen3Twin, HF_ALIAS

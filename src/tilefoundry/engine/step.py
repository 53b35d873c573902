"""One forward step of a dense decoder (Llama / Qwen2-without-bias / Qwen3 layout) as a sequence of the
engine's kernels: what a decode engine launches, and what a CUDA graph captures.

Per layer: RMSNorm fused into the packed QKV GEMV; q/k norm (Qwen3) + RoPE + cache write at the device
position; decode attention over the cache; o_proj GEMV adding into the hidden state in place; RMSNorm
fused into the interleaved gate/up GEMV whose epilogue applies SwiGLU; down GEMV adding into the hidden
state. Then the final norm fused into the lm_head GEMV with its argmax. Six kernels a layer, one for the
head. The step reads the position from the device and leaves it for the caller to advance, so one
captured graph serves every step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .packing import pack_gate_up, pack_qkv
from .workspace import argmax_workspace, attention_workspace


@dataclass(frozen=True)
class DecoderShape:
    """The sizes a step needs (``heads`` query heads and ``kv_heads`` KV heads of ``head_dim``)."""

    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    eps: float

    @property
    def scale(self) -> float:
        """The softmax scale, head_dim ** -0.5."""
        return self.head_dim**-0.5


@dataclass
class LayerWeights:
    """One layer's weights as the kernels read them: q/k/v stacked, gate/up interleaved (see ``packing``)."""

    qkv: torch.Tensor
    o_proj: torch.Tensor
    gate_up: torch.Tensor
    down_proj: torch.Tensor
    input_norm: torch.Tensor
    post_norm: torch.Tensor
    q_norm: torch.Tensor | None = None
    k_norm: torch.Tensor | None = None

    @classmethod
    def pack(cls, *, q_proj: torch.Tensor, k_proj: torch.Tensor, v_proj: torch.Tensor, o_proj: torch.Tensor,
             gate_proj: torch.Tensor, up_proj: torch.Tensor, down_proj: torch.Tensor, input_norm: torch.Tensor,
             post_norm: torch.Tensor, q_norm: torch.Tensor | None = None,
             k_norm: torch.Tensor | None = None) -> LayerWeights:
        """Pack nn.Linear-layout weights (Hugging Face's names) once."""
        if (q_norm is None) != (k_norm is None):
            raise ValueError("LayerWeights.pack: pass both q_norm and k_norm, or neither")
        return cls(pack_qkv(q_proj, k_proj, v_proj), o_proj.contiguous(), pack_gate_up(gate_proj, up_proj),
                   down_proj.contiguous(), input_norm.contiguous(), post_norm.contiguous(), q_norm, k_norm)


@dataclass
class StepBuffers:
    """Everything a step reads and writes besides the weights, for ``tokens`` tokens a step.

    ``x`` is the hidden state (the caller puts the embedded tokens there), ``caches`` one (k, v) pair of
    (capacity, kv_heads, head_dim) per layer, ``position`` the int32 count of cached tokens (device), and
    ``token`` the greedy choice of each row after the step; ``logits`` hold the head's output.
    """

    x: torch.Tensor
    qkv: torch.Tensor
    q: torch.Tensor
    attn: torch.Tensor
    act: torch.Tensor
    logits: torch.Tensor
    token: torch.Tensor
    position: torch.Tensor
    caches: list[tuple[torch.Tensor, torch.Tensor]]
    attention_ws: torch.Tensor
    argmax_ws: torch.Tensor

    @classmethod
    def allocate(cls, kernels: Any, shape: DecoderShape, *, tokens: int, layers: int, capacity: int,
                 device: torch.device | str, dtype: torch.dtype = torch.bfloat16) -> StepBuffers:
        """Zeroed buffers (and caches) for ``layers`` layers holding ``capacity`` positions."""
        s = shape

        def zeros(*size: int, dt: torch.dtype = dtype) -> torch.Tensor:
            return torch.zeros(size, dtype=dt, device=device)

        return cls(
            x=zeros(tokens, s.hidden), qkv=zeros(tokens, (s.heads + 2 * s.kv_heads) * s.head_dim),
            q=zeros(tokens, s.heads, s.head_dim), attn=zeros(tokens, s.heads, s.head_dim),
            act=zeros(tokens, s.intermediate), logits=zeros(tokens, s.vocab), token=zeros(tokens, dt=torch.int64),
            position=zeros(1, dt=torch.int32),
            caches=[(zeros(capacity, s.kv_heads, s.head_dim), zeros(capacity, s.kv_heads, s.head_dim))
                    for _ in range(layers)],
            attention_ws=attention_workspace(kernels, tokens, s.heads, s.kv_heads, s.head_dim, device=device),
            argmax_ws=argmax_workspace(tokens, device))


def decode_step(kernels: Any, shape: DecoderShape, layers: list[LayerWeights], final_norm: torch.Tensor,
                lm_head: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, buf: StepBuffers) -> None:
    """Launch one step on the current stream: ``buf.x`` (embedded tokens at ``buf.position``) through every
    layer into ``buf.logits`` and ``buf.token``. The position is read, not advanced."""
    k, s, m = kernels, shape, buf.x.shape[0]
    for w, (cache_k, cache_v) in zip(layers, buf.caches):
        k.rmsnorm_gemv(buf.x, w.input_norm, w.qkv, buf.qkv, s.eps, 0)
        if w.q_norm is not None:
            k.qk_norm_rope_cache(buf.qkv, w.q_norm, w.k_norm, cos, sin, buf.position, buf.q, cache_k, cache_v, s.eps)
        else:
            k.rope_cache(buf.qkv, cos, sin, buf.position, buf.q, cache_k, cache_v)
        k.decode_attention(buf.q, cache_k, cache_v, buf.position, buf.attn, buf.attention_ws, s.scale, 0)
        k.gemv_residual(buf.attn.view(m, -1), w.o_proj, buf.x, buf.x, 0)
        k.rmsnorm_gemv_swiglu(buf.x, w.post_norm, w.gate_up, buf.act, s.eps, 0)
        k.gemv_residual(buf.act, w.down_proj, buf.x, buf.x, 0)
    k.rmsnorm_gemv_argmax(buf.x, final_norm, lm_head, buf.logits, buf.token, buf.argmax_ws, s.eps, 0)

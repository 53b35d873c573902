"""What each engine kernel computes, in plain torch: the meaning the GPU tests hold the kernels to.

Each function takes the kernel's inputs and returns its outputs (cache writes included, on copies), with
torch's bf16 semantics: every op computes in f32 and rounds its result to the input dtype, as the semantic
ops and the runtime twin's kernel bodies do. The fused kernels skip some of these roundings (the GEMV's
RMSNorm prologue never rounds the normed row), so tests compare within bf16 tolerances, never bit for bit.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm over the last axis as ``tf.rms_norm`` (and Hugging Face) compute it: normalised in f32, rounded
    to the weight's dtype, times the weight, in x's dtype."""
    xf = x.float()
    return ((xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps)).to(weight.dtype) * weight).to(x.dtype)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding, rotate-half convention, in f32, rounded to x's dtype (the twin's ``_rotate``)."""
    xf = x.float()
    half = x.shape[-1] // 2
    rotated = torch.cat((-xf[..., half:], xf[..., :half]), dim=-1)
    return (xf * cos.float() + rotated * sin.float()).to(x.dtype)


def gemv(x: torch.Tensor, weight: torch.Tensor, *, norm_weight: torch.Tensor | None = None, eps: float = 0.0,
         residual: torch.Tensor | None = None, epilogue: str = "store", fused_norm: bool = False) -> torch.Tensor:
    """``[rmsnorm(x)] @ weight.T`` then the epilogue: ``store``, ``residual`` (+ residual) or ``swiglu``
    (rows 2j / 2j + 1 of weight are gate_j / up_j: silu(gate) * up).

    ``fused_norm``: the normed row as the GEMV's fused prologue computes it, in f32 and never rounded to
    bf16 (``x * rsqrt(mean(x^2) + eps) * weight``), instead of ``rms_norm``'s bf16 row.
    """
    if norm_weight is not None and fused_norm:
        xf = x.float()
        h = xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps) * norm_weight.float()
    else:
        h = rms_norm(x, norm_weight, eps) if norm_weight is not None else x
    y = F.linear(h.float(), weight.float()).to(x.dtype)  # f32 products and sums, one rounding
    if epilogue == "store":
        return y
    if epilogue == "residual":
        return residual + y
    if epilogue == "swiglu":
        return F.silu(y[:, 0::2]) * y[:, 1::2]
    raise ValueError(f"unknown epilogue {epilogue!r}; use store, residual or swiglu")


def decode_attention(q: torch.Tensor, cache_k: torch.Tensor, cache_v: torch.Tensor, position: int,
                     scale: float) -> torch.Tensor:
    """Causal attention of M new tokens at positions ``position + m`` over the cache's first
    ``position + M`` entries (grouped-query: head h reads KV head h // (H / KV)), in f32."""
    m, h, _ = q.shape
    kv = cache_k.shape[1]
    ctx = position + m
    keys = cache_k[:ctx].float().repeat_interleave(h // kv, dim=1)  # (ctx, H, D)
    vals = cache_v[:ctx].float().repeat_interleave(h // kv, dim=1)
    scores = torch.einsum("mhd,chd->hmc", q.float(), keys) * scale
    visible = torch.arange(ctx, device=q.device)[None, :] <= (position + torch.arange(m, device=q.device))[:, None]
    probs = scores.masked_fill(~visible[None], float("-inf")).softmax(-1)
    return torch.einsum("hmc,chd->mhd", probs, vals).to(q.dtype)


def rope_cache(qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, position: int, cache_k: torch.Tensor,
               cache_v: torch.Tensor, *, heads: int, q_norm: torch.Tensor | None = None,
               k_norm: torch.Tensor | None = None, eps: float = 0.0,
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(q_out, new cache_k, new cache_v): q/k norm (when given), rotary embedding at ``position + m``, and
    k / v written at those positions into copies of the caches."""
    m = qkv.shape[0]
    kv, d = cache_k.shape[1], cache_k.shape[2]
    q, k, v = qkv.view(m, heads + 2 * kv, d).split((heads, kv, kv), dim=1)
    if q_norm is not None:
        q, k = rms_norm(q, q_norm, eps), rms_norm(k, k_norm, eps)
    c = cos[position:position + m][:, None]
    s = sin[position:position + m][:, None]
    q, k = rotate(q, c, s), rotate(k, c, s)
    new_k, new_v = cache_k.clone(), cache_v.clone()
    new_k[position:position + m] = k
    new_v[position:position + m] = v
    return q.contiguous(), new_k, new_v


def add_rmsnorm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float,
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """(new residual = residual + x, rmsnorm of it)."""
    summed = residual + x
    return summed, rms_norm(summed, weight, eps)


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up, as torch computes it on the inputs' dtype."""
    return F.silu(gate) * up


def decoder_logits(tokens: torch.Tensor, embed: torch.Tensor, layers: list[dict[str, torch.Tensor]],
                   final_norm: torch.Tensor, lm_head: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                   position: int, caches: list[tuple[torch.Tensor, torch.Tensor]], *, heads: int,
                   eps: float) -> torch.Tensor:
    """The logits of ``tokens`` at ``position`` onwards through a dense decoder, from unpacked weights.

    Each layer is a dict of Hugging Face's names (``q_proj``, ``k_proj``, ``v_proj``, ``o_proj``,
    ``gate_proj``, ``up_proj``, ``down_proj``, ``input_norm``, ``post_norm``, and ``q_norm`` / ``k_norm``
    for Qwen3); ``caches[i]`` is layer i's (k, v), replaced by the updated pair.
    """
    x = embed[tokens]
    m = x.shape[0]
    for i, w in enumerate(layers):
        h = rms_norm(x, w["input_norm"], eps)
        qkv = torch.cat([gemv(h, w[name]) for name in ("q_proj", "k_proj", "v_proj")], dim=-1)
        q, cache_k, cache_v = rope_cache(qkv, cos, sin, position, *caches[i], heads=heads, q_norm=w.get("q_norm"),
                                         k_norm=w.get("k_norm"), eps=eps)
        caches[i] = (cache_k, cache_v)
        attn = decode_attention(q, cache_k, cache_v, position, q.shape[-1] ** -0.5)
        x = gemv(attn.reshape(m, -1), w["o_proj"], residual=x, epilogue="residual")
        h = rms_norm(x, w["post_norm"], eps)
        x = gemv(swiglu(gemv(h, w["gate_proj"]), gemv(h, w["up_proj"])), w["down_proj"], residual=x,
                 epilogue="residual")
    return gemv(x, lm_head, norm_weight=final_norm, eps=eps)

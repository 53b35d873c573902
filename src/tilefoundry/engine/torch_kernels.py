"""Every kernel slot filled with torch: what the engine runs where the compiled slots do not (f16 or f32
models on CUDA, a machine that cannot build them).

Each slot rounds where the semantic Module rounds (through :mod:`.reference`) and is safe to capture in a CUDA
graph: under capture (``at.length`` None) attention masks the whole cache against the device position instead
of slicing it, and the experts of a routed layer are gathered by device indices. Eagerly, attention reads only
the entries the step needs (a slice of the cache), as the runtime twin does.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.nn.attention.bias import causal_lower_right

from .reference import rms_norm, rotate
from .slots import KernelSet, StepPositions

__all__ = ["TorchKernels"]


class TorchKernels(KernelSet):
    """Every slot in torch (``torch.mm``, fused ops written in torch, scaled-dot-product attention)."""

    name = "torch"

    def embed(self, ids: torch.Tensor, table: torch.Tensor, out: torch.Tensor) -> None:
        torch.index_select(table, 0, ids, out=out)

    def norm_linear(self, x: torch.Tensor, norm: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                    out: torch.Tensor, eps: float) -> None:
        h = rms_norm(x, norm, eps)
        if bias is None:
            torch.mm(h, weight.t(), out=out)
        else:
            torch.addmm(bias, h, weight.t(), out=out)

    def rope_cache(self, qkv: torch.Tensor, q_norm: torch.Tensor | None, k_norm: torch.Tensor | None,
                   cos: torch.Tensor, sin: torch.Tensor, q_out: torch.Tensor, cache_k: torch.Tensor,
                   cache_v: torch.Tensor, eps: float, at: StepPositions) -> None:
        m, heads, d = q_out.shape
        kv = cache_k.shape[1]
        q, k, v = qkv.view(m, heads + 2 * kv, d).split((heads, kv, kv), dim=1)
        if q_norm is not None and k_norm is not None:
            q, k = rms_norm(q, q_norm, eps), rms_norm(k, k_norm, eps)
        rows = at.rows(m)
        c = cos.index_select(0, rows).float()[:, None]
        s = sin.index_select(0, rows).float()[:, None]
        q_out.copy_(rotate(q, c, s))
        cache_k.index_copy_(0, rows, rotate(k, c, s))
        cache_v.index_copy_(0, rows, v)

    def attention(self, q: torch.Tensor, cache_k: torch.Tensor, cache_v: torch.Tensor, out: torch.Tensor,
                  scale: float, at: StepPositions) -> None:
        m = q.shape[0]
        if at.length is not None:  # eager: the entries the step reads, as the twin slices them
            ctx = at.length + m
            # (1, heads, tokens, head_dim): SDPA's flash backend takes a batch axis only
            keys, vals = cache_k[:ctx].transpose(0, 1)[None], cache_v[:ctx].transpose(0, 1)[None]
            qh = q.transpose(0, 1)[None]
            if m == 1:
                o = F.scaled_dot_product_attention(qh, keys, vals, scale=scale, enable_gqa=True)
            elif at.length == 0:
                # causal from position 0: SDPA's own causal form, which its flash backend takes (a boolean mask
                # sends it to the math backend, which computes the scores in f32: Qwen3-1.7B's 1024-token prefill
                # on an H200 spent 13.8 of its 22.5 ms of GPU time there)
                o = F.scaled_dot_product_attention(qh, keys, vals, is_causal=True, scale=scale, enable_gqa=True)
            else:
                # a chunk after the cache's first entries: causal aligned to the last key (token i sees keys up to
                # length + i), which SDPA's flash and memory-efficient backends take for every query head's keys
                group = q.shape[1] // keys.shape[1]
                keys, vals = keys.repeat_interleave(group, 1), vals.repeat_interleave(group, 1)
                o = F.scaled_dot_product_attention(qh, keys, vals, attn_mask=causal_lower_right(m, ctx), scale=scale)
            out.copy_(o[0].transpose(0, 1))
            return
        # Captured: plain matmuls and a softmax over the whole cache, the entries past each token's position
        # (read on the device) masked; the semantic Module's rounding points (softmax in f32).
        capacity, kv, d = cache_k.shape
        group = q.shape[1] // kv
        qg = q.view(m, kv, group, d).permute(1, 2, 0, 3).reshape(kv, group * m, d)  # query head h = kv * G + g
        scores = torch.bmm(qg, cache_k.permute(1, 2, 0)) * scale  # (KV, G * M, capacity)
        visible = torch.arange(capacity, device=q.device)[None, :] <= at.rows(m)[:, None]  # (M, capacity)
        scores = scores.masked_fill(~visible.repeat(group, 1)[None], float("-inf"))
        probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        o = torch.bmm(probs, cache_v.transpose(0, 1))  # (KV, G * M, D)
        out.copy_(o.view(kv, group, m, d).permute(2, 0, 1, 3).reshape(m, kv * group, d))

    def linear_residual(self, x: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor,
                        out: torch.Tensor) -> None:
        torch.add(residual, torch.mm(x, weight.t()), out=out)

    def norm_swiglu(self, x: torch.Tensor, norm: torch.Tensor, gate_up: torch.Tensor, out: torch.Tensor,
                    eps: float) -> None:
        y = torch.mm(rms_norm(x, norm, eps), gate_up.t()).view(x.shape[0], -1, 2)
        torch.mul(F.silu(y[..., 0]), y[..., 1], out=out)

    def moe(self, x: torch.Tensor, norm: torch.Tensor, router: torch.Tensor, experts_gate: torch.Tensor,
            experts_up: torch.Tensor, experts_down: torch.Tensor, out: torch.Tensor, eps: float, top_k: int,
            normalize: bool) -> None:
        h = rms_norm(x, norm, eps)
        probs = torch.softmax(torch.mm(h, router.t()).float(), dim=-1)
        top, chosen = torch.topk(probs, top_k, dim=-1)
        if normalize:
            top = top / top.sum(dim=-1, keepdim=True)
        top = top.to(x.dtype)
        if x.shape[0] == 1:  # one token: gather its experts by device index (graph-safe)
            e = chosen[0]
            gate = torch.bmm(experts_gate.index_select(0, e), h[0][None, :, None].expand(top_k, -1, 1))
            up = torch.bmm(experts_up.index_select(0, e), h[0][None, :, None].expand(top_k, -1, 1))
            y = torch.bmm(experts_down.index_select(0, e), F.silu(gate) * up)[..., 0]  # (top_k, hidden)
            torch.add(x, (y * top[0, :, None]).sum(dim=0, keepdim=True), out=out)
            return
        mixed = torch.zeros_like(x)
        for e in torch.unique(chosen).tolist():  # several tokens (eager only): each expert over its tokens
            rows, slot = torch.nonzero(chosen == e, as_tuple=True)
            hx = h[rows]
            y = F.linear(F.silu(F.linear(hx, experts_gate[e])) * F.linear(hx, experts_up[e]), experts_down[e])
            mixed.index_add_(0, rows, y * top[rows, slot, None])
        torch.add(x, mixed, out=out)

    def head(self, x: torch.Tensor, norm: torch.Tensor, weight: torch.Tensor, out: torch.Tensor, eps: float) -> None:
        torch.mm(rms_norm(x, norm, eps), weight.t(), out=out)

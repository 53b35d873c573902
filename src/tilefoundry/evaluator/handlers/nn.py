"""Handlers of the nn family."""

from __future__ import annotations

import torch

from ...ir.core.graph import Node
from ..context import EvalContext
from ..registry import handles
from .elementwise import narrow, wide


def compute(node: Node, attr: str = "compute_dtype") -> torch.dtype:
    """The torch dtype an op computes (or accumulates) in: its attribute, so compiled code computes the same."""
    return node.attrs[attr].torch_dtype


@handles("matmul")
def _matmul(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> torch.Tensor:
    acc = compute(node, "acc_dtype")
    return torch.matmul(ins[0].to(acc), ins[1].to(acc)).to(ins[0].dtype)


@handles("rms_norm")
def _rms_norm(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> torch.Tensor:
    x, w = ins
    cd = compute(node)
    xf = x.to(cd)
    normed = xf * torch.rsqrt(xf.square().mean(dim=-1, keepdim=True) + node.attrs["eps"])
    return narrow(wide(normed.to(w.dtype)) * wide(w), w).to(x.dtype)


@handles("layer_norm")
def _layer_norm(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> torch.Tensor:
    x, w, b = ins
    axis = node.attrs["axis"]
    cd = compute(node)
    xf = x.to(cd)
    mean = xf.mean(dim=axis, keepdim=True)
    var = (xf - mean).square().mean(dim=axis, keepdim=True)
    shape = [1] * x.dim()
    shape[axis] = -1
    y = (xf - mean) * torch.rsqrt(var + node.attrs["eps"]) * w.to(cd).reshape(shape) + b.to(cd).reshape(shape)
    return y.to(x.dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


@handles("rope")
def _rope(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> tuple[torch.Tensor, torch.Tensor]:
    q, k, cos_cache, sin_cache, pos = ins
    cd = compute(node)
    index = pos.long()
    rows = min(cos_cache.shape[0], sin_cache.shape[0])  # a positional table may hold fewer rows than declared
    if index.numel() and (int(index.min()) < 0 or int(index.max()) >= rows):
        raise ValueError(f"rope at {node.loc}: pos_ids [{int(index.min())}, {int(index.max())}] out of range for "
                         f"{rows} cache rows")
    # (seq, head_dim) rows -> (seq, 1, head_dim): broadcast over heads and every leading axis.
    cos = cos_cache.to(cd)[index].unsqueeze(-2)
    sin = sin_cache.to(cd)[index].unsqueeze(-2)
    out = []
    for x in (q, k):
        xf = x.to(cd)
        out.append((xf * cos + _rotate_half(xf) * sin).to(x.dtype))
    return out[0], out[1]

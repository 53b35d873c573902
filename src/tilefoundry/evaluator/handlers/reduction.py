"""Handlers of the reduction family."""

from __future__ import annotations

import torch

from ...ir.core.graph import Node
from ..context import EvalContext
from ..registry import handles
from .elementwise import FP8, narrow, wide
from .nn import compute


@handles("reduce")
def _reduce(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> torch.Tensor:
    x = ins[0]
    if any(x.shape[a] == 0 for a in node.attrs["axes"]):
        return _identity(node, x)
    acc = compute(node, "acc_dtype")
    return _reduce_wide(node, x.to(acc) if acc != x.dtype else wide(x)).to(x.dtype)


def _identity(node: Node, x: torch.Tensor) -> torch.Tensor:
    """A reduction over an empty axis: every result element is the kind's identity in x's dtype."""
    axes, keep, kind = node.attrs["axes"], node.attrs["keepdim"], node.attrs["kind"]
    shape = [1 if i in axes else n for i, n in enumerate(x.shape) if keep or i not in axes]
    if kind in ("sum", "abs_max"):
        value: float | int = 0
    elif kind == "mean":
        value = float("nan")
    else:
        value = _extreme(x.dtype, lowest=kind == "max")
    return torch.full(shape, value, dtype=torch.float32 if x.dtype in FP8 else x.dtype, device=x.device).to(x.dtype)


def _extreme(dtype: torch.dtype, *, lowest: bool) -> float | int:
    """-inf / +inf, or the dtype's lowest / highest finite value where it has no infinity (integers, fp8 e4m3)."""
    if not dtype.is_floating_point:
        info = torch.iinfo(dtype)
        return info.min if lowest else info.max
    inf = float("-inf") if lowest else float("inf")
    if torch.tensor(inf).to(dtype).float().isinf():
        return inf
    finfo = torch.finfo(dtype)
    return finfo.min if lowest else finfo.max


def _reduce_wide(node: Node, x: torch.Tensor) -> torch.Tensor:
    axes, keep, kind = node.attrs["axes"], node.attrs["keepdim"], node.attrs["kind"]
    if kind == "sum":
        return torch.sum(x, dim=axes, keepdim=keep, dtype=x.dtype)
    if kind == "mean":
        return torch.mean(x, dim=axes, keepdim=keep)
    if kind == "max":
        return torch.amax(x, dim=axes, keepdim=keep)
    if kind == "min":
        return torch.amin(x, dim=axes, keepdim=keep)
    return torch.amax(torch.abs(x), dim=axes, keepdim=keep)


@handles("softmax")
def _softmax(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> torch.Tensor:
    x = ins[0]
    return torch.softmax(x.to(compute(node)), dim=node.attrs["axis"]).to(x.dtype)


@handles("argmax")
def _argmax(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> torch.Tensor:
    return torch.argmax(wide(ins[0]), dim=node.attrs["axis"])


@handles("topk")
def _topk(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> tuple[torch.Tensor, torch.Tensor]:
    a = node.attrs
    values, indices = torch.topk(wide(ins[0]), a["k"], dim=a["axis"], largest=a.get("largest", True),
                                 sorted=a.get("sorted", True))
    return narrow(values, ins[0]), indices

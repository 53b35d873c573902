"""Handlers of the reduction family."""

from __future__ import annotations

import torch

from ...ir.core.graph import Node
from ..context import EvalContext
from ..registry import handles
from .elementwise import narrow, wide


@handles("reduce")
def _reduce(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> torch.Tensor:
    return narrow(_reduce_wide(node, wide(ins[0])), ins[0])


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
    return torch.softmax(x.float(), dim=node.attrs["axis"]).to(x.dtype)


@handles("argmax")
def _argmax(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> torch.Tensor:
    return torch.argmax(wide(ins[0]), dim=node.attrs["axis"])


@handles("topk")
def _topk(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> tuple[torch.Tensor, torch.Tensor]:
    a = node.attrs
    values, indices = torch.topk(wide(ins[0]), a["k"], dim=a["axis"], largest=a.get("largest", True),
                                 sorted=a.get("sorted", True))
    return narrow(values, ins[0]), indices

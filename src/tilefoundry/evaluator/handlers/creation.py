"""Handlers of the creation family."""

from __future__ import annotations

import torch

from ...ir.core.graph import Node
from ..context import EvalContext
from ..registry import handles
from .elementwise import FP8


@handles("arange")
def _arange(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> torch.Tensor:
    a = node.attrs
    dt = a["dtype"].torch_dtype
    out = torch.arange(ctx.dim(a["start"]), ctx.dim(a["end"]), a["step"],
                       dtype=torch.float32 if dt in FP8 else dt, device=ctx.device)
    return out.to(dt)


@handles("zeros")
def _zeros(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> torch.Tensor:
    shape = tuple(ctx.dim(d) for d in node.outputs[0].type.shape)
    return torch.zeros(shape, dtype=node.attrs["dtype"].torch_dtype, device=ctx.device)


@handles("full_like")
def _full_like(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> torch.Tensor:
    return torch.full_like(ins[0], node.attrs["value"])

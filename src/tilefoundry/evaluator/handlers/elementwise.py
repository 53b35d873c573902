"""Handlers of the elementwise family."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ...ir.core.graph import Node
from ..context import EvalContext
from ..registry import handles


def _div(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    # Integer division truncates toward zero, as C++ and CUDA do, so compiled code can agree.
    return torch.div(a, b, rounding_mode="trunc") if not a.is_floating_point() else torch.div(a, b)


_BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": _div, "max": torch.maximum,
    "min": torch.minimum, "pow": torch.pow, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
    "eq": torch.eq, "ne": torch.ne,
}
_UNARY = {
    "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "log": torch.log, "rsqrt": torch.rsqrt,
    "sqrt": torch.sqrt, "square": torch.square, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "silu": F.silu,
    "relu": torch.relu,
}


@handles(*_BINARY)
def _binary(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> torch.Tensor:
    return _BINARY[node.op](ins[0], ins[1])


@handles(*_UNARY)
def _unary(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> torch.Tensor:
    return _UNARY[node.op](ins[0])


@handles("gelu")
def _gelu(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> torch.Tensor:
    return F.gelu(ins[0], approximate=node.attrs["approximate"])


@handles("cast")
def _cast(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> torch.Tensor:
    return ins[0].to(node.attrs["dtype"].torch_dtype)


@handles("clamp")
def _clamp(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> torch.Tensor:
    return torch.clamp(ins[0], node.attrs.get("min_val"), node.attrs.get("max_val"))


@handles("where")
def _where(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> torch.Tensor:
    return torch.where(ins[0], ins[1], ins[2])


@handles("constant")
def _constant(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> torch.Tensor:
    return torch.tensor(node.attrs["value"], dtype=node.attrs["dtype"].torch_dtype, device=ctx.device)

"""Handlers of the elementwise family."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ...ir.core.graph import Node
from ..context import EvalContext
from ..registry import handles

# torch has no CPU kernels for arithmetic, comparison or reduction on its 8-bit float types. Ops on
# them compute in f32 and round the result back once, as torch itself computes bf16 / f16 on CPU.
FP8 = (torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e8m0fnu)


def wide(t: torch.Tensor) -> torch.Tensor:
    """``t`` in f32 when it is an 8-bit float, else unchanged."""
    return t.float() if t.dtype in FP8 else t


def narrow(t: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A result computed on ``wide`` operands, back in ``like``'s 8-bit float dtype."""
    return t.to(like.dtype) if like.dtype in FP8 and t.is_floating_point() else t


def _div(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    # Integer division truncates toward zero, as C++ and CUDA do, so compiled code can agree.
    return torch.div(a, b, rounding_mode="trunc") if not a.is_floating_point() else torch.div(a, b)


_BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": _div, "max": torch.maximum,
    "min": torch.minimum, "pow": torch.pow, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
    "eq": torch.eq, "ne": torch.ne, "floor_div": torch.floor_divide, "mod": torch.remainder,
    "logical_and": torch.logical_and, "logical_or": torch.logical_or,
}
_UNARY = {
    "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "log": torch.log, "rsqrt": torch.rsqrt,
    "sqrt": torch.sqrt, "square": torch.square, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "silu": F.silu,
    "relu": torch.relu, "exp2": torch.exp2, "log2": torch.log2, "ceil": torch.ceil, "floor": torch.floor,
    "round": torch.round, "logical_not": torch.logical_not,
}


@handles(*_BINARY)
def _binary(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> torch.Tensor:
    return narrow(_BINARY[node.op](wide(ins[0]), wide(ins[1])), ins[0])


@handles(*_UNARY)
def _unary(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> torch.Tensor:
    return narrow(_UNARY[node.op](wide(ins[0])), ins[0])


@handles("softplus")
def _softplus(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> torch.Tensor:
    a = node.attrs
    return narrow(F.softplus(wide(ins[0]), beta=a["beta"], threshold=a["threshold"]), ins[0])


@handles("gelu")
def _gelu(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> torch.Tensor:
    return narrow(F.gelu(wide(ins[0]), approximate=node.attrs["approximate"]), ins[0])


@handles("cast")
def _cast(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> torch.Tensor:
    return ins[0].to(node.attrs["dtype"].torch_dtype)


@handles("clamp")
def _clamp(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> torch.Tensor:
    return narrow(torch.clamp(wide(ins[0]), node.attrs.get("min_val"), node.attrs.get("max_val")), ins[0])


@handles("where")
def _where(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> torch.Tensor:
    return torch.where(ins[0], ins[1], ins[2])


@handles("constant")
def _constant(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> torch.Tensor:
    return torch.tensor(node.attrs["value"], dtype=node.attrs["dtype"].torch_dtype, device=ctx.device)

"""Handlers of the shape family."""

from __future__ import annotations

import torch

from ...ir.core.graph import Node
from ..context import EvalContext
from ..registry import handles
from .elementwise import FP8, narrow, wide


@handles("reshape")
def _reshape(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> torch.Tensor:
    return ins[0].reshape(tuple(ctx.dim(d) for d in node.attrs["new_shape"]))


@handles("transpose")
def _transpose(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> torch.Tensor:
    return ins[0].permute(node.attrs["perm"])


@handles("slice")
def _slice(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> torch.Tensor:
    x = ins[0]
    index = []
    for axis, (st, sz, sd) in enumerate(zip(node.attrs["starts"], node.attrs["sizes"], node.attrs["strides"])):
        start, size = ctx.dim(st), ctx.dim(sz)
        stop = start + (size - 1) * sd + 1 if size > 0 else start
        if start < 0 or stop > x.shape[axis]:
            raise ValueError(f"slice at {node.loc}: axis {axis} reads [{start}, {stop}) of extent {x.shape[axis]}")
        index.append(slice(start, stop, sd))
    return x[tuple(index)]


@handles("concat")
def _concat(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> torch.Tensor:
    return torch.cat(ins, dim=node.attrs["axis"])


@handles("stack")
def _stack(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> torch.Tensor:
    return torch.stack(ins, dim=node.attrs["axis"])


@handles("split")
def _split(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> tuple[torch.Tensor, ...]:
    return tuple(torch.chunk(ins[0], node.attrs["num_splits"], dim=node.attrs["axis"]))


def _check_index(node: Node, x: torch.Tensor, index: torch.Tensor) -> None:
    extent = x.shape[node.attrs["dim"]]
    if index.numel() and (int(index.min()) < 0 or int(index.max()) >= extent):
        raise ValueError(f"{node.op} at {node.loc}: indices [{int(index.min())}, {int(index.max())}] "
                         f"out of range for extent {extent}")


@handles("index_select")
def _index_select(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> torch.Tensor:
    x, index = ins
    _check_index(node, x, index)
    return torch.index_select(x, node.attrs["dim"], index)


@handles("index_add")
def _index_add(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> torch.Tensor:
    x, index, source = ins
    _check_index(node, x, index)
    out = torch.index_add(wide(x), node.attrs["dim"], index.long(), wide(source), alpha=node.attrs["alpha"])
    return narrow(out, x)


@handles("index_copy")
def _index_copy(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> torch.Tensor:
    x, index, source = ins
    _check_index(node, x, index)
    if x.dtype in FP8:  # torch has no CPU copy kernel for them: move their bytes, every bit kept
        out = torch.index_copy(x.view(torch.uint8), node.attrs["dim"], index.long(), source.view(torch.uint8))
        return out.view(x.dtype)
    return torch.index_copy(x, node.attrs["dim"], index.long(), source)


@handles("repeat_interleave")
def _repeat_interleave(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> torch.Tensor:
    return torch.repeat_interleave(ins[0], node.attrs["repeats"], dim=node.attrs["axis"])

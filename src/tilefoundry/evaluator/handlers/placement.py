"""Handlers of placement ops: the value is unchanged; only lowering reads placement."""

from __future__ import annotations

import torch

from ...ir.core.graph import Node
from ..context import EvalContext
from ..registry import handles


@handles("reshard", "local")
def _identity(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> torch.Tensor:
    return ins[0]

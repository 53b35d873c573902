"""One torch handler per HIR op."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..ir.core.graph import Node

Handler = Callable[[Node, list[torch.Tensor], "Any"], "torch.Tensor | tuple[torch.Tensor, ...]"]

HANDLERS: dict[str, Handler] = {}


def handles(*ops: str) -> Callable[[Handler], Handler]:
    """Register the decorated function as the torch handler of ``ops``."""

    def deco(fn: Handler) -> Handler:
        for op in ops:
            if op in HANDLERS:
                raise ValueError(f"op {op!r} has two evaluator handlers")
            HANDLERS[op] = fn
        return fn

    return deco

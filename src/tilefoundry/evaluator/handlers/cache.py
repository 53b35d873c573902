"""Handler of cache_update: a new cache, the given one untouched."""

from __future__ import annotations

import torch

from ...ir.core.graph import Node
from ..context import EvalContext
from ..registry import handles


@handles("cache_update")
def _cache_update(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> torch.Tensor:
    cache, cur_pos, s, new = ins
    pos, n = int(cur_pos), int(s)
    if pos < 0 or n < 0 or n > new.shape[1] or pos + n > cache.shape[1]:
        raise ValueError(
            f"cache_update at {node.loc}: writing {n} entries at position {pos} needs 0 <= s <= {new.shape[1]} "
            f"(new's length) and cur_pos + s <= {cache.shape[1]} (the cache's length)"
        )
    out = cache.clone()
    out[:, pos:pos + n] = new[:, :n]
    return out

"""State ops: cache_update writes new entries into a cache, returning a new cache value."""

from __future__ import annotations

from typing import Any

from ..core.op import register_op
from ..types.tensor_type import TensorType
from .rules import check_dims_equal, require_int, require_rank, same_dtype


@register_op("cache_update", "state")
def _cache_update(types: tuple[TensorType, ...], attrs: dict[str, Any]) -> TensorType:
    """cache: (batch, max_len, ...); new: (batch, s_max, ...); cur_pos, s: rank-0 ints.

    The result is a new cache equal to ``cache`` with ``new[:, :s]`` written at ``cur_pos`` on axis 1.
    """
    cache, cur_pos, s, new = types
    same_dtype((cache, new))
    require_int(cur_pos, "cur_pos")
    require_int(s, "s")
    require_rank(cur_pos, 0, "cur_pos")
    require_rank(s, 0, "s")
    require_rank(new, cache.rank, "new")
    if cache.rank < 2:
        require_rank(cache, 2, "cache")
    check_dims_equal(cache.shape[0], new.shape[0], "batch")
    for i in range(2, cache.rank):
        check_dims_equal(cache.shape[i], new.shape[i], f"cache axis {i}")
    return TensorType(cache.shape, cache.dtype, cache.layout, cache.storage)

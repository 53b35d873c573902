"""Scratch buffers two kernels keep between launches, zero-filled once and left zeroed by every launch.

* ``gemv_argmax`` / ``rmsnorm_gemv_argmax`` and the greedy entries: an int64 ticket, one key per token and a
  not-finite flag (greedy), which the last CTA reads into the tokens and zeroes again.
* ``decode_attention``: per (KV head, token tile) a ticket, then every context slice's log-sum-exp and
  normalised output; the size comes from the library (``attention_workspace_bytes``), so the layout has
  one home, in C++.

Both are safe to replay in a CUDA graph, one launch at a time (two launches running at once, on two
streams, each need their own).

:class:`Scratches` holds the buffers a kernel set's slots write between two of their kernels, one per shape.
"""

from __future__ import annotations

from typing import Any

import torch


def argmax_workspace(tokens: int, device: torch.device | str) -> torch.Tensor:
    """The zeroed workspace of an argmax or greedy GEMV over ``tokens`` rows of x."""
    if tokens < 1:
        raise ValueError(f"argmax_workspace: tokens must be >= 1, got {tokens}")
    return torch.zeros(tokens + 2, dtype=torch.int64, device=device)


def attention_workspace(kernels: Any, tokens: int, heads: int, kv_heads: int, head_dim: int, *,
                        device: torch.device | str, splits: int = 0) -> torch.Tensor:
    """The zeroed workspace of ``decode_attention`` for these sizes (``splits`` 0: the automatic count).

    ``kernels`` is the loaded library (:func:`~tilefoundry.engine.load_kernels`).
    """
    device = torch.device(device)
    index = device.index if device.index is not None else (torch.cuda.current_device() if device.type == "cuda"
                                                            else 0)
    nbytes = int(kernels.attention_workspace_bytes(tokens, heads, kv_heads, head_dim, splits, index))
    return torch.zeros(nbytes, dtype=torch.uint8, device=device)


class Scratches:
    """The tensors a kernel set keeps for its slots' intermediate results, one per (shape, dtype, device): a CUDA
    graph captured once replays into the same memory."""

    def __init__(self) -> None:
        self._kept: dict[tuple, torch.Tensor] = {}

    def get(self, shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
        """The kept tensor of ``shape`` with ``like``'s dtype and device (made, uninitialised, the first time)."""
        key = (tuple(shape), like.dtype, like.device)
        have = self._kept.get(key)
        if have is None:
            have = self._kept[key] = torch.empty(shape, dtype=like.dtype, device=like.device)
        return have

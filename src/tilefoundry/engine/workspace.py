"""The buffers a kernel set's slots write between two of their kernels (:class:`Scratches`), one per shape."""

from __future__ import annotations

import torch


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

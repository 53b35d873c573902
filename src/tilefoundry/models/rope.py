"""Rotary tables: cos / sin of position x inverse frequency, as Hugging Face computes them."""

from __future__ import annotations

import math

import torch

from .config import RopeConfig


def inverse_frequencies(rope: RopeConfig, head_dim: int) -> torch.Tensor:
    """The f32 inverse frequencies (head_dim / 2 of them), with the config's scaling applied."""
    inv = 1.0 / (rope.theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    if rope.rope_type == "linear":
        return inv / rope.factor
    if rope.rope_type == "llama3":
        low_wavelen = rope.original_max_position / rope.low_freq_factor
        high_wavelen = rope.original_max_position / rope.high_freq_factor
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > low_wavelen, inv / rope.factor, inv)
        smooth = (rope.original_max_position / wavelen - rope.low_freq_factor) / (
            rope.high_freq_factor - rope.low_freq_factor)
        blended = (1 - smooth) * scaled / rope.factor + smooth * scaled
        medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
        return torch.where(medium, blended, scaled)
    return inv


_TABLES: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}


def rope_tables(rope: RopeConfig, head_dim: int, length: int, dtype: torch.dtype,
                device: torch.device | str) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin), each (length, head_dim) in ``dtype``; halves duplicated (rotate-half convention).

    These are the ``[max_pos, D]`` caches ``tf.rope`` gathers rows of, for q / k laid out ``[..., S, H, D]``.

    Tables are pure functions of their arguments, so they are memoised per device.
    """
    key = (rope, head_dim, length, dtype, str(torch.device(device)))
    if key not in _TABLES:
        inv = inverse_frequencies(rope, head_dim)
        angles = torch.arange(length, dtype=torch.float32)[:, None] * inv[None, :]
        emb = torch.cat((angles, angles), dim=-1)
        _TABLES[key] = (emb.cos().to(dtype).to(device), emb.sin().to(dtype).to(device))
    return _TABLES[key]

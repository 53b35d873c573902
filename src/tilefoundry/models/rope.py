"""Rotary tables: cos / sin of position x inverse frequency, as transformers computes them.

The inverse frequencies and the attention scaling (yarn's and longrope's ``attention_factor``, which multiplies
cos and sin) come from transformers' own ``ROPE_INIT_FUNCTIONS``, handed a transformers config that carries the
parsed :class:`~.config.RopeConfig`; the table is then what the families' rotary embedding in transformers
(``LlamaRotaryEmbedding``, the same code in Qwen2 / Qwen3 / Qwen3-MoE) returns for each position.

Which frequencies a position is rotated with:

* ``default``, ``linear``, ``llama3``, ``yarn``, ``proportional``: the same for every position whatever the
  sequence, so one table built once is exact for every forward.
* ``longrope`` and ``dynamic``: transformers chooses them per forward, from ``seq_len`` = the largest position of
  that forward + 1 (``dynamic_rope_update``). longrope uses ``long_factor`` when ``seq_len >
  original_max_position_embeddings``, ``short_factor`` otherwise; dynamic NTK recomputes the frequencies for
  ``seq_len`` when it exceeds ``max_position_embeddings`` and keeps the unscaled ones below. Keys cached by an
  earlier forward keep the rotation they were given.

So there are two kinds of table. ``rope_tables(..., seq_len=n)`` is the table of one forward whose last position
is ``n - 1``: every row is what transformers rotates that forward's positions with, exact for a prefill, a
chunk or a decode step alike (the causal LM's own step takes it per forward). ``rope_tables(...)`` without
``seq_len`` is the *step table*: row ``p`` is what transformers rotates position ``p`` with when ``p`` is the last
position of its forward (a decode step, ``seq_len = p + 1``): exact for every decode step and for every prefill
whose last position is below the switch (``original_max_position_embeddings`` for longrope,
``max_position_embeddings`` for dynamic). A prefill that reaches past the switch is where one fixed table
cannot follow transformers: transformers rotates all of its positions, the earlier ones too, with the long
(longrope) or rescaled (dynamic) frequencies, while the step table keeps the short / unscaled rows below the
switch: so the decode engine's prefill reads its forward's own table (``DecoderWeights.forward_tables``) and its
decode steps the step table. For the position-independent types the two kinds are the same table.

transformers' dynamic NTK also keeps state between forwards (its grown frequencies are kept for a later, shorter
forward above ``max_position_embeddings``); the tables follow one sequence growing from its first token, as a
generation does. The families serve no position past ``max_position_embeddings`` (their caches hold at most
that many), so every forward they run gets dynamic NTK's unscaled frequencies, exactly as transformers gives
them; the tables past that length exist for tables asked to be longer.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

import torch

from .config import RopeConfig

__all__ = ["inverse_frequencies", "rope_tables"]


def _transformers_config(rope: RopeConfig, head_dim: int) -> Any:
    """A transformers config carrying ``rope`` for a head of ``head_dim``, what ``ROPE_INIT_FUNCTIONS`` read."""
    from transformers import LlamaConfig

    config = LlamaConfig(hidden_size=head_dim, num_attention_heads=1, num_key_value_heads=1, head_dim=head_dim,
                         max_position_embeddings=rope.max_position_embeddings)
    # Set after construction: the schema has validated the parameters, and transformers' own validation of them
    # only logs warnings (a yarn factor that differs from max / original max positions, say).
    config.rope_parameters = rope.transformers_parameters()
    return config


@functools.lru_cache(maxsize=64)
def _init(rope: RopeConfig, head_dim: int, seq_len: int | None) -> tuple[torch.Tensor, float]:
    """transformers' ``ROPE_INIT_FUNCTIONS[rope_type](config, seq_len=seq_len)``, on the CPU, memoised."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    if rope.rope_type == "default":
        # The families compute default frequencies in their rotary embedding's compute_default_rope_parameters,
        # over the whole head: linear scaling by 1 is the same computation, term for term.
        rope = replace(rope, rope_type="linear", factor=1.0, partial_rotary_factor=None)
    init = ROPE_INIT_FUNCTIONS.get(rope.rope_type)
    if init is None:
        raise ValueError(f"rope_type {rope.rope_type!r} is not one of transformers' ROPE_INIT_FUNCTIONS "
                         f"({', '.join(sorted(ROPE_INIT_FUNCTIONS))}) nor 'default'; parse the config with "
                         "tilefoundry.models.parse_config, which refuses it")
    # dynamic_rope_update hands dynamic NTK its seq_len as a tensor (largest position id + 1), so the new base
    # is computed in f32; do the same so the frequencies are transformers' to the bit.
    arg = torch.tensor(seq_len, dtype=torch.int64) if seq_len is not None and rope.rope_type == "dynamic" else seq_len
    inv, scaling = init(_transformers_config(rope, head_dim), "cpu", seq_len=arg)
    return inv.to(torch.float32), float(scaling)


def _init_seq_len(rope: RopeConfig, seq_len: int | None) -> int | None:
    """The ``seq_len`` transformers computes the frequencies of a forward of ``seq_len`` positions with (None:
    the frequencies its rotary embedding is built with), following ``dynamic_rope_update``."""
    if seq_len is None:
        return None
    if rope.rope_type == "longrope":
        original = rope.original_max_position_embeddings
        assert original is not None  # parse_config fills it in for longrope
        return original + 1 if seq_len > original else None
    if rope.rope_type == "dynamic" and seq_len > rope.max_position_embeddings:
        return seq_len
    return None


def inverse_frequencies(rope: RopeConfig, head_dim: int, *, seq_len: int | None = None) -> tuple[torch.Tensor, float]:
    """The f32 inverse frequencies (``head_dim / 2`` of them) and the attention scaling that multiplies cos and
    sin, as transformers' rotary embedding uses them in a forward whose largest position is ``seq_len - 1``
    (None: as it is built, before any forward; the same for the position-independent types).

    Computed by transformers' ``ROPE_INIT_FUNCTIONS``; the tensor is shared, do not modify it.
    """
    return _init(rope, head_dim, _init_seq_len(rope, seq_len))


def _row_groups(rope: RopeConfig, length: int, seq_len: int | None) -> tuple[tuple[int, int, int | None], ...]:
    """The table's rows as (start, stop, init seq_len) runs that share their frequencies."""
    if seq_len is not None:
        return ((0, length, _init_seq_len(rope, seq_len)),)
    if rope.rope_type == "longrope":  # rows p > original max - 1 are processed with seq_len p + 1 > original max
        switch = min(rope.original_max_position_embeddings or length, length)
        groups = [(0, switch, None), (switch, length, _init_seq_len(rope, switch + 1))]
        return tuple(g for g in groups if g[0] < g[1])
    if rope.rope_type == "dynamic":  # each row past max_position_embeddings has frequencies of its own
        switch = min(rope.max_position_embeddings, length)
        return ((0, switch, None), *((p, p + 1, p + 1) for p in range(switch, length)))
    return ((0, length, None),)


_TABLES: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}


def rope_tables(rope: RopeConfig, head_dim: int, length: int, dtype: torch.dtype, device: torch.device | str, *,
                seq_len: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin), each (length, head_dim) in ``dtype``; halves duplicated (rotate-half convention), attention
    scaling applied.

    These are the ``[max_pos, D]`` caches ``tf.rope`` gathers rows of, for q / k laid out ``[..., S, H, D]``.
    With ``seq_len``, the table of one forward whose last position is ``seq_len - 1``; without, the step table
    (row ``p`` as transformers rotates position ``p`` in a decode step). The module docstring says where the two
    differ (longrope and dynamic NTK only).

    Tables are pure functions of their arguments, so they are memoised per device.
    """
    groups = _row_groups(rope, length, seq_len)
    key = (rope, head_dim, length, groups, dtype, str(torch.device(device)))
    if key not in _TABLES:
        cos, sin = [], []
        for start, stop, init_seq_len in groups:
            inv, scaling = _init(rope, head_dim, init_seq_len)
            # as the rotary embedding's forward: f32 positions x f32 frequencies, cos / sin times the scaling
            angles = torch.arange(start, stop, dtype=torch.float32)[:, None] * inv[None, :]
            emb = torch.cat((angles, angles), dim=-1)
            cos.append(emb.cos() * scaling)
            sin.append(emb.sin() * scaling)
        _TABLES[key] = (torch.cat(cos).to(dtype).to(device), torch.cat(sin).to(dtype).to(device))
    return _TABLES[key]

"""The generation loop: prefill, then decode, over any model exposing the causal-LM methods.

It drives ``init_caches`` / ``prepare_inputs_for_generation`` / ``forward`` / ``append_cache`` on a
LoadedModule or a runtime twin alike. The caller (this loop) owns the caches and only ever extends
the token-ID tensor; everything else a step needs comes from the model's own methods.
"""

from __future__ import annotations

import math
import numbers
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

SEED_LIMIT = 2**64
"""Seeds are integers in ``[0, SEED_LIMIT)``: what a torch generator takes."""


def check_temperature(value: object) -> float:
    """``value`` as a temperature: a finite number >= 0 (0 is greedy); ValueError / TypeError otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"temperature must be a number, got {type(value).__name__} {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"temperature must be a finite number >= 0 (0 is greedy), got {value!r}")
    return float(value)


def check_top_k(value: object) -> int:
    """``value`` as top_k: an integer >= 0 (0 keeps every token)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"top_k must be an integer, got {type(value).__name__} {value!r}")
    if value < 0:
        raise ValueError(f"top_k must be >= 0 (0 keeps every token), got {value}")
    return int(value)


def check_top_p(value: object) -> float:
    """``value`` as top_p: a number in (0, 1] (1 keeps every token)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"top_p must be a number, got {type(value).__name__} {value!r}")
    if not 0.0 < value <= 1.0:
        raise ValueError(f"top_p must lie in (0, 1] (1 keeps every token), got {value!r}")
    return float(value)


def check_seed(value: object) -> int:
    """``value`` as a seed: an integer in [0, 2**64)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"seed must be an integer, got {type(value).__name__} {value!r}")
    if not 0 <= value < SEED_LIMIT:
        raise ValueError(f"seed must be an integer in [0, 2**64 - 1], got {value}")
    return int(value)


@dataclass(frozen=True)
class Sampling:
    """How the next token is chosen: greedy when ``temperature`` is 0, else sampled with a seed.

    ``temperature`` divides the logits (after subtracting their maximum, so nothing overflows): a finite
    number >= 0. A tiny positive temperature (1e-45, say) pushes every token but the most likely ones to
    probability exactly 0, so it samples among the tokens tied for the highest logit: greedy, with exact
    ties broken by the seeded draw. Probabilities are never NaN. ``top_k`` (0: all) and ``top_p`` (1: all)
    then narrow the candidates; ``seed`` (an integer in [0, 2**64)) fixes the draw.

    Raises:
        TypeError / ValueError: a field of the wrong type or out of its range (the message names it).
    """

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "temperature", check_temperature(self.temperature))
        object.__setattr__(self, "top_k", check_top_k(self.top_k))
        object.__setattr__(self, "top_p", check_top_p(self.top_p))
        object.__setattr__(self, "seed", check_seed(self.seed))


class NonFiniteLogitsError(ValueError):
    """A generation step produced NaN or infinite logits, so no token can be chosen; names the step."""


@dataclass
class GenerationResult:
    """Generated token ids and the timings of the two phases."""

    tokens: list[int] = field(default_factory=list)
    prefill_seconds: float = 0.0
    decode_seconds: float = 0.0
    stopped_by: int | None = None

    @property
    def decode_tokens_per_second(self) -> float:
        """Tokens after the first, per second of decoding."""
        n = len(self.tokens) - 1
        return n / self.decode_seconds if n > 0 and self.decode_seconds > 0 else 0.0


def choose_token(logits: torch.Tensor, sampling: Sampling, generator: torch.Generator | None) -> int:
    """The next token from one row of finite logits.

    Sampling works in float64 on ``(logits - max) / temperature``: the most likely token sits at 0 and
    every other at or below it, so the softmax is defined for any positive temperature (no overflow, no
    NaN); a token whose probability underflows is never drawn.
    """
    if sampling.temperature == 0.0:
        return int(torch.argmax(logits.float()))
    scaled = logits.to(torch.float64)
    scaled = (scaled - scaled.max()) / sampling.temperature
    if sampling.top_k:
        kth = torch.topk(scaled, min(sampling.top_k, scaled.numel())).values[-1]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    if sampling.top_p < 1.0:
        sorted_logits, order = torch.sort(scaled, descending=True)
        probs = torch.softmax(sorted_logits, dim=-1)
        drop = probs.cumsum(dim=-1) - probs >= sampling.top_p  # keeps the first always
        scaled = scaled.masked_fill(torch.zeros_like(drop).scatter(0, order, drop), float("-inf"))
    probs = torch.softmax(scaled, dim=-1).cpu()
    return int(torch.multinomial(probs, 1, generator=generator))


def _refuse_nonfinite(logits: torch.Tensor, step: int, prompt_len: int, produced: int) -> None:
    """Stop generation at a step whose logits are not all finite, naming the step and what it held."""
    finite = torch.isfinite(logits)
    if bool(finite.all()):
        return
    nan = int(torch.isnan(logits).sum())
    inf = int((~finite).sum()) - nan
    what = f"the prefill of the {prompt_len} prompt tokens" if step == 0 else f"the decode of token {produced + 1}"
    raise NonFiniteLogitsError(
        f"generation step {step} ({what}) produced non-finite logits ({nan} NaN, {inf} Inf of "
        f"{logits.numel()}), so no token can be chosen; generation stopped after {produced} token(s). The "
        "weights or the model's arithmetic are broken: check the checkpoint for NaN/Inf weights, or run the "
        "reference backend"
    )


def generate(model: Any, prompt_ids: Sequence[int] | torch.Tensor, max_new_tokens: int, *,
             sampling: Sampling = Sampling(), stop_tokens: Sequence[int] = (), device: str = "cpu",
             on_token: Callable[[int], None] | None = None) -> GenerationResult:
    """Generate up to ``max_new_tokens`` tokens after ``prompt_ids`` with ``model``.

    ``model`` is a LoadedModule or a runtime twin of a causal LM. Generation stops early at a token in
    ``stop_tokens``; ``on_token`` is called with each token as it is chosen.

    Raises:
        NonFiniteLogitsError: a step's logits hold NaN or Inf (the message names the step).
    """
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    prompt = torch.as_tensor(prompt_ids, dtype=torch.int64).flatten().cpu()
    if prompt.numel() == 0:
        raise ValueError("the prompt holds no tokens")
    # One buffer for prompt and answer; each step sees a view of its active prefix (spec 1.1.2).
    buffer = torch.empty(prompt.numel() + max_new_tokens, dtype=torch.int64)
    buffer[: prompt.numel()] = prompt
    total = prompt.numel()
    generator = torch.Generator().manual_seed(sampling.seed) if sampling.temperature > 0 else None
    stops = set(stop_tokens)
    result = GenerationResult()
    caches = model.init_caches(device=device)
    step = 0
    with torch.inference_mode():
        for i in range(max_new_tokens):
            start = time.perf_counter()
            inputs = model.prepare_inputs_for_generation(buffer[:total], step, caches, device=device)
            outputs = model(*inputs)
            caches = model.append_cache(caches, outputs)
            logits = outputs[0][-1]
            _refuse_nonfinite(logits, i, prompt.numel(), len(result.tokens))
            token = choose_token(logits, sampling, generator)
            elapsed = time.perf_counter() - start
            if i == 0:
                result.prefill_seconds = elapsed
            else:
                result.decode_seconds += elapsed
            step = total
            buffer[total] = token
            total += 1
            result.tokens.append(token)
            if on_token is not None:
                on_token(token)
            if token in stops:
                result.stopped_by = token
                break
    return result

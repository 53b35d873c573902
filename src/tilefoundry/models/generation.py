"""The generation loop: prefill, then decode, over any model exposing the causal-LM methods.

It drives ``init_caches`` / ``prepare_inputs_for_generation`` / ``forward`` / ``append_cache`` on a
LoadedModule or a runtime twin alike. The caller (this loop) owns the caches and only ever extends
the token-ID tensor; everything else a step needs comes from the model's own methods.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass(frozen=True)
class Sampling:
    """How the next token is chosen: greedy when ``temperature`` is 0, else sampled with a seed."""

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0 (0 keeps every token), got {self.top_k}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must lie in (0, 1], got {self.top_p}")


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
    """The next token from one row of logits."""
    logits = logits.float()
    if sampling.temperature == 0.0:
        return int(torch.argmax(logits))
    logits = logits / sampling.temperature
    if sampling.top_k:
        kth = torch.topk(logits, min(sampling.top_k, logits.numel())).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if sampling.top_p < 1.0:
        sorted_logits, order = torch.sort(logits, descending=True)
        cumulative = torch.softmax(sorted_logits, dim=-1).cumsum(dim=-1)
        drop = cumulative - torch.softmax(sorted_logits, dim=-1) >= sampling.top_p  # keeps the first always
        logits = logits.masked_fill(torch.zeros_like(drop).scatter(0, order, drop), float("-inf"))
    probs = torch.softmax(logits, dim=-1).cpu()
    return int(torch.multinomial(probs, 1, generator=generator))


def generate(model: Any, prompt_ids: Sequence[int] | torch.Tensor, max_new_tokens: int, *,
             sampling: Sampling = Sampling(), stop_tokens: Sequence[int] = (), device: str = "cpu",
             on_token: Callable[[int], None] | None = None) -> GenerationResult:
    """Generate up to ``max_new_tokens`` tokens after ``prompt_ids`` with ``model``.

    ``model`` is a LoadedModule or a runtime twin of a causal LM. Generation stops early at a token in
    ``stop_tokens``; ``on_token`` is called with each token as it is chosen.
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
            token = choose_token(outputs[0][-1], sampling, generator)
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

"""The generation loop: prefill, then decode, over any model exposing the causal-LM methods, or the decode engine.

Two ways to run a step, one loop choosing tokens:

* the model's own step: the loop drives ``init_caches`` / ``prepare_inputs_for_generation`` / ``forward`` /
  ``append_cache`` on a LoadedModule or a runtime twin alike. The caller (this loop) owns the caches and only
  ever extends the token-ID tensor; everything else a step needs comes from the model's own methods. Caches
  are made for the prompt plus ``max_new_tokens`` positions (``init_caches(capacity=...)`` when the model's
  method takes a capacity);
* the decode engine (``tilefoundry.engine.DecodeEngine``), for a loaded twin that describes itself to it (the
  default for those): its own in-place cache and, on CUDA, one CUDA graph replayed per token. One engine is
  kept per twin and reused by later calls (its cache grows when a call needs more positions).
"""

from __future__ import annotations

import inspect
import math
import numbers
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..engine import DecodeEngine, DecoderSpec, greedy_choice

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
    """Generated token ids, the timings of the two phases, why generation stopped and what ran the steps.

    ``stopped_by`` is the reason: ``"eos"`` (a stop token was chosen; ``stop_token`` holds its id, the last of
    ``tokens``), ``"stop_string"`` (the text reached a stop string; ``TextSession`` sets ``stop_string`` and
    ``text``) or ``"max_new_tokens"`` (the budget ran out). ``runner`` is ``model step`` (the model's own
    forward) or ``decode engine (...)`` with the engine's kernels and CUDA-graph status. ``text`` is the
    generated text when a ``TextSession`` generated it (ending before a matched stop string), else None.
    """

    tokens: list[int] = field(default_factory=list)
    prefill_seconds: float = 0.0
    decode_seconds: float = 0.0
    stopped_by: str = "max_new_tokens"
    stop_token: int | None = None
    stop_string: str | None = None
    text: str | None = None
    runner: str = ""

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


def _checked_choice(logits: torch.Tensor, sampling: Sampling, generator: torch.Generator | None, step: int,
                    prompt_len: int, produced: int) -> int:
    """The next token from finite logits (choose_token), refusing non-finite ones; greedy asks the device once."""
    if sampling.temperature == 0.0:
        token, finite = greedy_choice(logits)
        if not finite:
            _refuse_nonfinite(logits, step, prompt_len, produced)
        return token
    _refuse_nonfinite(logits, step, prompt_len, produced)
    return choose_token(logits, sampling, generator)


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
             on_token: Callable[[int], None] | None = None, stop_when: Callable[[int], bool] | None = None,
             engine: bool | None = None) -> GenerationResult:
    """Generate up to ``max_new_tokens`` tokens after ``prompt_ids`` with ``model``.

    ``model`` is a LoadedModule or a runtime twin of a causal LM, or a DecodeEngine (run as it is; its cache
    grows when the request needs more positions). Generation stops early at a token in
    ``stop_tokens`` (``stopped_by`` ``"eos"``); ``on_token`` is called with each token as it is chosen, then
    ``stop_when``, whose True ends generation there (``stopped_by`` ``"stop_string"``: TextSession's stop
    strings). ``engine`` chooses how steps run:
    None (default) runs a loaded twin that describes itself to the decode engine (those ``build_twin`` makes)
    through the engine, on any device (on this project's 2-core CPU it decodes SmolLM2-135M about 10% faster
    than the twin's own step, the same tokens), and anything else through the model's own step; True insists
    on the engine; False insists on the model's step.

    Raises:
        NonFiniteLogitsError: a step's logits hold NaN or Inf (the message names the step).
        TypeError: ``engine=True`` for a model the engine cannot run.
        ValueError: the prompt and new tokens need more positions than the model has, or the twin's weights
            are not on ``device`` (engine).
    """
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    prompt = torch.as_tensor(prompt_ids, dtype=torch.int64).flatten().cpu()
    if prompt.numel() == 0:
        raise ValueError("the prompt holds no tokens")
    capacity = prompt.numel() + max_new_tokens
    if isinstance(model, DecodeEngine):
        if engine is False:
            raise TypeError("generate(engine=False) runs a model's own step, and a DecodeEngine is no model: pass "
                            "the twin it was built from")
        steps: _Steps = _EngineSteps(_ready(model, capacity, device), prompt)
    elif _runs_on_engine(model, device, engine):
        steps = _EngineSteps(engine_for(model, capacity, device), prompt)
    else:
        steps = _ModelSteps(model, prompt, capacity, device)
    generator = torch.Generator().manual_seed(sampling.seed) if sampling.temperature > 0 else None
    stops = set(stop_tokens)
    result = GenerationResult(runner=steps.runner)

    def take(token: int) -> bool:
        """Record a chosen token; True when it ends generation (a stop token, or ``stop_when`` says so)."""
        result.tokens.append(token)
        if on_token is not None:
            on_token(token)
        if token in stops:
            result.stopped_by, result.stop_token = "eos", token
            return True
        if stop_when is not None and stop_when(token):
            result.stopped_by = "stop_string"
            return True
        return False

    with torch.inference_mode():
        start = time.perf_counter()
        token = _checked_choice(steps.first(), sampling, generator, 0, prompt.numel(), 0)
        result.prefill_seconds = time.perf_counter() - start
        stopped = take(token)
        if not stopped and max_new_tokens > 1 and sampling.temperature == 0.0 and isinstance(steps, _EngineSteps):
            # Greedy on the engine: the steps pick their tokens themselves, the next queued before this one is read.
            start = time.perf_counter()
            run = steps.engine.greedy(token, max_new_tokens - 1)
            try:
                for chosen, finite in run:
                    if not finite:
                        steps.engine.length -= 1  # the step again, eagerly, for its logits (cache unchanged)
                        _refuse_nonfinite(steps.engine.decode(token)[-1], len(result.tokens), prompt.numel(),
                                          len(result.tokens))
                    token = chosen
                    if take(token):
                        break
            finally:
                run.close()
                result.decode_seconds = time.perf_counter() - start
        else:
            for i in range(1, max_new_tokens if not stopped else 1):
                start = time.perf_counter()
                token = _checked_choice(steps.next(token), sampling, generator, i, prompt.numel(), len(result.tokens))
                result.decode_seconds += time.perf_counter() - start
                if take(token):
                    break
    result.runner = steps.runner
    return result


class _Steps:
    """One way of running generation's steps: the prompt first, then one chosen token at a time."""

    runner = ""

    def first(self) -> torch.Tensor:
        """The logits row (vocab,) after the prompt."""
        raise NotImplementedError

    def next(self, token: int) -> torch.Tensor:
        """The logits row (vocab,) after ``token``."""
        raise NotImplementedError


class _ModelSteps(_Steps):
    """The model's own step, driven through its orchestration methods on caches this loop holds."""

    runner = "model step"

    def __init__(self, model: Any, prompt: torch.Tensor, capacity: int, device: str) -> None:
        self.model, self.device = model, device
        # One buffer for prompt and answer; each step sees a view of its active prefix (spec 1.1.2).
        self.buffer = torch.empty(capacity, dtype=torch.int64)
        self.buffer[: prompt.numel()] = prompt
        self.total = prompt.numel()
        self.step = 0
        self.caches = _init_caches(model, capacity, device)

    def _run(self) -> torch.Tensor:
        inputs = self.model.prepare_inputs_for_generation(self.buffer[:self.total], self.step, self.caches,
                                                          device=self.device)
        outputs = self.model(*inputs)
        self.caches = self.model.append_cache(self.caches, outputs)
        self.step = self.total
        return outputs[0][-1]

    def first(self) -> torch.Tensor:
        return self._run()

    def next(self, token: int) -> torch.Tensor:
        self.buffer[self.total] = token
        self.total += 1
        return self._run()


class _EngineSteps(_Steps):
    """A decode engine: prefill of the prompt, then one decode step per token."""

    def __init__(self, engine: DecodeEngine, prompt: torch.Tensor) -> None:
        self.engine = engine
        self.prompt = prompt

    @property
    def runner(self) -> str:  # type: ignore[override]
        engine = self.engine
        kernels = getattr(engine.kernels, "inner", engine.kernels).name
        split = f", tensor parallel over {engine.parallel.world} ranks" if engine.parallel is not None else ""
        return f"decode engine ({kernels} kernels{split}; CUDA graph: {engine.graph_status})"

    def first(self) -> torch.Tensor:
        self.engine.reset()
        return self.engine.prefill(self.prompt)[-1]

    def next(self, token: int) -> torch.Tensor:
        return self.engine.decode(token)[-1]


def _init_caches(model: Any, capacity: int, device: str) -> Any:
    """``model.init_caches`` for ``capacity`` positions when the method takes a capacity, else as it is."""
    init = model.init_caches
    try:
        takes_capacity = "capacity" in inspect.signature(init).parameters
    except (TypeError, ValueError):  # a callable without a signature: call it the way every model takes
        takes_capacity = False
    return init(capacity=capacity, device=device) if takes_capacity else init(device=device)


def _describes_itself(model: Any) -> bool:
    """True for a twin the decode engine can run (it carries a DecoderSpec and decoder_weights())."""
    return isinstance(getattr(type(model), "decoder_spec", None), DecoderSpec) and callable(
        getattr(model, "decoder_weights", None))


def _runs_on_engine(model: Any, device: str, engine: bool | None) -> bool:
    if engine is None:
        return _describes_itself(model)
    if engine and not _describes_itself(model):
        raise TypeError(f"generate(engine=True): the decode engine runs a loaded causal-LM twin that describes itself "
                        f"(tilefoundry.models.twins.build_twin); {type(model).__name__} does not")
    return bool(engine)


_ENGINES: weakref.WeakKeyDictionary[Any, DecodeEngine] = weakref.WeakKeyDictionary()


def engine_for(twin: Any, capacity: int, device: str) -> DecodeEngine:
    """The decode engine kept for ``twin`` (built on first use), holding at least ``capacity`` positions.

    It is built again when the twin was loaded again since; its cache grows when ``capacity`` exceeds it.

    Raises:
        ValueError: the twin's weights are not on ``device``.
    """
    engine = _ENGINES.get(twin)
    if engine is None or not engine.built_from(twin):
        engine = _ENGINES.pop(twin, None)
        del engine  # the stale engine's buffers go before the new ones are made
        engine = DecodeEngine(twin, capacity)
        _ENGINES[twin] = engine
    return _ready(engine, capacity, device)


def _ready(engine: DecodeEngine, capacity: int, device: str) -> DecodeEngine:
    """``engine`` once it is known to run on ``device`` and to hold ``capacity`` positions (grown if not)."""
    want = torch.device(device)
    if want.type != engine.device.type or (want.index is not None and want.index != engine.device.index):
        raise ValueError(f"generate: the twin's weights are on {engine.device} but device={device!r} was asked; "
                         f"load the twin on {device!r} or pass device={str(engine.device)!r}")
    if engine.capacity < capacity:
        engine.resize(capacity)
    return engine

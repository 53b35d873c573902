"""The generation loop's own refusals: sampling settings, tiny temperatures, non-finite logits, the session's
checks before anything is loaded (Python API; the command line's are in test_cli_refusals.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import torch

from tilefoundry.models import NonFiniteLogitsError, Sampling, generate
from tilefoundry.models.generation import choose_token
from tilefoundry.models.session import TextSession

from .hf_models import add_tokenizer, make_checkpoint


@pytest.mark.parametrize(("kwargs", "error", "words"), [
    ({"temperature": float("nan")}, ValueError, "temperature must be a finite number >= 0 (0 is greedy), got nan"),
    ({"temperature": float("inf")}, ValueError, "got inf"),
    ({"temperature": -0.5}, ValueError, "got -0.5"),
    ({"temperature": "hot"}, TypeError, "temperature must be a number, got str 'hot'"),
    ({"temperature": True}, TypeError, "temperature must be a number, got bool"),
    ({"seed": 2**64}, ValueError, "seed must be an integer in [0, 2**64 - 1], got 18446744073709551616"),
    ({"seed": -1}, ValueError, "got -1"),
    ({"seed": 1.5}, TypeError, "seed must be an integer, got float"),
    ({"top_k": -1}, ValueError, "top_k must be >= 0"),
    ({"top_k": 2.0}, TypeError, "top_k must be an integer"),
    ({"top_p": float("nan")}, ValueError, "top_p must lie in (0, 1]"),
    ({"top_p": 0.0}, ValueError, "top_p must lie in (0, 1]"),
    ({"top_p": 1.01}, ValueError, "top_p must lie in (0, 1]"),
])
def test_sampling_refuses_settings_out_of_range(kwargs: dict[str, Any], error: type[Exception], words: str) -> None:
    with pytest.raises(error) as info:
        Sampling(**kwargs)
    assert words in str(info.value)


def test_sampling_accepts_the_whole_seed_range_and_zero_temperature() -> None:
    assert Sampling(seed=2**64 - 1).seed == 2**64 - 1
    assert Sampling(temperature=0).temperature == 0.0


@pytest.mark.parametrize("temperature", [1e-45, 5e-324, 1e-300, 1e-6])
def test_a_tiny_temperature_samples_the_most_likely_token_never_nan(temperature: float) -> None:
    logits = torch.tensor([0.5, 3.0, -1.0, 2.999, -float("inf")])
    sampling = Sampling(temperature=temperature, seed=3)
    draws = {choose_token(logits, sampling, torch.Generator().manual_seed(s)) for s in range(20)}
    assert draws == {1}


def test_a_tiny_temperature_breaks_exact_ties_by_the_seeded_draw() -> None:
    logits = torch.tensor([1.0, 7.0, 7.0, -3.0])
    sampling = Sampling(temperature=1e-45)
    draws = {choose_token(logits, sampling, torch.Generator().manual_seed(s)) for s in range(40)}
    assert draws == {1, 2}


def test_huge_logits_and_huge_temperatures_sample_without_nan() -> None:
    logits = torch.tensor([3.0e38, -3.0e38, 1.0])
    assert choose_token(logits, Sampling(temperature=1.0, top_p=0.5), torch.Generator().manual_seed(0)) == 0
    uniform = {choose_token(torch.tensor([0.0, 1.0]), Sampling(temperature=1e300), torch.Generator().manual_seed(s))
               for s in range(40)}
    assert uniform == {0, 1}


class ScriptedModel:
    """A causal-LM stand-in whose logits at chosen generation steps hold a NaN or an Inf."""

    def __init__(self, bad_steps: dict[int, float], vocab: int = 5) -> None:
        self.bad_steps = bad_steps
        self.vocab = vocab
        self.calls = 0

    def init_caches(self, *, device: str) -> tuple[()]:
        return ()

    def prepare_inputs_for_generation(self, ids: torch.Tensor, step: int, caches: Any, *, device: str) -> tuple:
        return (ids,)

    def __call__(self, ids: torch.Tensor) -> tuple[torch.Tensor, tuple[()]]:
        logits = torch.zeros(int(ids.shape[0]), self.vocab)
        logits[:, 1] = 1.0
        if self.calls in self.bad_steps:
            logits[-1, 3] = self.bad_steps[self.calls]
        self.calls += 1
        return logits, ()

    def append_cache(self, caches: Any, outputs: Any) -> tuple[()]:
        return ()


@pytest.mark.parametrize(("step", "value", "words"), [
    (0, float("nan"), "step 0 (the prefill of the 3 prompt tokens) produced non-finite logits (1 NaN, 0 Inf"),
    (2, float("inf"), "generation step 2 (the decode of token 3) produced non-finite logits (0 NaN, 1 Inf of 5)"),
    (4, -float("inf"), "stopped after 4 token(s)"),
])
def test_a_step_with_non_finite_logits_stops_generation_naming_the_step(step: int, value: float, words: str) -> None:
    seen: list[int] = []
    with pytest.raises(NonFiniteLogitsError) as info:
        generate(ScriptedModel({step: value}), [5, 6, 7], 8, on_token=seen.append,
                 sampling=Sampling(temperature=0.7, seed=1))
    assert words in str(info.value)
    assert len(seen) == step and isinstance(info.value, ValueError)


def test_finite_logits_generate_every_token() -> None:
    assert generate(ScriptedModel({}), [5], 4).tokens == [1, 1, 1, 1]


# -- the session checks everything cheap before loading ----------------------------------------------------------


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("session") / "llama"
    make_checkpoint("llama", folder, sharded=False)
    add_tokenizer(folder)
    return folder


@pytest.mark.parametrize(("kwargs", "error", "words"), [
    ({"prompt": ""}, ValueError, "the prompt is empty"),
    ({"max_new_tokens": 0}, ValueError, "max_new_tokens must be an integer >= 1, got 0"),
    ({"max_new_tokens": 1000}, ValueError, "max_new_tokens (1000) leaves no position for the prompt: the model holds "
                                           "128 positions"),
    ({"max_new_tokens": 127}, ValueError, "need 129 positions, and the model holds 128 positions"),
    ({"device": "meta"}, ValueError, "device 'meta' is not one a model runs on"),
    ({"backend": "fast"}, ValueError, "backend must be 'reference' or 'twin'"),
])
def test_the_session_refuses_before_loading(ckpt: Path, kwargs: dict[str, Any], error: type[Exception],
                                            words: str) -> None:
    args: dict[str, Any] = {"device": "cpu", "backend": "twin", "max_new_tokens": 2, "prompt": "hi", "chat": False}
    args.update(kwargs)
    with pytest.raises(error, match=re.escape(words)):
        TextSession.open(ckpt, **args)


def test_the_session_refuses_a_hub_name_the_cache_lacks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    with pytest.raises(FileNotFoundError, match=r"'org/name' is no local folder, and the Hugging Face cache .* holds "
                                                r"no complete snapshot of it.*TileFoundry never downloads"):
        TextSession.open("org/name", device="cpu", backend="twin", max_new_tokens=2, prompt="hi", chat=False)

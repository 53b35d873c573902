"""RoPE scaling comes from transformers' ROPE_INIT_FUNCTIONS: every rope type transformers ships is accepted,
its tables are what transformers' rotary embedding rotates with (decode steps and whole forwards, on both sides
of the length where longrope and dynamic NTK switch frequencies), and tiny random Llamas with yarn, dynamic,
proportional and longrope scaling give transformers' logits.

Tolerances. The tables are computed by the same f32 operations as transformers' ``LlamaRotaryEmbedding`` (the
frequencies by the same init function), so they differ at most by how a CPU's vectorised cos / sin round: both
are accurate to about one f32 ulp of a result in [-1.2, 1.2] (attention scaling included), 1.2e-7; ``TABLE_ATOL``
= 1e-6 leaves room for that on AVX2 and AVX-512 alike and is far below what a wrong choice of frequencies moves
(longrope's short and long factors here differ by 2x, yarn's scaling is 1.14). Logits are held to the family
tests' predicates (tests/test_models.py): rel_l2 <= 1e-5 and cosine >= 0.99999.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

from tilefoundry.engine import DecodeEngine, TorchKernels
from tilefoundry.models import ConfigFieldError, generate, open_checkpoint, parse_config
from tilefoundry.models.config import ROPE_TYPES
from tilefoundry.models.rope import inverse_frequencies, rope_tables
from tilefoundry.models.twins import build_twin
from tilefoundry.runtime.check import parse_predicate

TABLE_ATOL = 1e-6
REL_L2 = parse_predicate("rel_l2:max=1e-5")
COSINE = parse_predicate("cosine:min=0.99999")

MAX_POSITIONS = 128
ORIGINAL = 32  # original_max_position_embeddings: longrope switches factors past it
HEAD_DIM = 16  # 8 frequencies
SIZES = dict(vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=MAX_POSITIONS)
BASE = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", **SIZES}

LONGROPE = {"rope_type": "longrope", "original_max_position_embeddings": ORIGINAL,
            "short_factor": [1.0 + 0.05 * i for i in range(HEAD_DIM // 2)],
            "long_factor": [2.0 + 0.5 * i for i in range(HEAD_DIM // 2)]}

# config.json additions, as checkpoints write them (transformers 5's rope_parameters, earlier rope_scaling)
ROPES: dict[str, dict[str, Any]] = {
    "default": {},
    "default_partial": {"partial_rotary_factor": 0.5},  # transformers' default frequencies ignore it
    "linear": {"rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 500.0}},
    "dynamic": {"rope_parameters": {"rope_type": "dynamic", "factor": 2.0}},
    "yarn": {"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": ORIGINAL}},
    "yarn_options": {"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "mscale": 0.707, "mscale_all_dim": 1.0,
                                         "original_max_position_embeddings": ORIGINAL, "beta_fast": 16,
                                         "beta_slow": 2, "truncate": False}},
    "yarn_rope_scaling": {"rope_scaling": {"type": "yarn", "factor": 4.0, "attention_factor": 1.5,
                                           "original_max_position_embeddings": ORIGINAL}, "rope_theta": 2000.0},
    "longrope": {"rope_parameters": LONGROPE},
    "longrope_factor": {"rope_parameters": {**LONGROPE, "factor": 8.0}},
    "llama3": {"rope_parameters": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                   "high_freq_factor": 4.0, "original_max_position_embeddings": ORIGINAL}},
    # transformers fills original_max_position_embeddings in with max_position_embeddings
    "llama3_no_original": {"rope_parameters": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                               "high_freq_factor": 4.0}},
    "proportional": {"rope_parameters": {"rope_type": "proportional", "factor": 2.0, "partial_rotary_factor": 0.5}},
    # both objects: transformers reads rope_scaling whole and rope_theta from the top level
    "rope_scaling_over_rope_parameters": {"rope_scaling": {"rope_type": "linear", "factor": 2.0},
                                          "rope_parameters": {"rope_type": "linear", "factor": 3.0,
                                                              "rope_theta": 500.0},
                                          "rope_theta": 77.0},
}


def _raw(name: str) -> dict[str, Any]:
    return json.loads(json.dumps({**BASE, **ROPES[name]}))  # a fresh copy: transformers edits what it is given


def _hf_rotary(name: str) -> LlamaRotaryEmbedding:
    """transformers' rotary embedding for the same config.json contents."""
    return LlamaRotaryEmbedding(LlamaConfig.from_dict(_raw(name)))


def _hf_forward(rotary: LlamaRotaryEmbedding, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    cos, sin = rotary(torch.zeros(1, dtype=torch.float32), positions[None])
    return cos[0], sin[0]


def test_every_rope_type_transformers_ships_is_accepted() -> None:
    assert set(ROPE_TYPES) == {"default", *ROPE_INIT_FUNCTIONS}
    parsed = {parse_config(_raw(name)).rope.rope_type for name in ROPES}
    assert parsed == set(ROPE_TYPES)


@pytest.mark.parametrize("name", list(ROPES))
def test_the_step_table_is_transformers_rotation_at_every_decode_step(name: str) -> None:
    """Row p is what transformers rotates position p with when p is the last position of its forward, one
    rotary embedding driven through positions 0, 1, 2, ... as generation drives it: across the original maximum
    (longrope) and, with a table longer than the model's positions, across max_position_embeddings (dynamic)."""
    rope = parse_config(_raw(name)).rope
    length = MAX_POSITIONS + 24
    cos, sin = rope_tables(rope, HEAD_DIM, length, torch.float32, "cpu")
    rotary = _hf_rotary(name)
    for p in range(length):
        want_cos, want_sin = _hf_forward(rotary, torch.tensor([p]))
        torch.testing.assert_close(cos[p:p + 1], want_cos, rtol=0, atol=TABLE_ATOL, msg=f"{name}: cos row {p}")
        torch.testing.assert_close(sin[p:p + 1], want_sin, rtol=0, atol=TABLE_ATOL, msg=f"{name}: sin row {p}")


@pytest.mark.parametrize("name", list(ROPES))
@pytest.mark.parametrize("seq_len", [ORIGINAL - 1, ORIGINAL, ORIGINAL + 1, MAX_POSITIONS, MAX_POSITIONS + 20])
def test_the_table_of_a_forward_is_transformers_rotation_of_every_position(name: str, seq_len: int) -> None:
    """A forward over positions 0 .. seq_len - 1 (a prefill): every row as transformers rotates it then."""
    rope = parse_config(_raw(name)).rope
    cos, sin = rope_tables(rope, HEAD_DIM, MAX_POSITIONS + 24, torch.float32, "cpu", seq_len=seq_len)
    want_cos, want_sin = _hf_forward(_hf_rotary(name), torch.arange(seq_len))
    torch.testing.assert_close(cos[:seq_len], want_cos, rtol=0, atol=TABLE_ATOL)
    torch.testing.assert_close(sin[:seq_len], want_sin, rtol=0, atol=TABLE_ATOL)


def test_the_step_table_differs_from_a_forward_only_below_the_switch() -> None:
    """What one fixed table cannot follow: a longrope forward that reaches past the original maximum rotates its
    earlier positions with the long factors too; the step table keeps the short ones there."""
    rope = parse_config(_raw("longrope")).rope
    step, _ = rope_tables(rope, HEAD_DIM, MAX_POSITIONS, torch.float32, "cpu")
    short, _ = rope_tables(rope, HEAD_DIM, MAX_POSITIONS, torch.float32, "cpu", seq_len=ORIGINAL)
    long, _ = rope_tables(rope, HEAD_DIM, MAX_POSITIONS, torch.float32, "cpu", seq_len=ORIGINAL + 1)
    assert torch.equal(step[:ORIGINAL], short[:ORIGINAL]) and torch.equal(step[ORIGINAL:], long[ORIGINAL:])
    assert (step[1:ORIGINAL] - long[1:ORIGINAL]).abs().max() > 0.1
    # position-independent types: one table for every forward
    yarn = parse_config(_raw("yarn")).rope
    assert rope_tables(yarn, HEAD_DIM, 64, torch.float32, "cpu") is rope_tables(yarn, HEAD_DIM, 64, torch.float32,
                                                                                 "cpu", seq_len=40)


def test_inverse_frequencies_and_scaling_are_transformers() -> None:
    for name in ("yarn", "yarn_rope_scaling", "longrope", "llama3", "proportional"):
        rotary = _hf_rotary(name)
        inv, scaling = inverse_frequencies(parse_config(_raw(name)).rope, HEAD_DIM)
        assert torch.equal(inv, rotary.inv_freq) and scaling == rotary.attention_scaling, name
    assert inverse_frequencies(parse_config(_raw("yarn_rope_scaling")).rope, HEAD_DIM)[1] == 1.5


# -- refusals --------------------------------------------------------------------------------------------------


def _rope_params(params: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {**BASE, "rope_parameters": params, **top}


@pytest.mark.parametrize(("raw", "words"), [
    (_rope_params({"rope_type": "ntk", "factor": 2.0}),
     ["rope_type must be one of", "got the string 'ntk'", *(repr(t) for t in ROPE_TYPES)]),
    (_rope_params({"rope_type": "yarn"}), ["a yarn rope_type needs factor", "it is missing"]),
    (_rope_params({"rope_type": "dynamic"}), ["a dynamic rope_type needs factor"]),
    (_rope_params({"rope_type": "llama3", "factor": 8.0, "high_freq_factor": 4.0}),
     ["a llama3 rope_type needs low_freq_factor"]),
    (_rope_params({k: v for k, v in LONGROPE.items() if k != "long_factor"}),
     ["a longrope rope_type needs long_factor"]),
    (_rope_params({**LONGROPE, "short_factor": [1.0, 1.0, 1.0]}),
     ["short_factor holds 3 numbers", "head_dim / 2 = 8"]),
    (_rope_params({**LONGROPE, "long_factor": [1.0] * 7 + [0.0]}),
     ["long_factor must be a list of finite numbers > 0"]),
    (_rope_params({**LONGROPE, "long_factor": "[1.0]"}), ["long_factor must be a list of finite numbers > 0"]),
    (_rope_params({"rope_type": "yarn", "factor": 4.0, "partial_rotary_factor": 0.5}),
     ["partial_rotary_factor 0.5 with a yarn rope_type", "llama family", "proportional"]),
    (_rope_params({"rope_type": "linear", "factor": 2.0}, partial_rotary_factor=0.25),
     ["partial_rotary_factor 0.25 with a linear rope_type"]),
    (_rope_params({"rope_type": "proportional", "partial_rotary_factor": 1.5}),
     ["partial_rotary_factor must be a finite number > 0 and <= 1"]),
    (_rope_params({"rope_type": "yarn", "factor": 4.0, "truncate": "no"}), ["truncate must be true or false"]),
    (_rope_params({"rope_type": "yarn", "factor": 4.0, "attention_factor": -1.0}),
     ["attention_factor must be a finite number > 0"]),
], ids=["unknown_type", "yarn_without_factor", "dynamic_without_factor", "llama3_without_low_freq",
        "longrope_without_long_factor", "longrope_short_factor_length", "longrope_zero_factor",
        "longrope_factor_not_a_list", "partial_with_yarn", "top_level_partial_with_linear", "partial_above_one",
        "truncate_string", "negative_attention_factor"])
def test_a_rope_setting_the_family_cannot_run_is_refused_by_name(raw: dict[str, Any], words: list[str]) -> None:
    with pytest.raises(ConfigFieldError) as info:
        parse_config(raw, source="ckpt/config.json")
    message = str(info.value)
    assert message.startswith("ckpt/config.json (rope_parameters): "), message
    for word in words:
        assert word in message, (word, message)


# -- end to end: tiny random Llamas against transformers ---------------------------------------------------------


def _assert_close(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    for pred in (REL_L2, COSINE):
        result = pred.evaluate(got, want)
        assert result.passed, f"{what}: {pred} measured {dict(result.values)} ({result.note})"


def _checkpoint(folder: Path, rope_parameters: dict[str, Any]) -> torch.nn.Module:
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(LlamaConfig(**SIZES, rope_parameters=rope_parameters)).eval()
    model.save_pretrained(str(folder))
    return model


class _Recorder:
    """A runner that keeps each step's logits (every position of the step)."""

    def __init__(self, runner: Any) -> None:
        self.runner, self.seen = runner, []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.runner, name)

    def __call__(self, *inputs: Any) -> Any:
        out = self.runner(*inputs)
        self.seen.append(out[0])
        return out


def _runners(folder: Path) -> dict[str, Any]:
    opened = open_checkpoint(folder, progress=False)
    twin = build_twin(opened.module, opened.config)
    twin.load(opened.resource("cpu"))
    return {"reference": opened.module.load(opened.resource("cpu")), "twin": twin}


@pytest.mark.parametrize("name", ["yarn_options", "dynamic", "proportional"])
def test_a_scaled_llama_matches_transformers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv("TILEFOUNDRY_CACHE", str(tmp_path / "cache"))
    hf = _checkpoint(tmp_path / "m", ROPES[name]["rope_parameters"])
    prompt, new = torch.tensor([3, 17, 42, 99, 5, 250, 7]), 32
    with torch.no_grad():
        out = hf.generate(prompt[None], max_new_tokens=new, min_new_tokens=new, do_sample=False)
        want = hf(out).logits[0]
    for runner_name, runner in _runners(tmp_path / "m").items():
        recorder = _Recorder(runner)
        tokens = generate(recorder, prompt, new, engine=False).tokens
        assert tokens == out[0, prompt.numel():].tolist(), f"{runner_name}: greedy tokens differ from transformers"
        n = prompt.numel()
        _assert_close(recorder.seen[0], want[:n], f"{runner_name} prefill logits")
        for i, step in enumerate(recorder.seen[1:], start=1):
            _assert_close(step[-1], want[n - 1 + i], f"{runner_name} decode step {i} logits")


def _hf_steps(hf: torch.nn.Module, prompt: torch.Tensor,
              new: int) -> tuple[list[int], torch.Tensor, list[torch.Tensor]]:
    """transformers' greedy tokens, its prefill logits (every prompt position) and each cached decode step's."""
    with torch.no_grad():
        out = hf.generate(prompt[None], max_new_tokens=new, min_new_tokens=new, do_sample=False,
                          output_logits=True, return_dict_in_generate=True)
        prefill = hf(prompt[None]).logits[0]
    return out.sequences[0, prompt.numel():].tolist(), prefill, [step[0] for step in out.logits[1:]]


@pytest.mark.parametrize(("prompt_len", "new"), [(7, 40), (ORIGINAL + 8, 10)],
                         ids=["prompt_below_decode_crosses", "prompt_above"])
def test_a_longrope_llama_matches_transformers_step_by_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            prompt_len: int, new: int) -> None:
    """transformers picks longrope's factors per forward: short for a prefill that ends within the original maximum
    and for the decode steps below it, long for every position of a forward that ends past it (a longer prompt,
    the later decode steps). Each step of ours matches transformers' cached step."""
    monkeypatch.setenv("TILEFOUNDRY_CACHE", str(tmp_path / "cache"))
    hf = _checkpoint(tmp_path / "m", LONGROPE)
    prompt = torch.randint(0, 256, (prompt_len,), generator=torch.Generator().manual_seed(1))
    want_tokens, want_prefill, want_steps = _hf_steps(hf, prompt, new)
    runners = _runners(tmp_path / "m")
    for runner_name, runner in runners.items():
        recorder = _Recorder(runner)
        tokens = generate(recorder, prompt, new, engine=False).tokens
        assert tokens == want_tokens, f"{runner_name}: greedy tokens differ from transformers"
        _assert_close(recorder.seen[0], want_prefill, f"{runner_name} prefill logits")
        for i, (step, want) in enumerate(zip(recorder.seen[1:], want_steps, strict=True), start=1):
            _assert_close(step[-1], want, f"{runner_name} decode step {i} (position {prompt_len + i - 1}) logits")
    # The decode engine's steps read the step table (exact for every decode step), its prefill the table of its
    # own forward (the long factors for every position of a prompt that ends past the original maximum).
    engine = DecodeEngine(runners["twin"], prompt_len + new, kernels=TorchKernels())
    _assert_close(engine.prefill(prompt, all_logits=True), want_prefill, "engine prefill logits")
    for i, (token, want) in enumerate(zip(want_tokens, want_steps), start=1):
        _assert_close(engine.decode(token)[-1], want, f"engine decode step {i} logits")

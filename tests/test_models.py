"""Model families against Hugging Face: logits per step and greedy tokens, reference and twin."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from tilefoundry.models import UnsupportedModelError, generate, open_checkpoint
from tilefoundry.models.twins import build_twin
from tilefoundry.runtime.check import check, parse_predicate

from .hf_models import folder_digest, make_checkpoint

PROMPT = torch.tensor([3, 17, 42, 99, 5, 250, 7])
NEW = 32
REL_L2 = parse_predicate("rel_l2:max=1e-5")
COSINE = parse_predicate("cosine:min=0.99999")


def _assert_close(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    for pred in (REL_L2, COSINE):
        result = pred.evaluate(got, want)
        assert result.passed, f"{what}: {pred} measured {dict(result.values)} ({result.note})"


def _hf_greedy(model: torch.nn.Module) -> tuple[list[int], torch.Tensor]:
    """HF greedy tokens and the logits of every position of prompt + generated tokens."""
    with torch.no_grad():
        out = model.generate(PROMPT[None], max_new_tokens=NEW, min_new_tokens=NEW, do_sample=False)
        logits = model(out).logits[0]
    return out[0, PROMPT.numel():].tolist(), logits


def _step_logits(runner, max_new: int) -> tuple[list[int], list[torch.Tensor]]:
    """Our greedy loop, keeping each step's last-position logits."""
    seen: list[torch.Tensor] = []

    class Recorder:
        def __getattr__(self, name):
            return getattr(runner, name)

        def __call__(self, *inputs):
            out = runner(*inputs)
            seen.append(out[0])
            return out

    result = generate(Recorder(), PROMPT, max_new)
    return result.tokens, seen


CASES = [
    ("llama", True, False), ("llama", False, False), ("llama_tied", False, False), ("qwen2", True, False),
    ("qwen2", False, False), ("qwen3", True, False), ("qwen3", False, False), ("qwen3_moe", True, False),
    ("qwen3_moe", False, False), ("qwen3_moe", False, True),
]


@pytest.mark.parametrize("family,sharded,fused", CASES,
                         ids=[f"{f}-{'sharded' if s else 'single'}{'-fused' if x else ''}" for f, s, x in CASES])
def test_family_matches_hugging_face(tmp_path: Path, monkeypatch, family: str, sharded: bool, fused: bool) -> None:
    monkeypatch.setenv("TILEFOUNDRY_CACHE", str(tmp_path / "cache"))
    ckpt = tmp_path / family
    hf = make_checkpoint(family, ckpt, sharded=sharded, fused_experts=fused)
    if sharded:
        assert (ckpt / "model.safetensors.index.json").is_file() and len(list(ckpt.glob("*.safetensors"))) > 1
    before = folder_digest(ckpt)
    want_tokens, hf_logits = _hf_greedy(hf)

    opened = open_checkpoint(ckpt, progress=False)
    reference = opened.module.load(opened.resource("cpu"))
    twin = build_twin(opened.module, opened.config)
    twin.load(opened.resource("cpu"))
    for name, runner in (("reference", reference), ("twin", twin)):
        tokens, logits = _step_logits(runner, NEW)
        assert tokens == want_tokens, f"{name}: greedy tokens differ from Hugging Face"
        n = PROMPT.numel()
        _assert_close(logits[0], hf_logits[:n], f"{name} prefill logits")
        for i, step in enumerate(logits[1:], start=1):
            _assert_close(step[-1], hf_logits[n - 1 + i], f"{name} decode step {i} logits")
    assert folder_digest(ckpt) == before, "nothing is written into the checkpoint folder"


@pytest.mark.parametrize("family", ["qwen3", "qwen3_moe"])
def test_twin_passes_check_per_node(tmp_path: Path, monkeypatch, family: str) -> None:
    monkeypatch.setenv("TILEFOUNDRY_CACHE", str(tmp_path / "cache"))
    make_checkpoint(family, tmp_path / family, sharded=False)
    opened = open_checkpoint(tmp_path / family, progress=False)
    reference = opened.module.load(opened.resource("cpu"))
    twin = build_twin(opened.module, opened.config)
    twin.load(opened.resource("cpu"))
    caches = reference.init_caches(capacity=16)
    inputs = reference.prepare_inputs_for_generation(PROMPT, 0, caches)
    ids, pos, kv_pos, cur, n_new, cos, sin, _ = inputs
    tight = [parse_predicate("rel_l2:max=1e-5"), parse_predicate("cosine:min=0.99999")]

    def expect(out) -> dict:
        from tilefoundry.ir.core.tree import flatten, leaf_paths
        _, spec = flatten(out, lambda t: isinstance(t, torch.Tensor))
        return {p: tight for p in leaf_paths(spec)}

    x = reference.embed(ids)
    report = check(twin.embed, reference.embed, (ids,), expect=expect(x))
    assert report.passed, str(report)
    for layer_ref, layer_twin in zip(reference.modules, twin.modules):
        k0, v0 = torch.zeros_like(caches[0][0]), torch.zeros_like(caches[0][1])
        q, k, v = layer_ref.qkv(x)
        node_inputs = {"qkv": (x,), "attend": (x, q, k, v, pos, kv_pos, cos, sin, k0, v0, cur, n_new)}
        if "qk_norm" in layer_ref.module.functions:
            node_inputs["qk_norm"] = (q, k)
        h = layer_ref.attend(*node_inputs["attend"])[0]
        ffn = "moe" if "moe" in layer_ref.module.functions else "mlp"
        node_inputs[ffn] = (h,)
        assert set(node_inputs) == set(layer_ref.module.functions)
        for fn, args in node_inputs.items():
            report = check(getattr(layer_twin, fn), getattr(layer_ref, fn), args,
                           expect=expect(getattr(layer_ref, fn)(*args)))
            assert report.passed, f"{layer_ref.name}.{fn}:\n{report}"
        report = check(layer_twin, layer_ref, (x, pos, kv_pos, cos, sin, k0, v0, cur, n_new),
                       expect=expect(layer_ref(x, pos, kv_pos, cos, sin, k0, v0, cur, n_new)))
        assert report.passed, f"{layer_ref.name}.forward:\n{report}"
        x = layer_ref(x, pos, kv_pos, cos, sin, k0, v0, cur, n_new)[0]
    report = check(twin.head, reference.head, (x,), expect=expect(reference.head(x)))
    assert report.passed, str(report)
    report = check(twin, reference, inputs, expect=expect(reference(*inputs)))
    assert report.passed, str(report)


def test_step_never_mutates_the_caches_it_was_given(tmp_path: Path) -> None:
    make_checkpoint("llama", tmp_path / "m", sharded=False)
    opened = open_checkpoint(tmp_path / "m", progress=False)
    for runner in (opened.module.load(opened.resource("cpu")), _loaded_twin(opened)):
        caches = runner.init_caches(capacity=16)
        snapshot = [(k.clone(), v.clone()) for k, v in caches]
        ids = PROMPT.clone()
        out = runner(*runner.prepare_inputs_for_generation(ids, 0, caches))
        assert all(torch.equal(k, k0) and torch.equal(v, v0) for (k, v), (k0, v0) in zip(caches, snapshot))
        assert torch.equal(ids, PROMPT)
        assert not torch.equal(out[1][0][0], snapshot[0][0]), "the returned cache holds the new entries"


def _loaded_twin(opened):
    twin = build_twin(opened.module, opened.config)
    twin.load(opened.resource("cpu"))
    return twin


def test_sampling_is_seeded_and_top_k_one_is_greedy(tmp_path: Path) -> None:
    from tilefoundry.models import Sampling

    make_checkpoint("qwen2", tmp_path / "m", sharded=False)
    opened = open_checkpoint(tmp_path / "m", progress=False)
    twin = _loaded_twin(opened)
    a = generate(twin, PROMPT, 12, sampling=Sampling(temperature=1.0, top_p=0.9, seed=7)).tokens
    b = generate(twin, PROMPT, 12, sampling=Sampling(temperature=1.0, top_p=0.9, seed=7)).tokens
    assert a == b
    greedy = generate(twin, PROMPT, 12).tokens
    assert generate(twin, PROMPT, 12, sampling=Sampling(temperature=0.7, top_k=1, seed=3)).tokens == greedy
    stop = greedy[3]
    stopped = generate(twin, PROMPT, 12, stop_tokens=[stop])
    assert stopped.tokens == greedy[: greedy.index(stop) + 1]
    assert stopped.stopped_by == "eos" and stopped.stop_token == stop


def _assert_edited_load_refused(ckpt: Path, family: str, edit: Callable[[dict[str, torch.Tensor]], None],
                                error: type[Exception], match: str) -> None:
    """A single-file ``family`` checkpoint at ``ckpt`` whose tensors ``edit`` changed refuses to load with
    ``error`` matching ``match``, and nothing in the folder is written."""
    from safetensors.torch import load_file, save_file

    make_checkpoint(family, ckpt, sharded=False)
    state = load_file(str(ckpt / "model.safetensors"))
    edit(state)
    save_file(state, str(ckpt / "model.safetensors"), metadata={"format": "pt"})
    before = folder_digest(ckpt)
    opened = open_checkpoint(ckpt, progress=False)
    with pytest.raises(error, match=match):
        opened.module.load(opened.resource("cpu"))
    assert folder_digest(ckpt) == before


def test_missing_weight_is_named_and_nothing_is_written(tmp_path: Path) -> None:
    def drop_k_proj(state: dict[str, torch.Tensor]) -> None:
        del state["model.layers.1.self_attn.k_proj.weight"]

    _assert_edited_load_refused(tmp_path / "m", "llama", drop_k_proj,
                                KeyError, r"model\.layers\.1\.self_attn\.k_proj\.weight")


def test_wrong_shape_is_named_with_the_way_out(tmp_path: Path) -> None:
    from tilefoundry.ir.core.weights import WeightMismatchError

    def reshape_q_norm(state: dict[str, torch.Tensor]) -> None:
        state["model.layers.0.self_attn.q_norm.weight"] = torch.ones(31)

    _assert_edited_load_refused(tmp_path / "m", "qwen3", reshape_q_norm,
                                WeightMismatchError, r"layer0\.q_norm.*\(31,\).*converter")


def test_unsupported_architecture_is_named(tmp_path: Path) -> None:
    ckpt = tmp_path / "m"
    make_checkpoint("llama", ckpt, sharded=False)
    config = json.loads((ckpt / "config.json").read_text())
    config["architectures"] = ["MistralForCausalLM"]
    (ckpt / "config.json").write_text(json.dumps(config))
    before = folder_digest(ckpt)
    with pytest.raises(UnsupportedModelError, match=r"'MistralForCausalLM' is not supported; supported: "
                                                    r"LlamaForCausalLM"):
        open_checkpoint(ckpt, progress=False)
    config["architectures"] = ["LlamaForCausalLM"]
    config["hidden_act"] = "gelu"
    (ckpt / "config.json").write_text(json.dumps(config))
    with pytest.raises(UnsupportedModelError, match="hidden_act 'gelu'"):
        open_checkpoint(ckpt, progress=False)
    assert set(folder_digest(ckpt)) == set(before)

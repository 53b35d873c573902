"""The `tilefoundry` command: models, prepare, generate refusals and --help."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tilefoundry.cli.main import main
from tilefoundry.models import open_checkpoint
from tilefoundry.runtime.resource import SafetensorsResource

from .hf_models import folder_digest, make_checkpoint


def test_models_lists_every_family(capsys) -> None:
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    for arch in ("LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM"):
        assert arch in out


@pytest.mark.parametrize("command", ["prepare", "generate", "check", "models", "cache"])
def test_every_subcommand_has_help_with_an_example(command: str, capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    assert "example" in capsys.readouterr().out.lower()


def test_prepare_stacks_experts_and_the_prepared_folder_loads(tmp_path: Path, capsys) -> None:
    raw = tmp_path / "raw"
    make_checkpoint("qwen3_moe", raw, sharded=True)
    before = folder_digest(raw)
    out = tmp_path / "prepared"
    assert main(["prepare", "--ckpt", str(raw), "--out", str(out)]) == 0
    assert folder_digest(raw) == before
    index = json.loads((out / "model.safetensors.index.json").read_text())
    assert "layer0.experts_gate" in index["weight_map"] and (out / "config.json").is_file()
    stacked = SafetensorsResource(str(out), device="cpu").load("layer0.experts_gate")
    per_expert = SafetensorsResource(str(raw), device="cpu")
    for e in range(stacked.shape[0]):
        assert torch.equal(stacked[e], per_expert.load(f"model.layers.0.mlp.experts.{e}.gate_proj.weight"))
    opened = open_checkpoint(out, progress=False)
    assert opened.alias is None and opened.weights_dir == out.resolve()
    opened.module.load(opened.resource("cpu"))


def test_prepare_refuses_unsupported_architecture_and_writes_nothing(tmp_path: Path, capsys) -> None:
    raw = tmp_path / "raw"
    make_checkpoint("llama", raw, sharded=False)
    config = json.loads((raw / "config.json").read_text())
    config["architectures"] = ["GPT2LMHeadModel"]
    (raw / "config.json").write_text(json.dumps(config))
    before = folder_digest(raw)
    assert main(["prepare", "--ckpt", str(raw), "--out", str(tmp_path / "out")]) == 2
    assert "'GPT2LMHeadModel' is not supported" in capsys.readouterr().err
    assert folder_digest(raw) == before and not (tmp_path / "out").exists()


def test_generate_refuses_a_folder_without_tokenizer(tmp_path: Path, capsys) -> None:
    raw = tmp_path / "raw"
    make_checkpoint("llama", raw, sharded=False)
    assert main(["generate", "--ckpt", str(raw), "--prompt", "hi", "--max-new-tokens", "2"]) == 2
    assert "tokenizer" in capsys.readouterr().err


def test_generate_refuses_an_unknown_device(tmp_path: Path, capsys) -> None:
    assert main(["generate", "--ckpt", str(tmp_path), "--prompt", "hi", "--device", "gpu7"]) == 2
    assert "gpu7" in capsys.readouterr().err


@pytest.mark.parametrize("flag", [[], ["--allow-unused"]])
def test_generate_passes_allow_unused_to_the_session(monkeypatch, capsys, flag: list[str]) -> None:
    from tilefoundry.models.session import TextSession

    def refuse(cls, ckpt, **options):
        raise ValueError(f"allow_unused={options['allow_unused']}")

    monkeypatch.setattr(TextSession, "open", classmethod(refuse))
    assert main(["generate", "--ckpt", "x", "--prompt", "hi", *flag]) == 2
    assert f"allow_unused={bool(flag)}" in capsys.readouterr().err

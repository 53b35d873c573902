"""config.json and generation_config.json are read through one schema: every bad field is refused naming the file
and the field, sizes are checked against the checkpoint's tensors before anything is built, and a non-UTF-8 config
or index is named at every entry point."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from tilefoundry import func, module
from tilefoundry.cli.main import main
from tilefoundry.dsl import ConstTensor, Tensor
from tilefoundry.models import (
    ConfigFieldError,
    UnsupportedModelError,
    open_checkpoint,
    parse_config,
    read_config,
)
from tilefoundry.models.checkpoint import is_prepared
from tilefoundry.runtime.resource import CheckpointError, DictResource, SafetensorsResource

from .hf_models import add_tokenizer, folder_digest, make_checkpoint
from .refusals import refused

Edit = Callable[[dict[str, Any]], None]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("cfg") / "llama"
    make_checkpoint("llama", folder, sharded=False)
    add_tokenizer(folder)
    return folder


def copy_of(pristine: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "m"
    folder.mkdir()
    for f in pristine.iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    return folder


def edited(pristine: Path, tmp_path: Path, edit: Edit) -> Path:
    folder = copy_of(pristine, tmp_path)
    config = json.loads((folder / "config.json").read_text())
    edit(config)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def setter(key: str, value: Any) -> Edit:
    return lambda c: c.__setitem__(key, value)


def rope(params: dict[str, Any]) -> Edit:
    def edit(c: dict[str, Any]) -> None:
        c.pop("rope_parameters", None)
        c["rope_scaling"] = params

    return edit


# (case id, edit, the field the message must name, words of what is allowed)
FIELD_CASES: list[tuple[str, Edit, str, str]] = [
    ("hidden_size_string", setter("hidden_size", "abc"), "hidden_size", "must be an integer"),
    ("hidden_size_negative", setter("hidden_size", -1), "hidden_size", ">= 1"),
    ("hidden_size_zero", setter("hidden_size", 0), "hidden_size", ">= 1"),
    ("hidden_size_null", setter("hidden_size", None), "hidden_size", "got null"),
    ("hidden_size_list", setter("hidden_size", [256]), "hidden_size", "got the list [256]"),
    ("hidden_size_fraction", setter("hidden_size", 256.9), "hidden_size", "got the number 256.9"),
    ("hidden_size_missing", lambda c: c.pop("hidden_size"), "hidden_size", "the field is missing"),
    ("hidden_size_huge", setter("hidden_size", 10**30), "hidden_size", "<= 1048576"),
    ("heads_zero", setter("num_attention_heads", 0), "num_attention_heads", ">= 1"),
    ("kv_heads_not_dividing", setter("num_key_value_heads", 3), "num_key_value_heads", "not a multiple"),
    ("hidden_not_multiple_of_heads", lambda c: (c.__setitem__("hidden_size", 66), c.pop("head_dim", None)),
     "num_attention_heads", "not a multiple"),
    ("head_dim_odd", setter("head_dim", 15), "head_dim", "must be even"),
    ("eps_string", setter("rms_norm_eps", "tiny"), "rms_norm_eps", "finite number > 0"),
    ("eps_zero", setter("rms_norm_eps", 0), "rms_norm_eps", "> 0"),
    ("architectures_string", setter("architectures", "LlamaForCausalLM"), "architectures", "a list of strings"),
    ("architectures_empty", setter("architectures", []), "architectures", "a list of strings"),
    ("tie_string", setter("tie_word_embeddings", "false"), "tie_word_embeddings", "JSON boolean, not a string"),
    ("eos_string", setter("eos_token_id", "2"), "eos_token_id", "token id"),
    ("eos_negative", setter("eos_token_id", [2, -1]), "eos_token_id", "token id"),
    ("bos_string", setter("bos_token_id", "1"), "bos_token_id", "an integer"),
    ("layers_billion", setter("num_hidden_layers", 10**9), "num_hidden_layers", "<= 4096"),
    ("layers_bool", setter("num_hidden_layers", True), "num_hidden_layers", "got the boolean True"),
    ("vocab_zero", setter("vocab_size", 0), "vocab_size", ">= 1"),
    ("max_positions_negative", setter("max_position_embeddings", -5), "max_position_embeddings", ">= 1"),
    ("dtype_unknown", setter("dtype", "int8"), "dtype", "'bfloat16'"),
    ("rope_theta_string", setter("rope_theta", "big"), "rope_theta", "finite number > 0"),
    ("rope_linear_without_factor", rope({"rope_type": "linear"}), "factor", "a linear rope_type needs factor"),
    ("rope_llama3_without_factor", rope({"rope_type": "llama3"}), "factor", "needs factor"),
    ("rope_factor_string", rope({"type": "linear", "factor": "2"}), "factor", "finite number > 0"),
    ("rope_unknown_type", rope({"rope_type": "ntk-by-parts", "factor": 2.0}), "rope_type", "'longrope'"),
    ("rope_scaling_list", setter("rope_scaling", [1, 2]), "rope_scaling", "a JSON object"),
    ("rope_llama3_freq_order", rope({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0,
                                     "high_freq_factor": 1.0}), "high_freq_factor", "must exceed"),
    ("mlp_bias_string", setter("mlp_bias", "no"), "mlp_bias", "JSON boolean"),
]


@pytest.mark.parametrize(("edit", "field", "words"), [c[1:] for c in FIELD_CASES], ids=[c[0] for c in FIELD_CASES])
def test_a_bad_field_is_refused_naming_the_file_and_field(pristine: Path, tmp_path: Path, edit: Edit, field: str,
                                                          words: str) -> None:
    folder = edited(pristine, tmp_path, edit)
    with pytest.raises(ConfigFieldError) as info:
        read_config(folder)
    message = str(info.value)
    assert str(folder / "config.json") in message and field in message and words in message, message
    assert isinstance(info.value, UnsupportedModelError) and isinstance(info.value, ValueError)


@pytest.mark.parametrize("case", ["hidden_size_string", "tie_string", "layers_billion", "rope_linear_without_factor",
                                  "architectures_string", "eos_string", "heads_zero", "eps_string"])
@pytest.mark.parametrize("command", ["generate", "prepare"])
def test_the_commands_refuse_a_bad_field_in_one_line(pristine: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str], case: str,
                                                     command: str) -> None:
    _, edit, field, words = next(c for c in FIELD_CASES if c[0] == case)
    folder = edited(pristine, tmp_path, edit)
    before = folder_digest(folder)
    argv = (["generate", "--ckpt", str(folder), "--prompt", "hi"] if command == "generate"
            else ["prepare", "--ckpt", str(folder), "--out", str(tmp_path / "out")])
    refused(capsys, argv, str(folder / "config.json"), field, words)
    assert folder_digest(folder) == before and not (tmp_path / "out").exists()


@pytest.mark.parametrize(("content", "words"), [
    (b"[1, 2, 3]", "holds a JSON list; it must hold a JSON object"),
    (b'"a string"', "holds a JSON string"),
    (b"null", "holds a JSON null"),
    (b'{"hidden_size": 64,', "is not valid JSON"),
    (b'{"hidden_size": "\xff\xfe"}', "is not UTF-8 text"),
])
@pytest.mark.parametrize("name", ["config.json", "generation_config.json"])
def test_an_unreadable_config_file_is_named(pristine: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            content: bytes, words: str, name: str) -> None:
    folder = copy_of(pristine, tmp_path)
    (folder / name).write_bytes(content)
    with pytest.raises(UnsupportedModelError, match=words) as info:
        read_config(folder)
    assert str(folder / name) in str(info.value)
    with pytest.raises(UnsupportedModelError, match=words):
        open_checkpoint(folder, progress=False)
    refused(capsys, ["generate", "--ckpt", str(folder), "--prompt", "hi"], str(folder / name), words)
    refused(capsys, ["prepare", "--ckpt", str(folder), "--out", str(tmp_path / "out")], str(folder / name), words)


def test_generation_config_fields_are_validated_and_win(pristine: Path, tmp_path: Path) -> None:
    folder = copy_of(pristine, tmp_path)
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": "2"}))
    with pytest.raises(ConfigFieldError, match=r"generation_config\.json: eos_token_id must be a token id"):
        read_config(folder)
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": [5, 7]}))
    assert read_config(folder).eos_token_ids == (5, 7)
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": None}))
    assert read_config(folder).eos_token_ids == (2,)  # config.json's


def test_parse_config_refuses_what_is_not_an_object() -> None:
    with pytest.raises(ConfigFieldError, match="config.json holds a list"):
        parse_config([1, 2])  # type: ignore[arg-type]
    with pytest.raises(ConfigFieldError, match="generation_config.json holds a str"):
        parse_config({"architectures": ["LlamaForCausalLM"]}, "x")  # type: ignore[arg-type]


def test_good_values_are_read_as_given(pristine: Path, tmp_path: Path) -> None:
    folder = edited(pristine, tmp_path, lambda c: c.update(rms_norm_eps=1e-5, tie_word_embeddings=None,
                                                           eos_token_id=[2, 3]))
    (folder / "generation_config.json").unlink()
    config = read_config(folder)
    assert config.rms_norm_eps == 1e-5 and config.tie_word_embeddings is False
    assert config.eos_token_ids == (2, 3)
    assert config.rope.rope_type == "llama3" and math.isclose(config.rope.factor, 8.0)


# -- sizes against the checkpoint's tensors, before anything is built ---------------------------------------------


SIZE_CASES: list[tuple[str, Edit, tuple[str, ...]]] = [
    ("more_layers", setter("num_hidden_layers", 5), ("num_hidden_layers is 5", "layer 3", "model.layers.3")),
    ("wider", lambda c: c.update(hidden_size=128, head_dim=16), ("hidden_size 128", "model.embed_tokens.weight",
                                                                 "(256, 64)")),
    ("bigger_vocab", setter("vocab_size", 512), ("vocab_size 512", "model.embed_tokens.weight")),
    ("wider_mlp", setter("intermediate_size", 97), ("intermediate_size 97", "mlp.gate_proj.weight", "(96, 64)")),
    ("more_kv_heads", setter("num_key_value_heads", 4), ("num_key_value_heads 4", "k_proj.weight", "(32, 64)")),
    ("more_heads", lambda c: c.update(num_attention_heads=8, head_dim=16), ("num_attention_heads 8",
                                                                             "q_proj.weight")),
]


@pytest.mark.parametrize(("edit", "words"), [c[1:] for c in SIZE_CASES], ids=[c[0] for c in SIZE_CASES])
def test_sizes_are_checked_against_the_checkpoint(pristine: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  edit: Edit, words: tuple[str, ...]) -> None:
    folder = edited(pristine, tmp_path, edit)
    with pytest.raises(ConfigFieldError) as info:
        open_checkpoint(folder, progress=False)
    for word in (str(folder / "config.json"), *words):
        assert word in str(info.value), (word, str(info.value))
    refused(capsys, ["generate", "--ckpt", str(folder), "--prompt", "hi"], *words)
    refused(capsys, ["prepare", "--ckpt", str(folder), "--out", str(tmp_path / "out")], *words)


def test_sizes_of_a_prepared_folder_and_of_routed_experts(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILEFOUNDRY_CACHE", str(tmp_path / "cache"))
    raw = tmp_path / "moe"
    make_checkpoint("qwen3_moe", raw, sharded=False)
    config = json.loads((raw / "config.json").read_text())
    experts_key = "num_local_experts" if "num_local_experts" in config else "num_experts"
    (raw / "config.json").write_text(json.dumps({**config, experts_key: 8}))
    with pytest.raises(ConfigFieldError, match=r"num_experts 8 .*model\.layers\.0\.mlp\.gate\.weight is \(4, 64\)"):
        open_checkpoint(raw, progress=False)
    (raw / "config.json").write_text(json.dumps(config))
    out = tmp_path / "prepared"
    assert main(["prepare", "--ckpt", str(raw), "--out", str(out)]) == 0
    capsys.readouterr()
    (out / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 4}))
    with pytest.raises(ConfigFieldError, match=r"num_hidden_layers is 4, .*layer 3 \(layer3\.\*\)"):
        open_checkpoint(out, progress=False)


# -- non-UTF-8 indexes, at every entry point ----------------------------------------------------------------------


@module(entry="f")
class Tiny:
    @func
    def f(x: Tensor[(4,), "f32"], w: ConstTensor[(4,), "f32"]):
        return x + w


def test_a_non_utf8_index_is_named_at_every_entry_point(pristine: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    folder = copy_of(pristine, tmp_path)
    index = folder / "model.safetensors.index.json"
    index.write_bytes(b'{"weight_map": {"w": "model\xff.safetensors"}}')
    assert not is_prepared(folder)
    with pytest.raises(CheckpointError, match="model.safetensors.index.json.*is not UTF-8 text"):
        Tiny.load(SafetensorsResource(str(folder), device="cpu"))
    with pytest.raises(CheckpointError, match="is not UTF-8 text"):
        open_checkpoint(folder, progress=False)
    refused(capsys, ["generate", "--ckpt", str(folder), "--prompt", "hi"], str(index), "is not UTF-8 text")
    refused(capsys, ["prepare", "--ckpt", str(folder), "--out", str(tmp_path / "out")], str(index),
            "is not UTF-8 text")
    model = tmp_path / "tiny.py"
    model.write_text(
        "from tilefoundry import func, module\n"
        "from tilefoundry.dsl import ConstTensor, Tensor\n\n\n"
        "@module(entry='f')\n"
        "class Tiny:\n"
        "    @func\n"
        "    def f(x: Tensor[(4,), 'f32'], w: ConstTensor[(4,), 'f32']):\n"
        "        return x + w\n"
    )
    refused(capsys, ["check", f"{model}:Tiny", "--ckpt", str(folder), "--no-alias"], "--ckpt", "is not UTF-8 text")


def test_module_prepare_into_a_folder_with_a_non_utf8_index_is_refused_by_name(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    from safetensors.torch import save_file

    save_file({"w": torch.ones(4)}, str(raw / "model.safetensors"))
    out = tmp_path / "out"
    out.mkdir()
    (out / "model.safetensors.index.json").write_bytes(b"\xff\xfe")
    before = folder_digest(out)
    with pytest.raises(FileExistsError, match="is not a prepared checkpoint directory"):
        Tiny.prepare(SafetensorsResource(str(raw), device="cpu"), str(out))
    assert folder_digest(out) == before


@pytest.mark.parametrize("device", ["meta", *([] if torch.cuda.is_available() else ["cuda"])])
def test_module_prepare_refuses_a_device_it_cannot_run_on(tmp_path: Path, device: str) -> None:
    raw = DictResource({"w": torch.ones(4)})
    with pytest.raises(ValueError, match=rf"prepare: device '{device}'"):
        Tiny.prepare(raw, str(tmp_path / "out"), device=device)
    assert not (tmp_path / "out").exists()

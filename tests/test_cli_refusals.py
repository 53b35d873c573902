"""Bad command lines are refused by name: exit status 2, one line ``tilefoundry <subcommand>: refused: ...`` on
stderr, no traceback. A representative subset runs as a separate process; the rest calls ``main`` in-process."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from tilefoundry.cli.main import main

from .hf_models import add_tokenizer, folder_digest, make_checkpoint
from .refusals import refused, refused_subprocess

CUDA = torch.cuda.is_available()


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("cli") / "llama"
    make_checkpoint("llama", folder, sharded=False)
    add_tokenizer(folder)
    return folder


def gen(ckpt: Path, *extra: str) -> list[str]:
    return ["generate", "--ckpt", str(ckpt), "--prompt", "hi", "--max-new-tokens", "2", *extra]


# -- generate: each option, checked before anything is loaded -------------------------------------------------


@pytest.mark.parametrize(("value", "words"), [
    ("nan", ("--temperature", "finite number >= 0", "got nan")),
    ("inf", ("--temperature", "finite number >= 0", "got inf")),
    ("-1", ("--temperature", ">= 0", "got -1.0")),
    ("warm", ("--temperature", "'warm' is not a number")),
])
def test_generate_refuses_a_temperature(ckpt: Path, capsys: pytest.CaptureFixture[str], value: str,
                                        words: tuple[str, ...]) -> None:
    refused(capsys, gen(ckpt, "--temperature", value), *words)


@pytest.mark.parametrize(("value", "words"), [
    (str(2**64), ("--seed", "[0, 2**64 - 1]", str(2**64))),
    ("99999999999999999999999999999", ("--seed", "[0, 2**64 - 1]")),
    ("-1", ("--seed", "got -1")),
    ("1e3", ("--seed", "'1e3' is not an integer")),
])
def test_generate_refuses_a_seed(ckpt: Path, capsys: pytest.CaptureFixture[str], value: str,
                                 words: tuple[str, ...]) -> None:
    refused(capsys, gen(ckpt, "--seed", value), *words)


@pytest.mark.parametrize(("option", "value", "words"), [
    ("--top-p", "nan", ("--top-p", "(0, 1]")),
    ("--top-p", "0", ("--top-p", "(0, 1]")),
    ("--top-p", "1.5", ("--top-p", "(0, 1]")),
    ("--top-k", "-3", ("--top-k", ">= 0")),
    ("--max-new-tokens", "0", ("--max-new-tokens", ">= 1")),
    ("--max-new-tokens", "many", ("--max-new-tokens", "not an integer")),
    ("--backend", "gpu", ("--backend", "invalid choice", "reference", "twin")),
])
def test_generate_refuses_sampling_and_budget_options(ckpt: Path, capsys: pytest.CaptureFixture[str], option: str,
                                                      value: str, words: tuple[str, ...]) -> None:
    refused(capsys, gen(ckpt, option, value), *words)


def test_generate_refuses_more_tokens_than_the_model_has_positions(ckpt: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    refused(capsys, gen(ckpt, "--max-new-tokens", "1000000000"), "max_new_tokens", "max_position_embeddings",
            "config.json", "at most")


def test_generate_refuses_an_empty_prompt(ckpt: Path, capsys: pytest.CaptureFixture[str]) -> None:
    refused(capsys, ["generate", "--ckpt", str(ckpt), "--prompt", ""], "prompt is empty")
    refused(capsys, ["generate", "--ckpt", str(ckpt), "--prompt", "", "--chat"], "prompt is empty")


@pytest.mark.parametrize(("device", "words"), [
    ("meta", ("--device", "'meta'", "cpu, cuda or cuda:N")),
    ("foo", ("--device", "'foo'", "not a device torch knows")),
    ("cuda:99", ("--device", "cuda:99")),
])
def test_generate_refuses_a_device(ckpt: Path, capsys: pytest.CaptureFixture[str], device: str,
                                   words: tuple[str, ...]) -> None:
    refused(capsys, gen(ckpt, "--device", device), *words)


@pytest.mark.skipif(CUDA, reason="needs a machine without CUDA")
@pytest.mark.parametrize("command", ["generate", "check", "prepare"])
def test_every_subcommand_refuses_cuda_without_cuda(ckpt: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    command: str) -> None:
    argv = {
        "generate": gen(ckpt),
        "check": ["check", f"{tmp_path}/m.py:X"],
        "prepare": ["prepare", "--ckpt", str(ckpt), "--out", str(tmp_path / "out")],
    }[command]
    refused(capsys, [*argv, "--device", "cuda"], "--device", "'cuda'", "CUDA is not available")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["check", "prepare"])
@pytest.mark.parametrize("device", ["foo", "meta"])
def test_check_and_prepare_share_the_device_parser(ckpt: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   command: str, device: str) -> None:
    argv = ["check", f"{tmp_path}/m.py:X"] if command == "check" else [
        "prepare", "--ckpt", str(ckpt), "--out", str(tmp_path / "out")]
    refused(capsys, [*argv, "--device", device], "--device", repr(device))
    assert not (tmp_path / "out").exists()


def test_generate_refuses_a_hub_name_the_cache_lacks_without_touching_the_network(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no folder named org/ here
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))  # and no snapshot of org/name in the cache
    refused_subprocess(["generate", "--ckpt", "org/name", "--prompt", "hi"], "'org/name' is no local folder",
                       str(tmp_path / "empty-cache"), "never downloads", "hf download org/name", guard_network=True)


def test_every_subcommand_runs_with_the_hub_libraries_offline(ckpt: Path, capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    assert main(["models"]) == 0
    assert os.environ["HF_HUB_OFFLINE"] == "1" and os.environ["TRANSFORMERS_OFFLINE"] == "1"


def test_generate_refuses_a_file_or_missing_folder_as_ckpt(ckpt: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    refused(capsys, ["generate", "--ckpt", str(ckpt / "config.json"), "--prompt", "hi"], "is a file, not a folder")
    refused(capsys, ["generate", "--ckpt", str(tmp_path / "nope"), "--prompt", "hi"], "does not exist")


# -- generate: the loop runs inside the command's error handling -----------------------------------------------


def test_generate_stops_at_a_step_with_non_finite_logits(ckpt: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "nan"
    broken.mkdir()
    for f in ckpt.iterdir():
        (broken / f.name).write_bytes(f.read_bytes())
    state = load_file(str(broken / "model.safetensors"))
    state["model.norm.weight"] = torch.full_like(state["model.norm.weight"], float("nan"))
    save_file(state, str(broken / "model.safetensors"), metadata={"format": "pt"})
    for backend in ("twin", "reference"):
        line = refused(capsys, gen(broken, "--backend", backend), "generation step 0", "prefill", "non-finite logits",
                       "NaN", "stopped after 0 token")
        assert "Inf" in line
    refused_subprocess(gen(broken, "--json"), "generation step 0", "non-finite logits")


def test_generate_with_a_tiny_temperature_is_greedy_and_never_nan(ckpt: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert main(gen(ckpt, "--max-new-tokens", "6", "--json")) == 0
    greedy = json.loads(capsys.readouterr().out)["tokens"]
    for temperature in ("1e-45", "5e-324"):
        assert main(gen(ckpt, "--max-new-tokens", "6", "--json", "--temperature", temperature, "--top-p", "0.5",
                        "--seed", str(2**64 - 1))) == 0
        assert json.loads(capsys.readouterr().out)["tokens"] == greedy


# -- prepare ------------------------------------------------------------------------------------------------------


def test_prepare_refuses_a_hub_name_and_an_already_prepared_folder(ckpt: Path, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    refused(capsys, ["prepare", "--ckpt", "org/name", "--out", str(tmp_path / "out")], "'org/name' is no local folder",
            "never downloads")
    before = folder_digest(ckpt)
    assert main(["prepare", "--ckpt", str(ckpt), "--out", str(tmp_path / "out")]) == 0
    capsys.readouterr()
    refused(capsys, ["prepare", "--ckpt", str(tmp_path / "out"), "--out", str(tmp_path / "again")],
            "already a prepared folder")
    assert folder_digest(ckpt) == before and not (tmp_path / "again").exists()


# -- argparse's own errors take the same form -------------------------------------------------------------------


@pytest.mark.parametrize(("argv", "words"), [
    (["generate", "--prompt", "hi"], ("required", "--ckpt")),
    (["prepare", "--ckpt", "x"], ("required", "--out")),
    (["check"], ("required", "FILE.py:Name")),
    (["check", "m.py:X", "--expect"], ("--expect", "expected one argument")),
    (["check", "m.py:X", "--bogus"], ("unrecognized arguments", "--bogus")),
    (["models", "extra"], ("unrecognized arguments", "extra")),
    (["nosuch"], ("invalid choice", "'nosuch'", "generate")),
])
def test_argparse_errors_are_one_line_refusals(capsys: pytest.CaptureFixture[str], argv: list[str],
                                               words: tuple[str, ...]) -> None:
    line = refused(capsys, argv, *words)
    assert "usage:" not in line


def test_refusals_as_a_separate_process(ckpt: Path, tmp_path: Path) -> None:
    refused_subprocess(gen(ckpt, "--temperature", "nan"), "--temperature", "got nan")
    refused_subprocess(gen(ckpt, "--seed", str(2**70)), "--seed", "[0, 2**64 - 1]")
    refused_subprocess(gen(ckpt, "--device", "meta"), "--device", "'meta'")
    refused_subprocess(["generate", "--ckpt", str(ckpt), "--prompt", ""], "prompt is empty")
    refused_subprocess(["check", f"{tmp_path}/m.py:X", "--device", "foo"], "--device", "'foo'")
    refused_subprocess(["prepare", "--ckpt", str(ckpt), "--out", str(tmp_path / "o"), "--device", "meta"],
                       "--device", "'meta'")
    refused_subprocess(["nosuch"], "invalid choice")

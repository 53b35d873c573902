"""``tilefoundry check --ckpt DIR`` with no target: a shipped family's twin against its Module (issue 26, item 4).

Acceptance: on a tiny family checkpoint the command passes with its defaults. It builds both sides itself, runs
prefill and one decode step made by the model's own methods, and judges every kernel on what the reference gave
it; a broken twin fails and the rows name the kernel. The help's examples run as printed.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import torch

from tilefoundry.cli.main import main
from tilefoundry.models import twins

from .hf_models import make_checkpoint
from .refusals import refused
from .refusals import run_check as run


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("family")
    out = {}
    for family in ("llama", "qwen3"):
        make_checkpoint(family, base / family, sharded=family == "qwen3")
        out[family] = base / family
    return out


def _rows(out: str) -> dict[str, str]:
    """Verdict by row path (``prefill.layer0.attend:output[0]`` -> ``PASS``)."""
    return {line.split()[0]: line.split()[-1] for line in out.splitlines() if ":output" in line.split(" ")[0]}


@pytest.mark.parametrize("family", ["llama", "qwen3"])
def test_a_family_checkpoint_passes_with_the_defaults(folders: dict[str, Path], family: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(capsys, "--ckpt", str(folders[family]))
    assert status == 0, out + err
    assert out.rstrip().splitlines()[-1].startswith("PASS: all ")
    assert f"candidate: CausalLMTwin, the {family} family's runtime twin" in out
    assert "reference: evaluator on Module CausalLM (LoadedModule)" in out
    assert "predicates: default rel_l2:max=" in out and "on f32 kernels" in out
    rows = _rows(out)
    for label in ("prefill.forward:output[0]", "prefill.forward:output[1][2][1]", "decode.forward:output[0]",
                  "prefill.embed:output", "prefill.head:output", "prefill.layer0.qkv:output[0]",
                  "prefill.layer2.attend:output[1]", "decode.layer1.attend:output[0]", "decode.layer2.mlp:output"):
        assert rows[label] == "PASS", label
    assert ("decode.layer0.qk_norm:output[0]" in rows) == (family == "qwen3")
    steps = [path for path in rows if ".forward" in path]
    assert all(path.startswith(("prefill.forward", "decode.forward")) for path in steps), "node steps: --per-node"


def test_a_prepared_folder_passes_too(folders: dict[str, Path], tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prepare", "--ckpt", str(folders["llama"]), "--out", str(tmp_path / "prep")]) == 0
    capsys.readouterr()
    status, out, err = run(capsys, "--ckpt", str(tmp_path / "prep"), "--per-node", "--json")
    assert status == 0, out + err
    doc = json.loads(out)
    assert doc["passed"] is True and doc["raised"] == []
    assert "tilefoundry prepare output, read as it is" in doc["weights"]
    assert doc["dims"] == {"seq": 3, "capacity": 4} and doc["target"] == f"--ckpt {tmp_path / 'prep'}"
    paths = [o["path"] for o in doc["outputs"]]
    assert "prefill.layer1.forward:output[0]" in paths and "decode.layer1.forward:output[2]" in paths
    assert next(o for o in doc["outputs"] if o["path"] == "decode.forward:output[0]")["shape"] == [1, 256]


def test_a_broken_twin_fails_and_the_rows_name_its_kernels(folders: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    real = twins.rms_norm
    monkeypatch.setattr(twins, "rms_norm", lambda x, w, eps: real(x, w, eps) * 1.001)  # the twin's norm only
    status, out, _ = run(capsys, "--ckpt", str(folders["llama"]))
    assert status == 1
    rows = _rows(out)
    for label in ("prefill.forward:output[0]", "prefill.layer0.qkv:output[0]", "decode.layer2.mlp:output",
                  "decode.head:output"):
        assert rows[label] == "FAIL", label
    for label in ("prefill.embed:output", "prefill.layer0.attend:output[0]", "decode.layer1.attend:output[1]"):
        assert rows[label] == "PASS", label
    assert out.rstrip().splitlines()[-1].startswith("FAIL: ")


def test_a_twin_kernel_that_raises_fails_its_rows_and_the_rest_is_judged(
        folders: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def written(*args: object) -> torch.Tensor:
        raise RuntimeError("boom in the cache write")

    monkeypatch.setattr(twins, "_written", written)
    status, out, err = run(capsys, "--ckpt", str(folders["qwen3"]))
    assert status == 1 and err == ""
    assert "the twin raised RuntimeError: boom in the cache write" in out
    raised = [line.split()[0] for line in out.splitlines() if line.split()[-3:] == ["raised", "RuntimeError", "FAIL"]]
    assert "prefill.layer0.attend" in raised and "decode.forward" in raised
    assert _rows(out)["prefill.layer0.mlp:output"] == "PASS"


def test_a_twin_that_cannot_be_built_fails(folders: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    def build(*args: object) -> None:
        raise ValueError("no twin today")

    monkeypatch.setattr(twins, "build_twin", build)
    status, out, _ = run(capsys, "--ckpt", str(folders["llama"]))
    assert status == 1
    assert "the twin raised ValueError: no twin today" in out and "build_twin" in out


def test_expect_replaces_the_defaults(folders: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "--ckpt", str(folders["llama"]), "--expect", "*=rel_l2:max=1e-3",
                         "--expect", "decode.forward:output[0]=cosine:min=0.9999")
    assert status == 0
    assert "predicates: as --expect states" in out
    row = next(line for line in out.splitlines() if line.startswith("decode.forward:output[0]"))
    assert "cosine" in row and "PASS" in row
    assert all("max=0.001" in line for line in out.splitlines() if ":output" in line and "rel_l2" in line)
    status, out, _ = run(capsys, "--ckpt", str(folders["llama"]), "--expect",
                         "prefill.forward:output[0]=max_abs:max=0", "--dim", "seq=5", "--seed", "3")
    assert "default rel_l2:max=" in out and "(5, 256)" in out and "dims:      seq=5, capacity=6" in out
    row = next(line for line in out.splitlines() if line.startswith("prefill.forward:output[0]"))
    assert "max_abs" in row


def test_refusals_of_a_family_check(folders: dict[str, Path], tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    ckpt = str(folders["llama"])
    refused(capsys, ["check"], "a target is required", "FILE.py:Name", "--ckpt DIR")
    (tmp_path / "plain").mkdir()
    refused(capsys, ["check", "--ckpt", str(tmp_path / "plain")], "config.json", "family checkpoint",
            "check FILE.py:Name --ckpt DIR")
    refused(capsys, ["check", "--ckpt", ckpt, "--inputs", "x.pt"], "--inputs", "--dim seq=N")
    refused(capsys, ["check", "--ckpt", ckpt, "--no-alias"], "--no-alias", "family's own table")
    refused(capsys, ["check", "--ckpt", ckpt, "--int-range", "0:9"], "--int-range", "vocabulary")
    refused(capsys, ["check", "--ckpt", ckpt, "--dim", "ctx=4"], "--dim ctx", "seq=N", "capacity=N")
    refused(capsys, ["check", "--ckpt", ckpt, "--dim", "seq=128"], "--dim seq=128", "[1, 127]")
    refused(capsys, ["check", "--ckpt", ckpt, "--dim", "seq=4", "--dim", "capacity=4"], "--dim capacity=4",
            "[5, 128]")
    refused(capsys, ["check", "--ckpt", ckpt, "--expect", "nope.fn:output=equal"], "nope.fn:output",
            "no checked callable produced")


def _help() -> str:
    from tilefoundry.cli.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices["check"]
    return sub.format_help()


PLACEHOLDER = "~/models/Qwen3-0.6B"


def test_every_example_of_the_help_runs_as_printed(folders: dict[str, Path],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    text = _help()
    commands = [line.strip() for line in text.splitlines() if line.strip().startswith("tilefoundry check ")]
    assert len(commands) >= 4 and any("--ckpt " + PLACEHOLDER in c for c in commands)
    for command in commands:
        argv = [str(folders["qwen3"]) if word == PLACEHOLDER else word for word in shlex.split(command)]
        assert argv[:2] == ["tilefoundry", "check"], command
        status = main(argv[1:])
        out = capsys.readouterr().out
        broken = "BrokenTwin" in command
        assert status == (1 if broken else 0), (command, out)
        if "--json" in argv:
            assert json.loads(out)["passed"] is True
    # The table the help prints is the run of its BrokenTwin command: same rows, same verdicts.
    example = next(c for c in commands if "BrokenTwin --per-node" in c)
    assert main(shlex.split(example)[1:]) == 1
    printed = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()
               if line.rstrip().endswith(("PASS", "FAIL")) and ":output" in line}
    shown = [line.split() for line in text.splitlines() if line.startswith("  ") and ":output" in line
             and line.rstrip().endswith(("PASS", "FAIL"))]
    assert len(shown) == 7
    for row in shown:
        assert _words(printed[row[0]]) == _words(row), "paths, shapes, dtypes, predicates and verdicts agree"


def _words(cells: list[str]) -> list[str]:
    """A table row without its measured numbers (their last digits depend on the CPU's instruction set)."""
    def numeric(cell: str) -> bool:
        try:
            float(cell.rpartition("=")[2])
        except ValueError:
            return False
        return True

    return [cell for cell in cells if not numeric(cell)]

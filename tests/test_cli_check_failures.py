"""``tilefoundry check`` never passes what failed: code under check that raises (SystemExit included) fails its row
with exit 1, NaN on both sides fails unless the predicate says equal_nan, and ``--inputs`` of the wrong type is
refused naming the file, the parameter and the declaration."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from .refusals import SRC, refused
from .refusals import run_check as run

SOURCE = '''\
import os
import sys

import torch

from tilefoundry import func, module
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, tf
from tilefoundry.runtime import runtime_func, runtime_module

seq = DimVar("seq", 1, 8)


@module(entry="proj")
class Proj:
    @func
    def proj(x: Tensor[(seq, 4), "f32"], w: ConstTensor[(4, 4), "f32"]):
        return tf.matmul(x, w)


@module
class Pair:
    first = Proj
    second = Proj.renamed("second")

    def forward(self, x):
        return self.first(x), self.second(x)


@module
class ExitingReference:
    first = Proj

    def forward(self, x):
        sys.exit(0)


@module(entry="logs")
class Logs:
    @func
    def logs(x: Tensor[(seq, 4), "f32"]):
        return tf.log(x - 100.0)


@runtime_module(Logs)
class LogsTwin:
    @runtime_func
    def logs(self, x):
        return torch.log(x - 100.0)


@runtime_module(Proj)
class Good:
    @runtime_func
    def proj(self, x, w):
        return x @ w


@runtime_module(Proj)
class Exits:
    @runtime_func
    def proj(self, x, w):
        sys.exit(0)


@runtime_module(Proj)
class ExitsFailing:
    @runtime_func
    def proj(self, x, w):
        sys.exit(3)


class Stop(BaseException):
    pass


@runtime_module(Proj)
class RaisesBase:
    @runtime_func
    def proj(self, x, w):
        raise Stop("a BaseException of its own")


@runtime_module(Proj)
class ReturnsText:
    @runtime_func
    def proj(self, x, w):
        return "not a tensor"


@runtime_module(Pair)
class PairOneExits:
    first = Exits
    second = Good


@runtime_module(Pair)
class PairWrongNesting:
    first = Good
    second = Good

    def forward(self, x):
        return (self.first(x),)


@runtime_module(Pair)
class PairReturnsText:
    first = Good
    second = Good

    def forward(self, x):
        return "done"


@runtime_module(ExitingReference)
class ExitingReferenceTwin:
    first = Good

    def forward(self, x):  # its own step: only the reference's forward exits
        return self.first(x)
'''

TOL = "*=rel_l2:max=1e-5"


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("checkfail") / "m.py"
    path.write_text(SOURCE)
    return path


def failed_row(out: str, label: str) -> list[str]:
    row = next(line for line in out.splitlines() if line.startswith(f"{label} "))
    assert row.split()[-1] == "FAIL"
    return row.split()


# -- user code that raises is that callable's failure -------------------------------------------------------------


def test_a_twin_calling_sys_exit_0_fails_with_exit_1(model: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "tilefoundry.cli.main", "check", f"{model}:Exits", "--expect", TOL],
                          capture_output=True, text=True, env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
                          check=False)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    assert failed_row(done.stdout, "forward")[-3:] == ["raised", "SystemExit", "FAIL"]
    assert "note: the twin raised SystemExit: 0" in done.stdout
    assert done.stdout.rstrip().splitlines()[-1] == "FAIL: 1 checked callable raised (forward)"


@pytest.mark.parametrize(("target", "error"), [
    ("ExitsFailing", "SystemExit: 3"),
    ("RaisesBase", "Stop: a BaseException of its own"),
    ("ReturnsText", "TypeError: ReturnsText Proj.proj returned a str at output"),
])
def test_other_failures_of_the_twin_fail_its_row(model: Path, capsys: pytest.CaptureFixture[str], target: str,
                                                 error: str) -> None:
    status, out, err = run(capsys, f"{model}:{target}", "--expect", TOL)
    assert status == 1 and err == ""
    assert f"note: the twin raised {error}" in out


def test_sys_exit_at_import_of_the_model_file_fails_with_exit_1(model: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    exiting = model.parent / "exits_at_import.py"
    exiting.write_text("import sys\nsys.exit(0)\n")
    status, out, err = run(capsys, f"{exiting}:Anything", "--expect", TOL)
    assert status == 1 and err == ""
    assert failed_row(out, f"import {exiting}")[-3:] == ["raised", "SystemExit", "FAIL"]
    assert "the model file raised SystemExit: 0" in out
    status, out, _ = run(capsys, f"{exiting}:Anything", "--json")
    data = json.loads(out)
    assert status == 1 and data["passed"] is False and data["outputs"] == []
    assert data["raised"] == [{"label": f"import {exiting}", "side": "model file", "exception": "SystemExit",
                               "error": "SystemExit: 0"}]


@pytest.mark.parametrize(("target", "words"), [
    ("PairWrongNesting", "returned a wrong result: output: the candidate's result has a different structure"),
    ("PairReturnsText", "returned a wrong result: its result is not tensors: output is a value of type str"),
])
def test_a_twin_step_returning_the_wrong_kind_of_result_fails(model: Path, capsys: pytest.CaptureFixture[str],
                                                              target: str, words: str) -> None:
    status, out, err = run(capsys, f"{model}:{target}", "--expect", TOL)
    assert status == 1 and err == ""
    assert failed_row(out, "forward")[-3:] == ["wrong", "result", "FAIL"]
    assert f"note: the twin {words}" in out


def test_sys_exit_in_the_reference_fails_with_exit_1(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(capsys, f"{model}:ExitingReferenceTwin", "--expect", TOL)
    assert status == 1 and err == ""
    assert "note: the evaluator raised SystemExit: 0" in out


def test_the_other_nodes_are_still_judged_when_one_raises(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(capsys, f"{model}:PairOneExits", "--per-node", "--expect", TOL)
    assert status == 1 and err == ""
    assert failed_row(out, "forward")[-3:] == ["raised", "SystemExit", "FAIL"]
    assert failed_row(out, "first.proj")[-3:] == ["raised", "SystemExit", "FAIL"]
    second = next(line for line in out.splitlines() if line.startswith("second.proj:output"))
    assert second.split()[-1] == "PASS"
    assert out.rstrip().splitlines()[-1] == ("FAIL: 2 checked callables raised (forward, first.proj); all 1 outputs "
                                             "judged meet their predicates")
    status, out, _ = run(capsys, f"{model}:PairOneExits", "--per-node", "--json", "--expect", TOL)
    data = json.loads(out)
    assert status == 1 and data["passed"] is False
    assert [o["path"] for o in data["outputs"]] == ["second.proj:output"]
    assert [r["label"] for r in data["raised"]] == ["forward", "first.proj"]


def test_a_passing_twin_still_exits_0(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, f"{model}:Good", "--expect", TOL)
    assert status == 0 and out.rstrip().splitlines()[-1] == "PASS: all 1 output meet their predicates"


# -- NaN on both sides ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pred", ["allclose:atol=0,rtol=0", "rel_l2:max=0", "cosine:min=1", "ulp:max=0",
                                  "max_abs:max=0", "max_rel:max=0", "equal"])
def test_all_nan_on_both_sides_fails_unless_equal_nan(model: Path, capsys: pytest.CaptureFixture[str],
                                                      pred: str) -> None:
    status, out, _ = run(capsys, f"{model}:LogsTwin", "--expect", f"output={pred}")
    assert status == 1, out
    assert "non-finite elements: 12 of 12 in the candidate, 12 in the reference" in out
    lenient = f"{pred}{',' if ':' in pred else ':'}equal_nan"
    status, out, _ = run(capsys, f"{model}:LogsTwin", "--json", "--expect", f"output={lenient}")
    data = json.loads(out)
    assert status == 0 and data["passed"] is True and data["outputs"][0]["results"][0]["equal_nan"] is True


def test_nan_inf_refuses_equal_nan_on_the_command_line(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    refused(capsys, ["check", f"{model}:LogsTwin", "--expect", "output=nan_inf:equal_nan"], "--expect",
            "nan_inf takes no equal_nan")


# -- --inputs of the wrong type --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("tensor", "words"), [
    (torch.zeros(3, 4, dtype=torch.float64), ("argument x has dtype torch.float64", "declared Tensor[(seq, 4), f32]")),
    (torch.zeros(3, 5), ("argument x has shape (3, 5)", "declared Tensor[(seq, 4), f32]", "axis 1")),
    (torch.zeros(3), ("argument x has rank 1", "declared Tensor[(seq, 4), f32]")),
    (torch.zeros(9, 4), ("argument x", "DimVar seq = 9 is outside its range [1, 8)")),
])
@pytest.mark.parametrize("suffix", [".safetensors", ".pt"])
def test_inputs_of_the_wrong_type_are_refused_naming_file_param_and_declaration(
        model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], tensor: torch.Tensor,
        words: tuple[str, ...], suffix: str) -> None:
    file = tmp_path / f"inputs{suffix}"
    if suffix == ".pt":
        torch.save({"x": tensor}, str(file))
    else:
        save_file({"x": tensor}, str(file))
    line = refused(capsys, ["check", f"{model}:Good", "--inputs", str(file), "--expect", TOL],
                   f"--inputs {file}", *words)
    assert "the twin raised" not in line

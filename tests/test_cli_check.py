"""The ``tilefoundry check`` command: selection, weights, inputs, predicates, output forms and exit statuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from tilefoundry.cli.main import main

from .refusals import run_check as run

SOURCE = '''\
from __future__ import annotations

import torch

from tilefoundry import func, module
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, tf
from tilefoundry.runtime import RuntimeModule, runtime_func, runtime_module

seq = DimVar("seq", 1, 8)
wide = DimVar("wide", 5, 7)
narrow = DimVar("narrow", 1, 2)


@module(entry="proj")
class Proj:
    @func
    def proj(x: Tensor[(seq, 4), "f32"], w: ConstTensor[(4, 4), "f32"]):
        return tf.matmul(x, w)


@module
class Net:
    head = Proj

    @func
    def embed(ids: Tensor[(seq,), "i64"], table: ConstTensor[(6, 4), "f32"]):
        return tf.index_select(table, ids, 0)

    @func
    def pick(x: Tensor[(seq, 4), "f32"]):
        return tf.argmax(x, -1)

    def forward(self, ids):
        h = self.head(self.embed(ids))
        return h, self.pick(h)

    def untyped(self, hidden):
        return self.head(hidden)

    def pair(self, both):
        return self.head(both[0]) + both[1]


@runtime_module(Proj)
class ProjTwin:
    @runtime_func
    def proj(self, x, w):
        return torch.mm(x, w)


@runtime_module(Net)
class NetTwin:
    head = ProjTwin

    @runtime_func
    def embed(self, ids, table):
        return table[ids]

    @runtime_func
    def pick(self, x):
        return x.argmax(-1)


@runtime_module(Net)
class AliasedTwin:
    ALIAS = {"table": "emb", "head": "out", "w": "kernel"}
    head = ProjTwin
    embed = NetTwin.embed.impl
    pick = NetTwin.pick.impl


@runtime_module(Proj)
class RaisingTwin:
    @runtime_func
    def proj(self, x, w):
        raise RuntimeError("boom in the kernel")


@runtime_module(Proj)
class OffByOne:
    @runtime_func
    def proj(self, x, w):
        return torch.mm(x, w) + 1.0


class Hand(RuntimeModule):
    def __init__(self):
        super().__init__("Net")

    def forward(self, ids):
        return ids


class HandProj(RuntimeModule):
    def __init__(self, *, ir):
        super().__init__(ir.name, ir.entry)

    def forward(self, x):
        return x


@runtime_module(Net)
class PartlyHand:
    head = HandProj
    embed = NetTwin.embed.impl
    pick = NetTwin.pick.impl


@module(entry="logs")
class Logs:
    @func
    def logs(x: Tensor[(seq, 4), "f32"]):
        return tf.log(x)


@module(entry="shapes")
class Shapes:
    @func
    def shapes(a: Tensor[(wide,), "f32"], b: Tensor[(narrow,), "f32"], c: Tensor[(seq,), "f32"]):
        return a + 1.0, b + 1.0, c + 1.0


@func
def double(x: Tensor[(seq, 4), "f32"]):
    return x + x


ALIAS = {"table": "model.embed.weight", "head": "model.head", "w": "weight"}
OTHER = {"table": "emb", "head": "out", "w": "kernel"}
NOT_A_TABLE = 3
'''

TOL = "*=rel_l2:max=1e-6"


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "net.py"
    path.write_text(SOURCE)
    return path


def refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    status, out, err = run(capsys, *argv)
    assert status == 2, (out, err)
    assert out == ""
    assert err.startswith("tilefoundry check: refused: ")
    return err


def test_help_shows_a_worked_example(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["check", "--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    assert "FILE.py:Name[.child...][.member]" in text
    assert ("tilefoundry check tilefoundry.examples.check_twin:BrokenTwin --per-node --dim seq=4 "
            "--expect '*=rel_l2:max=1e-5'") in text
    assert "layer1.ffn.mlp:output" in text and "FAIL: 3 of 11 outputs failed" in text
    for words in ("--ckpt DIR", "ALIAS", "--no-alias", "--inputs FILE", "--dim NAME=N", "nan_inf", "exit status 0"):
        assert words in text


def test_twin_passes_and_table_names_outputs(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(capsys, f"{model}:NetTwin", "--expect", TOL)
    assert status == 0, err
    assert "candidate: NetTwin (runtime twin of Net)" in out
    assert "reference: evaluator on Module Net (LoadedModule)" in out
    assert "dims:      seq=3" in out
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("output")}
    assert "(3, 4)" in rows["output[0]"] and "rel_l2" in rows["output[0]"]
    assert "equal" in rows["output[1]"], "'*' gives an integer output equal"
    assert out.rstrip().endswith("PASS: all 2 outputs meet their predicates")


def test_a_failing_predicate_exits_1(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, f"{model}:OffByOne", "--expect", "output=max_abs:max=0.5")
    assert status == 1
    assert "max_abs=1" in out and "FAIL: 1 of 1 output failed (output)" in out


def test_json_report_with_setup(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, f"{model}:NetTwin", "--json", "--seed", "7", "--dim", "seq=5",
                         "--expect", "output[0]=rel_l2:max=1e-6", "--expect", "output[0]=cosine:min=0.999",
                         "--expect", "output[1]=equal")
    assert status == 0
    doc = json.loads(out)
    assert doc["passed"] is True and doc["seed"] == 7 and doc["dims"] == {"seq": 5}
    assert doc["target"].endswith("net.py:NetTwin") and doc["reference"].startswith("evaluator on Module Net")
    first = doc["outputs"][0]
    assert first["path"] == "output[0]" and first["shape"] == [5, 4]
    assert [r["predicate"] for r in first["results"]] == ["rel_l2", "cosine"]


def test_seed_decides_the_random_data(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def norm(seed: str) -> float:
        status, out, _ = run(capsys, f"{model}:NetTwin", "--json", "--seed", seed, "--expect", TOL)
        assert status == 0
        return json.loads(out)["outputs"][0]["ref_norm"]

    assert norm("1") == norm("1")
    assert norm("1") != norm("2")


def test_selecting_a_child_and_a_function(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, f"{model}:NetTwin.head", "--expect", "output=equal")
    assert status == 0 and "output" in out
    status, out, _ = run(capsys, f"{model}:NetTwin.head.proj", "--expect", "output=equal")
    assert status == 0
    status, out, _ = run(capsys, f"{model}:NetTwin.pick", "--expect", "output=equal")
    assert status == 0 and "i64" in out
    status, out, _ = run(capsys, f"{model}:OffByOne.proj", "--expect", "output=max_abs:max=0.5")
    assert status == 1


def test_per_node_labels_and_qualified_paths(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, f"{model}:NetTwin", "--per-node", "--expect", TOL,
                         "--expect", "head.proj:output=max_abs:max=1e-6")
    assert status == 0
    labels = [line.split()[0] for line in out.splitlines() if ":output" in line]
    assert labels == ["forward:output[0]", "forward:output[1]", "embed:output", "pick:output", "head.proj:output"]
    assert "max_abs" in next(line for line in out.splitlines() if line.startswith("head.proj:output"))
    err = refused(capsys, f"{model}:NetTwin", "--per-node", "--expect", TOL, "--expect", "nope.fn:output=equal")
    assert "--expect names nope.fn:output, which no checked callable produced" in err


def test_a_module_alone_is_judged_by_nan_inf(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, f"{model}:Net")
    assert status == 0
    assert "reference: none (judged alone)" in out and "nan_inf" in out
    status, out, _ = run(capsys, f"{model}:Logs")
    assert status == 1, "log of random normals holds NaN"
    assert "nan_inf" in out and "FAIL" in out
    status, out, _ = run(capsys, f"{model}:double")
    assert status == 0, "a bare @func is evaluated alone too"
    err = refused(capsys, f"{model}:Net", "--expect", "*=rel_l2:max=1e-3")
    assert "selects a Module alone: there is no twin to compare, so rel_l2" in err and "nan_inf" in err
    err = refused(capsys, f"{model}:double", "--expect", "output=equal")
    assert "selects a Function alone" in err


def test_dimvar_defaults_and_dim_option(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, f"{model}:Shapes")
    assert status == 0
    assert "dims:      narrow=1, seq=3, wide=5" in out
    shapes = [line.split()[1] for line in out.splitlines() if line.startswith("output[")]
    assert shapes == ["(5,)", "(1,)", "(3,)"], "3 clamped into [lo, hi): wide [5,7) -> 5, narrow [1,2) -> 1"
    status, out, _ = run(capsys, f"{model}:Shapes", "--dim", "wide=6", "--dim", "seq=7")
    shapes = [line.split()[1] for line in out.splitlines() if line.startswith("output[")]
    assert status == 0 and shapes == ["(6,)", "(1,)", "(7,)"]
    assert "outside wide's range [5, 7)" in refused(capsys, f"{model}:Shapes", "--dim", "wide=7")
    err = refused(capsys, f"{model}:Shapes", "--dim", "ctx=4")
    assert "--dim names ctx, which the selection does not declare" in err and "seq in [1, 8)" in err
    assert "is not NAME=INTEGER" in refused(capsys, f"{model}:Shapes", "--dim", "seq")


def _raw_checkpoint(folder: Path, names: dict[str, str]) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(3)
    tensors = {names["table"]: torch.randn(6, 4, generator=gen), names["w"]: torch.randn(4, 4, generator=gen)}
    folder.mkdir()
    save_file(tensors, str(folder / "model.safetensors"))
    return tensors


def test_ckpt_through_the_alias_table(model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _raw_checkpoint(tmp_path / "raw", {"table": "model.embed.weight", "w": "model.head.weight"})
    status, out, err = run(capsys, f"{model}:NetTwin", "--ckpt", str(tmp_path / "raw"), "--expect", TOL)
    assert status == 0, err
    assert f"weights:   checkpoint {tmp_path / 'raw'}, alias table global ALIAS (3 entries)" in out
    status, out, err = run(capsys, f"{model}:NetTwin.head", "--ckpt", str(tmp_path / "raw"), "--expect", TOL)
    assert status == 0, "a child reads under its path, through the root's alias table"
    err = refused(capsys, f"{model}:NetTwin", "--ckpt", str(tmp_path / "raw"), "--no-alias", "--expect", TOL)
    assert "reading the weights of Net" in err and "table" in err


def test_ckpt_alias_from_the_twin_class_or_named_global(model: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    _raw_checkpoint(tmp_path / "other", {"table": "emb", "w": "out.kernel"})
    status, out, err = run(capsys, f"{model}:AliasedTwin", "--ckpt", str(tmp_path / "other"), "--expect", TOL)
    assert status == 0, err
    assert "alias table AliasedTwin.ALIAS (3 entries)" in out
    status, out, err = run(capsys, f"{model}:NetTwin", "--ckpt", str(tmp_path / "other"), "--alias", "OTHER",
                           "--expect", TOL)
    assert status == 0, err
    assert "alias table global OTHER" in out
    assert "defines no global 'MISSING'" in refused(capsys, f"{model}:NetTwin", "--ckpt", str(tmp_path / "other"),
                                                     "--alias", "MISSING", "--expect", TOL)
    assert "NOT_A_TABLE is a int" in refused(capsys, f"{model}:NetTwin", "--ckpt", str(tmp_path / "other"),
                                             "--alias", "NOT_A_TABLE", "--expect", TOL)
    assert "apply to --ckpt weights" in refused(capsys, f"{model}:NetTwin", "--no-alias", "--expect", TOL)


def test_ckpt_prepared_folder_with_no_alias(model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("net_for_prepare", model)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    raw = _raw_checkpoint(tmp_path / "raw", {"table": "model.embed.weight", "w": "model.head.weight"})
    from tilefoundry.runtime.resource import DictResource

    mod.Net.prepare(DictResource(raw, alias=mod.ALIAS), str(tmp_path / "prepared"))
    status, out, err = run(capsys, f"{model}:NetTwin", "--ckpt", str(tmp_path / "prepared"), "--no-alias",
                           "--expect", TOL)
    assert status == 0, err
    assert "no alias table (--no-alias)" in out
    err = refused(capsys, f"{model}:NetTwin", "--ckpt", str(tmp_path / "nowhere"), "--expect", TOL)
    assert str(tmp_path / "nowhere") in err


def test_inputs_from_safetensors_and_pt(model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ids = torch.tensor([0, 5, 2, 2, 1])
    save_file({"ids": ids}, str(tmp_path / "in.safetensors"))
    status, out, err = run(capsys, f"{model}:NetTwin", "--inputs", str(tmp_path / "in.safetensors"), "--expect", TOL)
    assert status == 0, err
    assert "(5, 4)" in out and f"inputs:    {tmp_path / 'in.safetensors'}" in out
    torch.save((ids[:2],), tmp_path / "in.pt")
    status, out, _ = run(capsys, f"{model}:NetTwin", "--inputs", str(tmp_path / "in.pt"), "--expect", TOL)
    assert status == 0 and "(2, 4)" in out
    hidden = torch.randn(3, 4)
    torch.save({"hidden": hidden}, tmp_path / "hidden.pt")
    status, out, _ = run(capsys, f"{model}:NetTwin.untyped", "--inputs", str(tmp_path / "hidden.pt"), "--expect", TOL)
    assert status == 0
    save_file({"both.0": hidden, "both.1": torch.ones(3, 4)}, str(tmp_path / "pair.safetensors"))
    status, out, _ = run(capsys, f"{model}:NetTwin.pair", "--inputs", str(tmp_path / "pair.safetensors"),
                         "--expect", TOL)
    assert status == 0, "a tuple argument is stored as name.0, name.1"
    save_file({"ids": ids, "extra": ids.clone()}, str(tmp_path / "extra.safetensors"))
    err = refused(capsys, f"{model}:NetTwin", "--inputs", str(tmp_path / "extra.safetensors"), "--expect", TOL)
    assert "holds extra, which no parameter takes" in err
    save_file({"other": ids}, str(tmp_path / "wrong.safetensors"))
    err = refused(capsys, f"{model}:NetTwin", "--inputs", str(tmp_path / "wrong.safetensors"), "--expect", TOL)
    assert "holds nothing for 'ids'" in err
    torch.save((ids, ids), tmp_path / "two.pt")
    assert "holds 2 argument(s); the selection takes 1 (ids)" in refused(
        capsys, f"{model}:NetTwin", "--inputs", str(tmp_path / "two.pt"), "--expect", TOL)


def test_an_untyped_parameter_needs_inputs(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(capsys, f"{model}:NetTwin.untyped", "--expect", TOL)
    assert "cannot tell the type of hidden" in err and "--inputs FILE" in err and "annotate" in err


def test_refusals_of_the_selection(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "no such file" in refused(capsys, "missing.py:Net")
    assert "is not FILE.py:Name" in refused(capsys, str(model))
    err = refused(capsys, f"{model}:Nope")
    assert "defines no 'Nope'; selectable there:" in err and "NetTwin" in err
    err = refused(capsys, f"{model}:NetTwin.nope")
    assert "NetTwin has no child, function or method 'nope'; it has functions embed, pick; children head" in err
    err = refused(capsys, f"{model}:Hand", "--expect", TOL)
    assert "Hand (Hand) stands for no authored Module (its module is None)" in err
    assert "is a dict; select a @runtime_module class" in refused(capsys, f"{model}:ALIAS")


def test_a_model_file_that_raises_at_import_fails(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = model.parent / "broken.py"
    bad.write_text("raise ImportError('cannot import this')\n")
    status, out, err = run(capsys, f"{bad}:X")
    assert status == 1 and err == ""
    row = next(line for line in out.splitlines() if line.startswith(f"import {bad}"))
    assert row.split()[-3:] == ["raised", "ImportError", "FAIL"]
    assert "the model file raised ImportError: cannot import this" in out
    assert out.rstrip().splitlines()[-1] == f"FAIL: 1 checked callable raised (import {bad})"


def test_refusals_of_the_predicates(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(capsys, f"{model}:NetTwin")
    assert "state the predicates: --expect PATH=PRED" in err
    err = refused(capsys, f"{model}:NetTwin", "--expect", "output[0]=rel_l2:max=1e-6")
    assert "its output output[1] has no predicate; add --expect 'output[1]=PRED'" in err
    err = refused(capsys, f"{model}:NetTwin", "--expect", TOL, "--expect", "output[7]=equal")
    assert "--expect names output[7], which no checked callable produced" in err
    err = refused(capsys, f"{model}:NetTwin", "--expect", "output[0]=equal", "--expect", "output[1]=rel_l2:max=1")
    assert "output[1]" in err and "equal" in err
    err = refused(capsys, f"{model}:OffByOne", "--expect", "output[3]=equal")  # one output, named output
    assert "its one output, 'output', has no predicate" in err and "--expect named output[3], which" in err
    err = refused(capsys, f"{model.parent}:OffByOne", "--expect", TOL)  # a folder where a file goes
    assert f"{model.parent} is a folder; the target is a Python file and a name in it, FILE.py:Name" in err
    assert "unknown predicate 'close'" in refused(capsys, f"{model}:NetTwin", "--expect", "*=close")
    assert "is not PATH=PRED" in refused(capsys, f"{model}:NetTwin", "--expect", "rel_l2")


def test_a_kernel_that_raises_is_a_failure_naming_the_side(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(capsys, f"{model}:RaisingTwin", "--expect", TOL)
    assert status == 1 and err == ""
    assert "note: the twin raised RuntimeError: boom in the kernel" in out
    assert out.rstrip().splitlines()[-1] == "FAIL: 1 checked callable raised (forward)"


def test_a_hand_written_node_on_the_way_is_refused(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(capsys, f"{model}:PartlyHand.head", "--expect", TOL)
    assert "twin node head (HandProj) stands for no authored Module (its module is None)" in err
    err = refused(capsys, f"{model}:PartlyHand", "--per-node", "--expect", TOL)
    assert "--per-node: twin node head (HandProj) stands for no authored Module" in err
    status, out, _ = run(capsys, f"{model}:PartlyHand.embed", "--expect", TOL)
    assert status == 0, "a generated node above it is still judged"


def test_per_node_on_a_function_checks_that_function_alone(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, f"{model}:NetTwin.pick", "--per-node", "--expect", TOL)
    assert status == 0
    assert [line.split()[0] for line in out.splitlines() if ":output" in line] == ["pick:output"]

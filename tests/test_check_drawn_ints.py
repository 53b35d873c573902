"""Integer inputs ``tilefoundry check`` draws are valid for what they feed, as the IR says (issue 26, item 4).

Positions lie within the rotary table and the cache and make one causal step (every query row sees a key, so the
reference holds no NaN row); token ids lie within the vocabulary; an integer the IR gives no such use stays in
``--int-range``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tilefoundry.cli.check_data import int_plan, random_inputs, step_params, tree_dimvars
from tilefoundry.cli.check_ints import int_uses
from tilefoundry.cli.main import main
from tilefoundry.models import build_causal_lm, read_config

from .hf_models import make_checkpoint
from .refusals import run_check as run

TOL = "*=rel_l2:max=1e-5"

WRAPPER = '''\
from tilefoundry.models import build_causal_lm, read_config
from tilefoundry.models.twins import build_twin

config = read_config({folder!r})
Twin = build_twin(build_causal_lm(config), config)
'''

SOURCE = '''\
from tilefoundry import func, module
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, tf
from tilefoundry.runtime import runtime_func, runtime_module

seq = DimVar("seq", 1, 8)


@module
class Net:
    @func
    def gather(ids: Tensor[(seq,), "i64"], table: ConstTensor[(40, 4), "f32"]):
        return tf.index_select(table, ids, 0)

    @func
    def outer(ids: Tensor[(seq,), "i64"], table: ConstTensor[(40, 4), "f32"]):
        return gather(tf.reshape(ids, (seq,)), table)

    @func
    def shift(n: Tensor[(seq,), "i64"]):
        return n + n


@runtime_module(Net)
class NetTwin:
    @runtime_func
    def gather(self, ids, table):
        return table[ids]

    @runtime_func
    def outer(self, ids, table):
        return table[ids]

    @runtime_func
    def shift(self, n):
        return n * 2
'''


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny llama checkpoint prepared by ``tilefoundry prepare`` (clean keys, read as they are)."""
    base = tmp_path_factory.mktemp("drawn")
    make_checkpoint("llama", base / "hf", sharded=False)
    assert main(["prepare", "--ckpt", str(base / "hf"), "--out", str(base / "prep")]) == 0
    return base / "prep"


@pytest.fixture(scope="module")
def wrapper(prepared: Path) -> Path:
    path = prepared.parent / "wrapper.py"
    path.write_text(WRAPPER.format(folder=str(prepared)))
    return path


@pytest.mark.parametrize("seed", ["0", "4", "7"])
def test_a_decoder_layer_of_a_shipped_family_passes_on_drawn_inputs(wrapper: Path, prepared: Path, seed: str,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's command: before, seed 4 drew positions that left a query row no key (a NaN row) and FAILed."""
    status, out, err = run(capsys, f"{wrapper}:Twin.layer0", "--ckpt", str(prepared), "--seed", seed, "--expect", TOL)
    assert status == 0, out + err
    assert "nan" not in out.lower()
    assert "pos_ids: the 3 new position(s) of 3 held (rope in attend)" in out
    assert "kv_pos: the 3 position(s) held (causal mask in attend)" in out
    assert "cur_pos: cache write at 0" in out and "n_new: cache write of 3" in out


def test_a_decode_shaped_step_passes_too(wrapper: Path, prepared: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One new token after four held: the twin takes its no-mask path, which is right only for causal positions."""
    status, out, err = run(capsys, f"{wrapper}:Twin.layer2", "--ckpt", str(prepared), "--dim", "seq=1",
                           "--dim", "ctx=5", "--dim", "capacity=6", "--expect", TOL)
    assert status == 0, out + err
    assert "pos_ids: the 1 new position(s) of 5 held" in out and "cur_pos: cache write at 4" in out


def test_the_drawn_values_of_one_causal_step(prepared: Path) -> None:
    config = read_config(prepared)
    layer = build_causal_lm(config).modules[0]
    params = step_params(layer, None, None)
    dims = {"seq": 2, "ctx": 5, "capacity": 7}
    assert set(tree_dimvars(layer)) == set(dims)
    values = dict(zip([p.name for p in params], random_inputs("layer0.forward", params, dims, 3, (0, 2), "cpu")))
    assert values["pos_ids"].tolist() == [3, 4], "the last 2 of the 5 held"
    assert values["kv_pos"].tolist() == [0, 1, 2, 3, 4]
    assert int(values["cur_pos"]) == 3 and int(values["n_new"]) == 2, "written after the held ones"
    assert int(values["cur_pos"]) + int(values["n_new"]) <= dims["capacity"]
    assert values["pos_ids"].dtype == torch.int64 and values["cur_pos"].shape == ()
    # Clamped into what the consumers take: a cache shorter than the positions held still takes the write.
    values = dict(zip([p.name for p in params], random_inputs("l", params, {"seq": 3, "ctx": 6, "capacity": 4}, 3,
                                                              (0, 2), "cpu")))
    assert int(values["cur_pos"]) + int(values["n_new"]) <= 4


def test_what_the_ir_says_each_integer_feeds(prepared: Path) -> None:
    config = read_config(prepared)
    model = build_causal_lm(config)
    uses = int_uses(model.modules[0].functions["attend"])
    kinds = {name: [u.kind for u in found] for name, found in uses.items()}
    assert kinds == {"pos_ids": ["position"], "kv_pos": ["held"], "cur_pos": ["cache_at"], "n_new": ["cache_count"]}
    assert uses["pos_ids"][0].extent == config.max_position_embeddings, "the rotary table's rows"
    embed = int_uses(model.functions["embed"])
    assert [(u.kind, u.extent) for u in embed["input_ids"]] == [("index", config.vocab_size)]
    # The root's forward takes input_ids by the name embed gives it: token ids within the vocabulary.
    params = step_params(model, None, None)
    plan = int_plan([p for p in params if p.name != "caches"], {"seq": 64, "ctx": 64, "capacity": 64})
    ids = plan.draw("input_ids", torch.Generator().manual_seed(0))
    assert ids.shape == (64,) and 0 <= int(ids.min()) and int(ids.max()) < config.vocab_size
    assert int(ids.max()) >= 2, "not the --int-range default 0:2"


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ints") / "net.py"
    path.write_text(SOURCE)
    return path


def test_an_index_is_drawn_within_its_axis_through_views_and_calls(net: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("ints_net", net)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    outer = mod.Net.functions["outer"]
    assert [(u.kind, u.extent) for u in int_uses(outer)["ids"]] == [("index", 40)], "through reshape and a call"
    assert int_uses(mod.Net.functions["shift"]) == {}, "arithmetic alone says nothing"
    params = step_params(mod.Net, "outer", "function")
    (ids,) = random_inputs("outer", params, {"seq": 7}, 0, (0, 2), "cpu")
    assert int(ids.max()) < 40 and int(ids.max()) >= 2
    (n,) = random_inputs("shift", step_params(mod.Net, "shift", "function"), {"seq": 7}, 0, (5, 9), "cpu")
    assert 5 <= int(n.min()) and int(n.max()) < 9, "an integer the IR gives no use stays in --int-range"
    status, out, err = run(capsys, f"{net}:NetTwin.outer", "--expect", "output=equal")
    assert status == 0, out + err
    assert "ids: index in [0, 40) (index_select in gather)" in out

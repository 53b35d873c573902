"""Module.prepare / Module.load / LoadedModule (spec 1.1.2) on authored modules and real files."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from tilefoundry import func, module
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, tf
from tilefoundry.ir.core.loaded import LoadedModule
from tilefoundry.ir.core.weights import WeightMismatchError
from tilefoundry.runtime.prepare import PrepareError
from tilefoundry.runtime.resource import DictResource, SafetensorsResource
from tilefoundry.runtime.resource.prepared import INDEX_NAME

n = DimVar("n", 1, 64)
E = 3  # experts


@module(entry="proj")
class Proj:
    @func
    def proj(x: Tensor[(n, 4), "f32"], w: ConstTensor[(4, 6), "f32"], b: ConstTensor[(6,), "f32"]):
        return tf.matmul(x, w) + b

    @proj.converter("w")
    def _w(weight: Tensor[(6, 4), "bf16"]):
        return tf.cast(tf.transpose(weight, (1, 0)), "f32")


@module(entry="mix")
class Experts:
    @func
    def mix(x: Tensor[(n, 4), "f32"], w_experts: ConstTensor[(E, 4, 4), "f32"]):
        return tf.reduce(tf.matmul(x, w_experts), axes=(0,), keepdim=False, kind="sum")


@module
class Net:
    head = Proj
    moe = Experts

    @func
    def embed(ids: Tensor[(n,), "i64"], table: ConstTensor[(10, 4), "f32"]):
        return tf.index_select(table, ids, 0)

    def forward(self, ids):
        h = self.embed(ids)
        return self.head(self.moe(h) + h)


def _raw(gen: torch.Generator) -> dict[str, torch.Tensor]:
    raw = {
        "model.embed_tokens.weight": torch.randn(10, 4, generator=gen),
        "model.out.weight": torch.randn(6, 4, generator=gen).to(torch.bfloat16),
        "model.out.bias": torch.randn(6, generator=gen),
    }
    for e in range(E):
        raw[f"model.experts.{e}.w"] = torch.randn(4, 4, generator=gen)
    return raw


ALIAS = {
    "table": "model.embed_tokens.weight",
    "head": "model.out",
    "b": "bias",
    "moe": "model",
    "w_experts": tuple(f"experts.{e}.w" for e in range(E)),
}


def _expected(raw: dict[str, torch.Tensor], ids: torch.Tensor) -> torch.Tensor:
    h = raw["model.embed_tokens.weight"][ids]
    stacked = torch.stack([raw[f"model.experts.{e}.w"] for e in range(E)])
    h = (h @ stacked).sum(0) + h
    return h @ raw["model.out.weight"].t().float().contiguous() + raw["model.out.bias"]


def _tree_digest(path: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(path.iterdir())}


def test_prepare_writes_clean_keys_and_loads_back_bit_exact(tmp_path: Path) -> None:
    gen = torch.Generator().manual_seed(0)
    raw = _raw(gen)
    out = tmp_path / "prepared"
    Net.prepare(DictResource(raw, alias=ALIAS), str(out))
    index = json.loads((out / INDEX_NAME).read_text())
    assert sorted(index["weight_map"]) == ["head.b", "head.w", "moe.w_experts", "table"]
    shards = set(index["weight_map"].values())
    assert len(shards) == 1 and (out / shards.pop()).is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prepared"], "no temporary folder is left behind"

    stored = load_file(str(out / "model-00001-of-00001.safetensors"))
    assert stored["head.w"].dtype == torch.float32
    assert torch.equal(stored["head.w"], raw["model.out.weight"].t().float())
    assert torch.equal(stored["moe.w_experts"], torch.stack([raw[f"model.experts.{e}.w"] for e in range(E)]))

    loaded = Net.load(SafetensorsResource(str(out), device="cpu"))
    ids = torch.tensor([1, 7, 3])
    assert torch.equal(loaded(ids), _expected(raw, ids))
    for key, tensor in stored.items():
        owner, _, name = key.rpartition(".")
        reading = loaded._child_reading(owner) if owner else loaded
        assert torch.equal(reading.constants[name], tensor) and reading.constants[name].dtype == tensor.dtype
    again = tmp_path / "again"
    Net.prepare(DictResource(raw, alias=ALIAS), str(again))
    assert _tree_digest(again) == _tree_digest(out), "prepare is deterministic, byte for byte"


def test_load_never_mutates_module_and_each_reading_is_independent() -> None:
    gen = torch.Generator().manual_seed(1)
    raw_a, raw_b = _raw(gen), _raw(gen)
    before = dict(Net.__dict__)
    a = Net.load(_prepared_dict(raw_a))
    b = Net.load(_prepared_dict(raw_b))
    assert dict(Net.__dict__).keys() == before.keys() and all(Net.__dict__[k] is v for k, v in before.items())
    ids = torch.tensor([0, 9])
    assert torch.equal(a(ids), _expected(raw_a, ids))
    assert torch.equal(b(ids), _expected(raw_b, ids))
    assert isinstance(a.head, LoadedModule) and a.head is not b.head
    assert a.module is Net and a.head.module.name == "head"


def _prepared_dict(raw: dict[str, torch.Tensor]) -> DictResource:
    return DictResource({
        "table": raw["model.embed_tokens.weight"],
        "head.w": raw["model.out.weight"].t().float().contiguous(),
        "head.b": raw["model.out.bias"],
        "moe.w_experts": torch.stack([raw[f"model.experts.{e}.w"] for e in range(E)]),
    })


def test_child_reached_from_two_owners_gets_one_reading_per_owner() -> None:
    @module
    class Two:
        left = Proj
        right = Proj

        def forward(self, x):
            return self.left(x), self.right(x)

    w1, w2 = torch.randn(4, 6), torch.randn(4, 6)
    bias = torch.zeros(6)
    loaded = Two.load(DictResource({"left.w": w1, "left.b": bias, "right.w": w2, "right.b": bias}))
    x = torch.randn(2, 4)
    left, right = loaded(x)
    assert torch.equal(left, x @ w1) and torch.equal(right, x @ w2)


def test_runner_argument_lists_are_not_interchangeable() -> None:
    loaded = Proj.load(DictResource({"w": torch.randn(4, 6), "b": torch.randn(6)}))
    x = torch.randn(2, 4)
    with pytest.raises(TypeError, match=r"takes activations alone \(x\).*unread Module's runner proj"):
        loaded.proj(x, torch.randn(4, 6), torch.randn(6))
    with pytest.raises(TypeError, match=r"activations alone.*mod.load\(resource\).proj"):
        Proj.proj(x)
    assert torch.equal(loaded.proj(x), x @ loaded.constants["w"] + loaded.constants["b"])


def test_placement_is_agreed_before_evaluating() -> None:
    meta = torch.device("meta")
    loaded = Proj.load(DictResource({"w": torch.randn(4, 6), "b": torch.randn(6, device=meta)}))
    with pytest.raises(ValueError, match=r"constant Proj.w on cpu, constant Proj.b on meta.*nothing was moved"):
        loaded.proj(torch.randn(2, 4))
    ok = Proj.load(DictResource({"w": torch.randn(4, 6), "b": torch.randn(6)}))
    with pytest.raises(ValueError, match=r"activation x on meta, constant Proj.w on cpu"):
        ok.proj(torch.randn(2, 4, device=meta))


def test_function_without_activations_runs_where_its_constants_are() -> None:
    @module
    class Const:
        @func
        def table(t: ConstTensor[(3,), "f32"]):
            return t * 2.0

    loaded = Const.load(DictResource({"t": torch.tensor([1.0, 2.0, 3.0])}))
    assert torch.equal(loaded.table(), torch.tensor([2.0, 4.0, 6.0]))


def test_load_rejects_wrong_shape_dtype_and_missing_weight() -> None:
    with pytest.raises(WeightMismatchError, match=r"weight w: the checkpoint holds torch.bfloat16.*converter"):
        Proj.load(DictResource({"w": torch.randn(4, 6).bfloat16(), "b": torch.randn(6)}))
    with pytest.raises(WeightMismatchError, match=r"weight head.b: .*\(7,\).*declared Tensor\[\(6,\), f32\]"):
        Net.load(DictResource({"table": torch.randn(10, 4), "head.w": torch.randn(4, 6), "head.b": torch.randn(7),
                               "moe.w_experts": torch.randn(E, 4, 4)}))
    with pytest.raises(KeyError, match="head.b"):
        Net.load(DictResource({"table": torch.randn(10, 4), "head.w": torch.randn(4, 6),
                               "moe.w_experts": torch.randn(E, 4, 4)}))


def test_failed_prepare_writes_nothing_and_keeps_existing_output(tmp_path: Path) -> None:
    gen = torch.Generator().manual_seed(2)
    raw = _raw(gen)
    out = tmp_path / "prepared"
    Net.prepare(DictResource(raw, alias=ALIAS), str(out))
    digest = _tree_digest(out)
    broken = dict(raw)
    broken["model.out.bias"] = torch.randn(5)
    with pytest.raises(WeightMismatchError, match=r"head.b"):
        Net.prepare(DictResource(broken, alias=ALIAS), str(out))
    assert _tree_digest(out) == digest
    missing = {k: v for k, v in raw.items() if k != "model.experts.1.w"}
    with pytest.raises(KeyError, match="experts.1.w"):
        Net.prepare(DictResource(missing, alias=ALIAS), str(tmp_path / "fresh"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prepared"]


def test_prepare_replaces_only_its_own_earlier_output(tmp_path: Path) -> None:
    gen = torch.Generator().manual_seed(3)
    raw = _raw(gen)
    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "README.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not a prepared checkpoint directory"):
        Net.prepare(DictResource(raw, alias=ALIAS), str(foreign))
    assert (foreign / "README.txt").read_text() == "mine"
    out = tmp_path / "prepared"
    Net.prepare(DictResource(raw, alias=ALIAS), str(out))
    raw2 = _raw(gen)
    Net.prepare(DictResource(raw2, alias=ALIAS), str(out))
    assert torch.equal(load_file(str(out / "model-00001-of-00001.safetensors"))["table"],
                       raw2["model.embed_tokens.weight"])


def test_prepare_refuses_unknown_device_and_converter_failures(tmp_path: Path) -> None:
    raw = _raw(torch.Generator().manual_seed(4))
    with pytest.raises(ValueError, match="does not know the device 'gpu0'"):
        Net.prepare(DictResource(raw, alias=ALIAS), str(tmp_path / "x"), device="gpu0")
    bad = dict(raw)
    bad["model.out.weight"] = bad["model.out.weight"].float()  # the converter declares bf16 input
    with pytest.raises(PrepareError, match=r"head.w: converter @proj.converter\('w'\)"):
        Net.prepare(DictResource(bad, alias=ALIAS), str(tmp_path / "y"))
    assert list(tmp_path.iterdir()) == []


def test_prepare_from_sharded_safetensors_checkpoint(tmp_path: Path) -> None:
    raw = _raw(torch.Generator().manual_seed(5))
    ckpt = tmp_path / "raw"
    ckpt.mkdir()
    keys = sorted(raw)
    halves = {"a.safetensors": keys[: len(keys) // 2], "b.safetensors": keys[len(keys) // 2:]}
    for shard, names in halves.items():
        save_file({k: raw[k] for k in names}, str(ckpt / shard))
    (ckpt / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {k: s for s, names in halves.items() for k in names}}))
    before = _tree_digest(ckpt)
    out = tmp_path / "prepared"
    Net.prepare(SafetensorsResource(str(ckpt), device="cpu", alias=ALIAS), str(out))
    assert _tree_digest(ckpt) == before, "the raw checkpoint folder is never written"
    loaded = Net.load(SafetensorsResource(str(out), device="cpu"))
    ids = torch.tensor([4, 4, 2])
    assert torch.equal(loaded(ids), _expected(raw, ids))


def test_two_constants_of_one_reading_on_two_devices_are_refused_even_if_unread() -> None:
    @module
    class TwoWeights:
        @func
        def f(x: Tensor[(4,), "f32"], w: ConstTensor[(4,), "f32"]):
            return x * w

        @func
        def g(x: Tensor[(4,), "f32"], v: ConstTensor[(4,), "f32"]):
            return x * v

    loaded = TwoWeights.load(DictResource({"w": torch.ones(4), "v": torch.ones(4, device="meta")}))
    with pytest.raises(ValueError, match=r"constant TwoWeights.w on cpu, constant TwoWeights.v on meta"):
        loaded.f(torch.ones(4))


def test_function_without_activations_runs_on_its_constants_device() -> None:
    @module
    class OnMeta:
        @func
        def table(t: ConstTensor[(3,), "f32"]):
            return t * 2.0

    out = OnMeta.load(DictResource({"t": torch.ones(3, device="meta")})).table()
    assert out.device.type == "meta" and out.shape == (3,)


def test_loaded_forward_with_neither_method_nor_entry_is_refused() -> None:
    @module
    class NoStep:
        @func
        def a(x: Tensor[(4,), "f32"], w: ConstTensor[(4,), "f32"]):
            return x * w

    loaded = NoStep.load(DictResource({"w": torch.ones(4)}))
    with pytest.raises(TypeError, match=r"neither a forward method nor an entry function.*functions a"):
        loaded(torch.ones(4))


def test_two_converters_for_one_shared_weight_are_refused() -> None:
    from tilefoundry.ir.core.errors import ModuleDefinitionError

    with pytest.raises(ModuleDefinitionError, match=r"weight 'w' has two converters \(a.converter.*b.converter"):

        @module
        class Shared:
            @func
            def a(x: Tensor[(4,), "f32"], w: ConstTensor[(4,), "f32"]):
                return x * w

            @a.converter("w")
            def _w1(raw1: Tensor[(4,), "f32"]):
                return raw1

            @func
            def b(x: Tensor[(4,), "f32"], w: ConstTensor[(4,), "f32"]):
                return x + w

            @b.converter("w")
            def _w2(raw2: Tensor[(4,), "f32"]):
                return raw2 * 2.0

"""SafetensorsResource: directory shapes, shared lazily opened handles, device placement, element types."""

from __future__ import annotations

import json
import os
import pickle
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import save_file

import tilefoundry.runtime.resource.shard_file as shard_file
from tilefoundry.runtime.resource import (
    INDEX_NAME,
    SINGLE_NAME,
    CheckpointError,
    SafetensorsResource,
    WeightNotFoundError,
)

TENSORS: dict[str, torch.Tensor] = {
    "model.embed.weight": torch.randn(16, 8, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16),
    "model.layers.0.w": torch.randn(8, 8, generator=torch.Generator().manual_seed(1)).to(torch.float16),
    "model.layers.0.b": torch.randn(8, generator=torch.Generator().manual_seed(2)),
    "model.layers.1.w": torch.randn(8, 8, generator=torch.Generator().manual_seed(3)).to(torch.float16),
    "model.layers.1.b": torch.randn(8, generator=torch.Generator().manual_seed(4)),
    "model.layers.1.fp8": torch.linspace(-2, 2, 8).to(torch.float8_e4m3fn),
    "model.ids": torch.arange(5, dtype=torch.int64),
    "model.mask": torch.tensor([True, False, True]),
    "model.f64": torch.tensor([1.0, 2.0], dtype=torch.float64),
    "model.i8": torch.tensor([-3, 4], dtype=torch.int8),
}


def write_sharded(directory: Path, tensors: Mapping[str, torch.Tensor], n_shards: int) -> dict[str, str]:
    """Write ``tensors`` as ``n_shards`` shards plus an index; return the weight map."""
    directory.mkdir(parents=True, exist_ok=True)
    keys = sorted(tensors)
    weight_map: dict[str, str] = {}
    for i in range(n_shards):
        name = f"model-{i + 1:05d}-of-{n_shards:05d}.safetensors"
        part = {k: tensors[k] for k in keys[i::n_shards]}
        save_file(part, str(directory / name))
        weight_map.update(dict.fromkeys(part, name))
    (directory / INDEX_NAME).write_text(json.dumps({"metadata": {}, "weight_map": weight_map}, indent=1))
    return weight_map


def write_single(directory: Path, tensors: Mapping[str, torch.Tensor]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    save_file(dict(tensors), str(directory / SINGLE_NAME))


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.view(torch.uint8), b.view(torch.uint8))


# ---------------------------------------------------------------- directory shapes


def test_sharded_and_unsharded_shapes_read_the_same_tensors_bit_exactly(tmp_path: Path) -> None:
    write_sharded(tmp_path / "sharded", TENSORS, n_shards=3)
    write_single(tmp_path / "single", TENSORS)
    sharded = SafetensorsResource(str(tmp_path / "sharded"), device="cpu")
    single = SafetensorsResource(str(tmp_path / "single"), device="cpu")
    assert sharded.layout.index_path is not None and single.layout.index_path is None
    for key, value in TENSORS.items():
        a, b = sharded.load(key), single.load(key)
        assert a.dtype == value.dtype and b.dtype == value.dtype, key
        assert same(a, value) and same(b, value), key


def test_single_shard_with_an_index_is_accepted(tmp_path: Path) -> None:
    write_sharded(tmp_path, TENSORS, n_shards=1)
    res = SafetensorsResource(str(tmp_path), prefix="model.layers.1", device="cpu")
    assert same(res.load("w"), TENSORS["model.layers.1.w"])


def test_index_wins_when_both_shapes_are_present(tmp_path: Path) -> None:
    write_sharded(tmp_path, {"x": torch.ones(2)}, n_shards=1)
    save_file({"x": torch.zeros(2)}, str(tmp_path / SINGLE_NAME))
    assert torch.equal(SafetensorsResource(str(tmp_path), device="cpu").load("x"), torch.ones(2))


def test_shards_in_a_subfolder_of_the_checkpoint_are_accepted(tmp_path: Path) -> None:
    (tmp_path / "parts").mkdir()
    save_file({"x": torch.ones(2)}, str(tmp_path / "parts" / "a.safetensors"))
    (tmp_path / INDEX_NAME).write_text(json.dumps({"weight_map": {"x": "parts/a.safetensors"}}))
    assert torch.equal(SafetensorsResource(str(tmp_path), device="cpu").load("x"), torch.ones(2))


def test_a_symlink_inside_the_folder_is_accepted(tmp_path: Path) -> None:
    save_file({"x": torch.ones(2)}, str(tmp_path / "real.safetensors"))
    (tmp_path / "link.safetensors").symlink_to(tmp_path / "real.safetensors")
    (tmp_path / INDEX_NAME).write_text(json.dumps({"weight_map": {"x": "link.safetensors"}}))
    assert torch.equal(SafetensorsResource(str(tmp_path), device="cpu").load("x"), torch.ones(2))


def test_ckpt_dir_may_be_a_path_object(tmp_path: Path) -> None:
    write_single(tmp_path, {"x": torch.ones(1)})
    res = SafetensorsResource(tmp_path, device="cpu")  # type: ignore[arg-type]
    assert res.ckpt_dir == tmp_path.resolve()


# ---------------------------------------------------------------- handles: lazy, one per shard, shared


class _CountingOpen:
    """Stands in for safe_open in shard_file: counts opens per path and get_tensor calls per key."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.opens: Counter[str] = Counter()
        self.reads: list[str] = []

    def __call__(self, path: str, *args: Any, **kwargs: Any) -> Any:
        self.opens[Path(os.path.realpath(path)).name] += 1  # the shard a /proc/self/fd/N name reads through
        handle = self.real(path, *args, **kwargs)
        reads = self.reads

        class Recording:
            def keys(self) -> list[str]:
                return handle.keys()

            def get_tensor(self, key: str) -> torch.Tensor:
                reads.append(key)
                return handle.get_tensor(key)

        return Recording()


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> _CountingOpen:
    spy = _CountingOpen(shard_file.safe_open)
    monkeypatch.setattr(shard_file, "safe_open", spy)
    return spy


def test_construction_opens_no_shard(tmp_path: Path, counting: _CountingOpen) -> None:
    write_sharded(tmp_path, TENSORS, n_shards=3)
    res = SafetensorsResource(str(tmp_path), device="cpu")
    assert counting.opens == Counter() and res.opened_shards == ()


def test_a_read_opens_only_the_shard_holding_the_key(tmp_path: Path, counting: _CountingOpen) -> None:
    weight_map = write_sharded(tmp_path, TENSORS, n_shards=3)
    res = SafetensorsResource(str(tmp_path), device="cpu")
    res.load("model.layers.0.w")
    assert counting.opens == Counter({weight_map["model.layers.0.w"]: 1})
    assert counting.reads == ["model.layers.0.w"]


def test_at_most_one_handle_per_shard_shared_across_subtree_views(
    tmp_path: Path, counting: _CountingOpen
) -> None:
    weight_map = write_sharded(tmp_path, TENSORS, n_shards=3)
    alias = {"layer0": "layers.0", "layer1": "layers.1"}
    root = SafetensorsResource(str(tmp_path), device="cpu", alias=alias)
    model = root.subtree("model")
    views = [model.subtree("layer0"), model.subtree("layer1"), model.subtree("layer0"), model]
    for _ in range(3):
        for view in views[:3]:
            view.load("w")
            view.load("b")
        for key in ("embed.weight", "ids", "mask", "f64", "i8", "layers.1.fp8"):
            model.load(key)
        for key in TENSORS:
            root.load(key)
    assert set(counting.opens) == set(weight_map.values())
    assert all(count == 1 for count in counting.opens.values()), counting.opens
    assert sorted(root.opened_shards) == sorted(set(weight_map.values()))
    assert sorted(views[0].opened_shards) == sorted(root.opened_shards)


def test_separate_resources_do_not_share_handles(tmp_path: Path, counting: _CountingOpen) -> None:
    write_single(tmp_path, TENSORS)
    SafetensorsResource(str(tmp_path), device="cpu").load("model.ids")
    SafetensorsResource(str(tmp_path), device="cpu").load("model.ids")
    assert counting.opens == Counter({SINGLE_NAME: 2})


def test_close_keeps_read_tensors_valid_and_reopens_lazily(tmp_path: Path, counting: _CountingOpen) -> None:
    write_single(tmp_path, TENSORS)
    res = SafetensorsResource(str(tmp_path), device="cpu")
    before = res.load("model.embed.weight")
    res.subtree("model").close()
    assert res.opened_shards == ()
    assert same(before, TENSORS["model.embed.weight"])
    assert same(res.load("model.embed.weight"), TENSORS["model.embed.weight"])
    assert counting.opens == Counter({SINGLE_NAME: 2})


def _link_symlink(folder: Path, target: str, name: str) -> None:
    (folder / name).symlink_to(folder / target)


def _link_relative_symlink(folder: Path, target: str, name: str) -> None:
    (folder / name).symlink_to(target)


def _link_hardlink(folder: Path, target: str, name: str) -> None:
    (folder / name).hardlink_to(folder / target)


@pytest.mark.parametrize(
    "spellings",
    [
        ("s.safetensors", "./s.safetensors"),
        ("./s.safetensors", "s.safetensors"),
        ("s.safetensors", ".//s.safetensors", "././s.safetensors"),
        ("parts/a.safetensors", "parts/./a.safetensors", "./parts//a.safetensors"),
    ],
    ids=["plain-then-dot", "dot-then-plain", "repeated-dots-and-slashes", "subfolder"],
)
def test_one_handle_for_one_file_spelled_several_ways_in_the_index(
    tmp_path: Path, counting: _CountingOpen, spellings: tuple[str, ...]
) -> None:
    target = "parts/a.safetensors" if "parts" in spellings[0] else "s.safetensors"
    (tmp_path / target).parent.mkdir(parents=True, exist_ok=True)
    keys = [f"k{i}" for i in range(len(spellings))]
    save_file({k: torch.full((2,), float(i)) for i, k in enumerate(keys)}, str(tmp_path / target))
    (tmp_path / INDEX_NAME).write_text(json.dumps({"weight_map": dict(zip(keys, spellings, strict=True))}))
    res = SafetensorsResource(str(tmp_path), device="cpu")
    for i, key in enumerate(keys):
        assert torch.equal(res.load(key), torch.full((2,), float(i)))
    assert sum(counting.opens.values()) == 1, counting.opens
    assert res.opened_shards == (spellings[0],)  # the index's first spelling of the file
    assert len({res.layout.shards[s] for s in spellings}) == 1


@pytest.mark.parametrize("link", [_link_symlink, _link_relative_symlink, _link_hardlink])
@pytest.mark.parametrize("first", ["real", "link"])
def test_one_handle_for_a_file_and_an_in_folder_link_to_it(
    tmp_path: Path, counting: _CountingOpen, link: Any, first: str
) -> None:
    save_file({"a": torch.ones(2), "b": torch.zeros(2)}, str(tmp_path / "real.safetensors"))
    link(tmp_path, "real.safetensors", "link.safetensors")
    names = {"real": "real.safetensors", "link": "link.safetensors"}
    other = "link" if first == "real" else "real"
    (tmp_path / INDEX_NAME).write_text(json.dumps({"weight_map": {"a": names[first], "b": names[other]}}))
    res = SafetensorsResource(str(tmp_path), device="cpu")
    # Read in the opposite order to the index, so the handle is first opened through the second spelling.
    assert torch.equal(res.load("b"), torch.zeros(2))
    assert torch.equal(res.load("a"), torch.ones(2))
    assert sum(counting.opens.values()) == 1, counting.opens
    assert res.opened_shards == (names[first],)
    assert res.layout.shards[names[first]] == res.layout.shards[names[other]]


def test_distinct_files_still_get_distinct_handles(tmp_path: Path, counting: _CountingOpen) -> None:
    save_file({"a": torch.ones(2)}, str(tmp_path / "a.safetensors"))
    save_file({"b": torch.zeros(2)}, str(tmp_path / "b.safetensors"))
    (tmp_path / INDEX_NAME).write_text(
        json.dumps({"weight_map": {"a": "./a.safetensors", "b": "b.safetensors"}})
    )
    res = SafetensorsResource(str(tmp_path), device="cpu")
    res.load("a")
    res.load("b")
    assert counting.opens == Counter({"a.safetensors": 1, "b.safetensors": 1})
    assert res.opened_shards == ("./a.safetensors", "b.safetensors")


def test_a_key_missing_from_its_shard_is_reported_under_the_index_spelling(tmp_path: Path) -> None:
    save_file({"a": torch.ones(2)}, str(tmp_path / "s.safetensors"))
    (tmp_path / INDEX_NAME).write_text(
        json.dumps({"weight_map": {"a": "s.safetensors", "b": "./s.safetensors"}})
    )
    res = SafetensorsResource(str(tmp_path), device="cpu")
    res.load("a")
    with pytest.raises(CheckpointError) as info:
        res.load("b")
    assert "'./s.safetensors'" in str(info.value) and "'b'" in str(info.value)


# ---------------------------------------------------------------- element types and placement


@pytest.mark.parametrize("key", sorted(TENSORS))
def test_stored_element_type_is_kept(tmp_path: Path, key: str) -> None:
    write_sharded(tmp_path, TENSORS, n_shards=2)
    got = SafetensorsResource(str(tmp_path), device="cpu").load(key)
    assert got.dtype == TENSORS[key].dtype
    assert same(got, TENSORS[key])


def test_tensors_are_placed_on_cpu_when_asked(tmp_path: Path) -> None:
    write_single(tmp_path, TENSORS)
    res = SafetensorsResource(str(tmp_path), device="cpu")
    assert res.device == torch.device("cpu")
    assert res.load("model.ids").device.type == "cpu"


def test_writing_to_a_read_tensor_does_not_touch_the_file(tmp_path: Path) -> None:
    write_single(tmp_path, TENSORS)
    before = (tmp_path / SINGLE_NAME).read_bytes()
    res = SafetensorsResource(str(tmp_path), device="cpu")
    res.load("model.layers.0.b").fill_(123.0)
    res.close()
    assert (tmp_path / SINGLE_NAME).read_bytes() == before


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_tensors_are_placed_on_the_cuda_device_with_stored_types(tmp_path: Path) -> None:
    write_sharded(tmp_path, TENSORS, n_shards=3)
    res = SafetensorsResource(str(tmp_path), device="cuda:0", alias={"g": ("layers.0.w", "layers.1.w")})
    assert res.device == torch.device("cuda:0")
    for key, value in TENSORS.items():
        got = res.load(key)
        assert got.device == torch.device("cuda:0")
        assert same(got.cpu(), value), key
    group = res.subtree("model").load_group("g")
    assert group is not None and all(t.device == torch.device("cuda:0") for t in group)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_default_device_is_cuda(tmp_path: Path) -> None:
    write_single(tmp_path, {"x": torch.ones(2)})
    assert SafetensorsResource(str(tmp_path)).load("x").device.type == "cuda"


@pytest.mark.parametrize("device", ["gpu", "bogus:0", "cuda:x", "CPU", ""])
def test_a_device_string_torch_does_not_know_is_refused_naming_it(tmp_path: Path, device: str) -> None:
    write_single(tmp_path, {"x": torch.ones(2)})
    with pytest.raises(ValueError) as info:
        SafetensorsResource(str(tmp_path), device=device)
    assert f"device {device!r}" in str(info.value) and "'cpu'" in str(info.value)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_cuda_without_a_gpu_is_refused_up_front(tmp_path: Path) -> None:
    write_single(tmp_path, {"x": torch.ones(2)})
    with pytest.raises(ValueError, match=r"device 'cuda'.*CUDA is not available.*device='cpu'"):
        SafetensorsResource(str(tmp_path))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_gpu_index_past_the_last_is_refused(tmp_path: Path) -> None:
    write_single(tmp_path, {"x": torch.ones(2)})
    bad = f"cuda:{torch.cuda.device_count()}"
    with pytest.raises(ValueError, match=f"device '{bad}'"):
        SafetensorsResource(str(tmp_path), device=bad)


def test_device_of_the_wrong_type_is_refused(tmp_path: Path) -> None:
    write_single(tmp_path, {"x": torch.ones(2)})
    with pytest.raises(TypeError, match="device must be a str"):
        SafetensorsResource(str(tmp_path), device=0.5)  # type: ignore[arg-type]


def test_a_torch_device_object_is_accepted(tmp_path: Path) -> None:
    write_single(tmp_path, {"x": torch.ones(2)})
    assert SafetensorsResource(str(tmp_path), device=torch.device("cpu")).load("x").device.type == "cpu"  # type: ignore[arg-type]


# ---------------------------------------------------------------- missing weights


@pytest.mark.parametrize("shape", ["sharded", "single"])
def test_missing_weight_raises_keyerror_naming_key_and_checkpoint(tmp_path: Path, shape: str) -> None:
    ckpt = tmp_path / "ckpt"
    if shape == "sharded":
        write_sharded(ckpt, TENSORS, n_shards=2)
    else:
        write_single(ckpt, TENSORS)
    res = SafetensorsResource(str(ckpt), device="cpu").subtree("model").subtree("layers").subtree("0")
    with pytest.raises(WeightNotFoundError) as info:
        res.load("bias")
    message = str(info.value)
    assert isinstance(info.value, KeyError)
    assert info.value.key == "model.layers.0.bias"
    assert "'model.layers.0.bias'" in message and str(ckpt.resolve()) in message  # symlinks resolved
    assert "close matches" in message and "'model.layers.0.b'" in message


def test_weight_not_found_error_survives_pickling(tmp_path: Path) -> None:
    write_single(tmp_path, {"x": torch.ones(1)})
    with pytest.raises(WeightNotFoundError) as info:
        SafetensorsResource(str(tmp_path), device="cpu").load("y")
    copy = pickle.loads(pickle.dumps(info.value))
    assert type(copy) is WeightNotFoundError and copy.key == "y" and str(copy) == str(info.value)

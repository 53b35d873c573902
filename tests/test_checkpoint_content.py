"""What a checkpoint holds: tied embeddings written once, tensors nothing reads, NaN/Inf weights, hub snapshots.

Each case asserts what is on disk afterwards (the prepared folder's keys and bytes, the raw folder unchanged,
no output where a refusal happened), not only the error.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from tilefoundry import func, module
from tilefoundry.cli.main import main
from tilefoundry.dsl import ConstTensor, Tensor, tf
from tilefoundry.models import ConfigFieldError, generate, open_checkpoint
from tilefoundry.models.session import load_backend
from tilefoundry.runtime.prepare import PrepareError
from tilefoundry.runtime.resource import DictResource, SafetensorsResource
from tilefoundry.runtime.resource.errors import UnreadTensorsError
from tilefoundry.runtime.resource.prepared import INDEX_NAME, SHARD_NAME

from .hf_models import folder_digest, make_checkpoint
from .prepare_child import Small, raw

PROMPT = torch.tensor([3, 17, 42, 99, 5])
NEW = 12


def _edit(ckpt: Path, edit) -> None:
    """Rewrite the single-file checkpoint ``ckpt`` with its tensors edited in place by ``edit(state)``."""
    state = load_file(str(ckpt / "model.safetensors"))
    edit(state)
    save_file(state, str(ckpt / "model.safetensors"), metadata={"format": "pt"})


def _set_config(ckpt: Path, **changes) -> None:
    config = json.loads((ckpt / "config.json").read_text())
    config.update(changes)
    (ckpt / "config.json").write_text(json.dumps(config))


def _tokens(folder: Path, backend: str) -> list[int]:
    opened = open_checkpoint(folder, progress=False)
    return generate(load_backend(opened, backend, "cpu"), PROMPT, NEW).tokens


# -- tied embeddings --------------------------------------------------------------------------------------------


def test_a_tied_checkpoint_prepares_the_table_once_and_generates_like_the_raw_folder(tmp_path: Path) -> None:
    raw_dir = tmp_path / "raw"
    hf = make_checkpoint("llama_tied", raw_dir, sharded=False)
    assert "lm_head.weight" not in load_file(str(raw_dir / "model.safetensors")), "transformers stores it once"
    before = folder_digest(raw_dir)
    out = tmp_path / "prepared"
    assert main(["prepare", "--ckpt", str(raw_dir), "--out", str(out)]) == 0
    assert folder_digest(raw_dir) == before

    weight_map = json.loads((out / INDEX_NAME).read_text())["weight_map"]
    assert "embed_tokens" in weight_map and not any("lm_head" in k for k in weight_map)
    stored = load_file(str(out / SHARD_NAME))
    assert torch.equal(stored["embed_tokens"], hf.model.embed_tokens.weight.detach())
    opened = open_checkpoint(out, progress=False)
    assert "lm_head" not in opened.module.weights and "embed_tokens" in opened.module.weights

    with torch.no_grad():
        want = hf.generate(PROMPT[None], max_new_tokens=NEW, min_new_tokens=NEW, do_sample=False)[0, PROMPT.numel():]
    for backend in ("reference", "twin"):
        from_raw, from_prepared = _tokens(raw_dir, backend), _tokens(out, backend)
        assert from_prepared == from_raw == want.tolist(), backend


def test_a_tied_checkpoint_that_also_stores_lm_head_prepares(tmp_path: Path) -> None:
    raw_dir = tmp_path / "raw"
    make_checkpoint("llama_tied", raw_dir, sharded=False)
    _edit(raw_dir, lambda s: s.__setitem__("lm_head.weight", s["model.embed_tokens.weight"].clone()))
    out = tmp_path / "prepared"
    assert main(["prepare", "--ckpt", str(raw_dir), "--out", str(out)]) == 0
    assert not any("lm_head" in k for k in json.loads((out / INDEX_NAME).read_text())["weight_map"])


def test_an_untied_config_without_a_stored_lm_head_is_refused(tmp_path: Path, capsys) -> None:
    raw_dir = tmp_path / "raw"
    make_checkpoint("llama_tied", raw_dir, sharded=False)
    _set_config(raw_dir, tie_word_embeddings=False)
    assert main(["prepare", "--ckpt", str(raw_dir), "--out", str(tmp_path / "out")]) == 2
    assert "lm_head.weight" in capsys.readouterr().err
    assert not (tmp_path / "out").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["raw"]


def test_two_declared_weights_reading_one_raw_tensor_are_both_written(tmp_path: Path) -> None:
    @module
    class Twice:
        @func
        def f(x: Tensor[(4,), "f32"], a: ConstTensor[(4,), "f32"], b: ConstTensor[(4,), "f32"]):
            return x * a + b

    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    save_file({"shared": torch.arange(4.0)}, str(ckpt / "model.safetensors"))
    out = tmp_path / "out"
    Twice.prepare(SafetensorsResource(str(ckpt), device="cpu", alias={"a": "shared", "b": "shared"}), str(out))
    stored = load_file(str(out / SHARD_NAME))
    assert sorted(stored) == ["a", "b"] and torch.equal(stored["a"], stored["b"])


# -- tensors nothing reads --------------------------------------------------------------------------------------


def test_a_config_with_fewer_layers_than_the_checkpoint_is_refused(tmp_path: Path, capsys) -> None:
    raw_dir = tmp_path / "raw"
    make_checkpoint("llama", raw_dir, sharded=True)
    _set_config(raw_dir, num_hidden_layers=2)
    before = folder_digest(raw_dir)
    out = tmp_path / "out"
    assert main(["prepare", "--ckpt", str(raw_dir), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "holds 9 tensors that no declared weight reads" in err and "'model.layers.2." in err
    assert "--allow-unused" in err and err.count("model.layers.2") == 5, "the first five are named"
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["raw"]

    assert main(["prepare", "--ckpt", str(raw_dir), "--out", str(out), "--allow-unused"]) == 0
    weight_map = json.loads((out / INDEX_NAME).read_text())["weight_map"]
    assert {k.split(".")[0] for k in weight_map if k.startswith("layer")} == {"layer0", "layer1"}
    assert folder_digest(raw_dir) == before


@pytest.mark.parametrize("backend", ["reference", "twin"])
def test_generate_refuses_a_checkpoint_with_more_layers_than_its_config(tmp_path: Path, backend: str) -> None:
    raw_dir = tmp_path / "raw"
    make_checkpoint("qwen3", raw_dir, sharded=False)
    _set_config(raw_dir, num_hidden_layers=2)
    opened = open_checkpoint(raw_dir, progress=False)
    with pytest.raises(UnreadTensorsError, match=r"holds 11 tensors .*'model\.layers\.2\.") as info:
        load_backend(opened, backend, "cpu")
    assert all(k.startswith("model.layers.2.") for k in info.value.keys) and len(info.value.keys) == 11
    accepting = open_checkpoint(raw_dir, progress=False, allow_unused=True)
    assert len(generate(load_backend(accepting, backend, "cpu"), PROMPT[:3], 2).tokens) == 2


@pytest.mark.parametrize(("change", "error", "match"), [
    ({"num_hidden_layers": 2}, UnreadTensorsError, r"'model\.layers\.2\.input_layernorm\.weight'"),
    ({"num_experts": 3, "num_local_experts": 3}, ConfigFieldError,
     r"config\.json: num_experts 3 .*model\.layers\.0\.mlp\.gate\.weight is \(4, 64\)"),
], ids=["fewer_layers", "fewer_experts"])
def test_a_smaller_moe_config_is_refused_before_caching(tmp_path: Path, monkeypatch, change: dict,
                                                        error: type[Exception], match: str) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("TILEFOUNDRY_CACHE", str(cache))
    raw_dir = tmp_path / "raw"
    make_checkpoint("qwen3_moe", raw_dir, sharded=False)
    _set_config(raw_dir, **change)
    before = folder_digest(raw_dir)
    with pytest.raises(error, match=match):
        open_checkpoint(raw_dir, progress=False)
    assert folder_digest(raw_dir) == before
    prepared = cache / "prepared"
    assert not prepared.exists() or list(prepared.iterdir()) == [], "nothing is cached from a refused prepare"


def test_known_extras_are_accepted_and_not_copied(tmp_path: Path) -> None:
    raw_dir = tmp_path / "raw"
    make_checkpoint("qwen2", raw_dir, sharded=False)
    _edit(raw_dir, lambda s: s.update({f"model.layers.{i}.self_attn.rotary_emb.inv_freq": torch.ones(8)
                                       for i in range(3)}))
    out = tmp_path / "out"
    assert main(["prepare", "--ckpt", str(raw_dir), "--out", str(out)]) == 0
    assert not any("inv_freq" in k for k in load_file(str(out / SHARD_NAME)))
    opened = open_checkpoint(raw_dir, progress=False)
    load_backend(opened, "twin", "cpu")  # the direct read accepts them too


def test_an_unknown_extra_tensor_is_refused_by_prepare_and_generate(tmp_path: Path, capsys) -> None:
    raw_dir = tmp_path / "raw"
    make_checkpoint("llama_tied", raw_dir, sharded=False)
    _edit(raw_dir, lambda s: s.__setitem__("model.vision_tower.proj.weight", torch.ones(2, 2)))
    assert main(["prepare", "--ckpt", str(raw_dir), "--out", str(tmp_path / "out")]) == 2
    assert "holds 1 tensor that no declared weight reads: 'model.vision_tower.proj.weight'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    with pytest.raises(UnreadTensorsError, match="vision_tower"):
        load_backend(open_checkpoint(raw_dir, progress=False), "reference", "cpu")


def test_module_prepare_refuses_unread_tensors_unless_allowed(tmp_path: Path) -> None:
    data = dict(raw(1), **{"junk.a": torch.ones(1), "junk.b": torch.ones(1), "keep": torch.ones(1)})
    out = tmp_path / "out"
    with pytest.raises(UnreadTensorsError, match=r"this DictResource \(5 tensors\) holds 3 tensors that no "
                                                 r"declared weight reads: 'junk\.a', 'junk\.b', 'keep'\..*"
                                                 r"allow_unused=True") as info:
        Small.prepare(DictResource(data), str(out))
    assert info.value.keys == ["junk.a", "junk.b", "keep"] and not out.exists()
    with pytest.raises(UnreadTensorsError, match=r"holds 1 tensor that .* 'keep'"):
        Small.prepare(DictResource(data), str(out), allow_unused=["junk.*"])
    assert not out.exists()
    Small.prepare(DictResource(data), str(out), allow_unused=True)
    assert sorted(load_file(str(out / SHARD_NAME))) == ["table", "w"]


# -- NaN / Inf --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_prepare_refuses_a_non_finite_weight_and_keeps_the_earlier_output(tmp_path: Path, bad: float) -> None:
    out = tmp_path / "out"
    Small.prepare(DictResource(raw(1)), str(out))
    before = folder_digest(out)
    data = raw(2)
    data["table"][3, 5] = bad
    with pytest.raises(PrepareError, match=r"weight table: .* values of 1024 \(the first at index \(3, 5\)\)"):
        Small.prepare(DictResource(data), str(out))
    assert folder_digest(out) == before and sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_prepare_refuses_a_converter_that_overflows(tmp_path: Path) -> None:
    @module
    class Half:
        @func
        def f(x: Tensor[(2,), "f16"], w: ConstTensor[(2,), "f16"]):
            return x * w

        @f.converter("w")
        def _w(big: Tensor[(2,), "f32"]):
            return tf.cast(big, "f16")

    with pytest.raises(PrepareError, match=r"weight w: 0 NaN and 1 Inf values of 2 .*converter overflowed"):
        Half.prepare(DictResource({"big": torch.tensor([1.0, 1e6])}), str(tmp_path / "out"))
    assert list(tmp_path.iterdir()) == []


def test_the_prepare_command_names_a_nan_weight_of_a_checkpoint(tmp_path: Path, capsys) -> None:
    raw_dir = tmp_path / "raw"
    make_checkpoint("qwen3", raw_dir, sharded=False)
    _edit(raw_dir, lambda s: s["model.layers.1.self_attn.q_proj.weight"].__setitem__((0, 0), float("nan")))
    before = folder_digest(raw_dir)
    assert main(["prepare", "--ckpt", str(raw_dir), "--out", str(tmp_path / "out")]) == 2
    assert "weight layer1.q_proj: 1 NaN and 0 Inf values" in capsys.readouterr().err
    assert folder_digest(raw_dir) == before and not (tmp_path / "out").exists()


# -- Hugging Face hub-cache snapshots ---------------------------------------------------------------------------


def _as_hub_snapshot(plain: Path, root: Path) -> Path:
    """Lay ``plain``'s files out as the hub cache does: blobs, and a snapshot of relative links to them."""
    repo = root / "models--org--tiny"
    snap = repo / "snapshots" / "c0ffee"
    (repo / "blobs").mkdir(parents=True)
    snap.mkdir(parents=True)
    for i, p in enumerate(sorted(plain.iterdir())):
        (repo / "blobs" / f"blob{i:02d}").write_bytes(p.read_bytes())
        (snap / p.name).symlink_to(f"../../blobs/blob{i:02d}")
    return snap


def test_a_hub_cache_snapshot_prepares_and_generates_like_the_plain_folder(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    make_checkpoint("qwen3", plain, sharded=True)
    snap = _as_hub_snapshot(plain, tmp_path / "hub")
    before = folder_digest(tmp_path / "hub")
    assert main(["prepare", "--ckpt", str(plain), "--out", str(tmp_path / "from_plain")]) == 0
    assert main(["prepare", "--ckpt", str(snap), "--out", str(tmp_path / "from_hub")]) == 0
    assert folder_digest(tmp_path / "from_hub") == folder_digest(tmp_path / "from_plain")
    assert all(not p.is_symlink() for p in (tmp_path / "from_hub").iterdir()), "companions are copied, not linked"
    assert _tokens(snap, "twin") == _tokens(plain, "twin")
    assert folder_digest(tmp_path / "hub") == before
    repo = snap.parent.parent
    with pytest.raises(ValueError, match="lies inside the output folder"):
        from tilefoundry.models.checkpoint import prepare_hf_folder

        prepare_hf_folder(snap, repo, progress=False)
    assert folder_digest(tmp_path / "hub") == before and os.path.islink(snap / "config.json")

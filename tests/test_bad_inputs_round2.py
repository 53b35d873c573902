"""Bad inputs of the second sweep (issue 25): each refused by name, in one line on the command line, losing nothing.

A cache root (``TILEFOUNDRY_CACHE``) that is a file, or lies below one; an op that reads the values of a tensor
on the meta device (a shape, no data); a truncated library in the kernel cache; user folders in the kernel
cache; JSON nested past Python's reader; a spoofed ``prepared_by`` mark; a tied checkpoint storing a head of its
own; Ctrl-C during ``prepare``
(one line, exit status 130, nothing half-written left beside the output).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from tilefoundry import func, jit, module
from tilefoundry.cli.main import main
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, tf
from tilefoundry.evaluator import EvaluationError
from tilefoundry.runtime import DictResource
from tilefoundry.runtime.resource.prepared import CacheRootError

from .hf_models import make_checkpoint
from .refusals import refused

C = DimVar("c", 1, 64)


@module(entry="f")
class Scale:
    @func
    def f(x: Tensor[(4,), "f32"], w: ConstTensor[(4,), "f32"]):
        return x * w


@pytest.mark.parametrize("below", [False, True])
def test_a_cache_root_that_is_a_file_is_refused_naming_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str],
                                                                    below: bool) -> None:
    blocker = tmp_path / "notes.txt"
    blocker.write_text("mine")
    monkeypatch.setenv("TILEFOUNDRY_CACHE", str(blocker / "cache" if below else blocker))
    with pytest.raises(CacheRootError, match=r"TILEFOUNDRY_CACHE is .*a file, not a folder"):
        jit(Scale, target="cpu")
    refused(capsys, ["cache", "info"], "TILEFOUNDRY_CACHE", "a file, not a folder")
    assert blocker.read_text() == "mine"


def test_an_op_reading_values_of_a_meta_tensor_is_refused_by_name() -> None:
    """Shapes evaluate on the meta device (a reading's placement, a shape check); an op that reads values (a cache
    update reads its position) names the meta tensors instead of torch's ``Tensor.item()`` error."""

    @func
    def update(cache: Tensor[(1, C, 2, 4), "f32"], pos: Tensor[(), "i64"], n: Tensor[(), "i64"],
               new: Tensor[(1, 1, 2, 4), "f32"]):
        return tf.cache_update(cache, pos, n, new)

    meta = {"device": "meta"}
    args = (torch.zeros(1, 8, 2, 4, **meta), torch.zeros((), dtype=torch.int64, **meta),
            torch.zeros((), dtype=torch.int64, **meta), torch.zeros(1, 1, 2, 4, **meta))
    with pytest.raises(EvaluationError, match=r"cache_update in update reads the values of .*on the meta device \(a "
                                              r"shape, no data\); run it on tensors of 'cpu' or 'cuda'"):
        update(*args)
    out = Scale.load(DictResource({"w": torch.ones(4, **meta)}))(torch.ones(4, **meta))  # shapes alone: fine
    assert out.is_meta and out.shape == (4,)


def test_ctrl_c_during_prepare_is_one_line_and_leaves_nothing_half_written(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    ckpt = tmp_path / "llama"
    make_checkpoint("llama", ckpt, sharded=False)
    mine = tmp_path / "notes.txt"
    mine.write_text("mine")

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("tilefoundry.runtime.resource.prepared.save_file", interrupted)
    status = main(["prepare", "--ckpt", str(ckpt), "--out", str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert status == 130 and "Traceback" not in captured.err
    lines = [line for line in captured.err.strip().splitlines() if not line.startswith("Writing model shards")]
    assert lines == ["tilefoundry prepare: interrupted (Ctrl-C)"], captured.err  # after its progress bar
    assert sorted(os.listdir(tmp_path)) == ["llama", "notes.txt"] and mine.read_text() == "mine"


def _linkable():  # noqa: ANN202
    from tilefoundry import lower
    from tilefoundry.codegen import generate

    return generate(lower(Scale, "cpu"))


def test_a_truncated_cached_library_is_built_again_saying_so(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from tilefoundry.codegen import link
    from tilefoundry.codegen.cache import DiskCache

    cache = DiskCache(tmp_path)
    first = link(_linkable(), cache=cache)  # built, not loaded: truncating it cannot hurt this process
    size = first.library.stat().st_size
    with open(first.library, "r+b") as f:
        f.truncate(size // 2)
    capsys.readouterr()
    again = link(_linkable(), cache=cache)
    err = capsys.readouterr().err
    assert again.library.stat().st_size == size, "built again, whole"
    builds = ("tilefoundry: compiling ", "tilefoundry: precompiling ")  # the build's own progress lines
    said = [line for line in err.splitlines() if not line.startswith(builds)]
    assert len(said) == 1 and "is not what was built there (truncated or changed since); building it again" \
        in said[0], err


def test_clearing_the_kernel_cache_removes_only_what_it_made(tmp_path: Path) -> None:
    from tilefoundry.codegen import link
    from tilefoundry.codegen.cache import DiskCache

    cache = DiskCache(tmp_path)
    link(_linkable(), cache=cache)
    mine = {cache.dir / ".my-scratch" / "a.txt": b"old scratch", cache.dir / "notes" / "b.txt": b"notes",
            cache.dir / "pch" / "readme.txt": b"mine too"}
    for path, data in mine.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    hour_ago = os.stat(cache.dir).st_mtime - 7200
    os.utime(cache.dir / ".my-scratch", (hour_ago, hour_ago))  # as old as a stale build folder
    assert cache.clear() == 1 and cache.entries() == []
    for path, data in mine.items():
        assert path.read_bytes() == data, path


DEEP = "[" * 100_000 + "]" * 100_000  # JSON nested past what Python's reader goes


def test_json_nested_past_the_readers_depth_is_refused_naming_the_file(tmp_path: Path) -> None:
    import struct

    from tilefoundry.models.config import UnsupportedModelError, read_json_object
    from tilefoundry.runtime import SafetensorsResource
    from tilefoundry.runtime.resource.errors import CheckpointError

    config = tmp_path / "config.json"
    config.write_text(DEEP)
    with pytest.raises(UnsupportedModelError, match=rf"{config} nests JSON deeper than any config does"):
        read_json_object(config)
    sharded = tmp_path / "sharded"
    sharded.mkdir()
    (sharded / "model.safetensors.index.json").write_text(DEEP)
    with pytest.raises(CheckpointError, match=r"model.safetensors.index.json' nests JSON deeper"):
        SafetensorsResource(str(sharded), device="cpu").load("w")
    single = tmp_path / "single"
    single.mkdir()
    header = DEEP.encode()
    (single / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    with pytest.raises(CheckpointError, match=r"model.safetensors.*its header nests JSON deeper"):
        SafetensorsResource(str(single), device="cpu").load("w")


def test_a_copied_prepared_mark_does_not_make_a_folder_prepared(tmp_path: Path) -> None:
    import json

    from tilefoundry.runtime.resource.prepared import is_prepared

    ckpt = tmp_path / "hf"
    make_checkpoint("llama", ckpt, sharded=True)
    index = ckpt / "model.safetensors.index.json"
    doc = json.loads(index.read_text())
    doc.setdefault("metadata", {})["prepared_by"] = "tilefoundry"  # the mark, spoofed
    index.write_text(json.dumps(doc))
    assert not is_prepared(ckpt), "its weights sit in the Hugging Face shards, not in prepare's one shard"


def _tied_checkpoint(folder: Path, head: str) -> torch.Tensor:
    """A tied Llama checkpoint that also stores an lm_head.weight: the table's copy, or (``head="other"``) not."""
    from safetensors.torch import load_file, save_file

    make_checkpoint("llama_tied", folder, sharded=False)
    state = load_file(str(folder / "model.safetensors"))
    table = state["model.embed_tokens.weight"]
    state["lm_head.weight"] = table.clone() if head == "same" else torch.randn_like(table)
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return state["lm_head.weight"]


def test_a_stored_head_that_differs_from_tied_embeddings_is_used_as_transformers_does(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from transformers import AutoModelForCausalLM

    from tilefoundry.models.checkpoint import open_checkpoint

    stored = _tied_checkpoint(tmp_path / "other", "other")
    capsys.readouterr()
    opened = open_checkpoint(tmp_path / "other", progress=False)
    err = capsys.readouterr().err
    assert not opened.config.tie_word_embeddings and "lm_head" in opened.module.weights
    assert err.count("\n") == 1 and "the stored head is used, not tied" in err, err
    loaded = opened.module.load(opened.resource())
    hf = AutoModelForCausalLM.from_pretrained(str(tmp_path / "other")).eval()
    assert torch.equal(loaded.constants["lm_head"], stored) and torch.equal(hf.lm_head.weight.detach(), stored)
    _tied_checkpoint(tmp_path / "same", "same")
    assert open_checkpoint(tmp_path / "same", progress=False).config.tie_word_embeddings, "an equal copy stays tied"


def test_a_numbered_cpu_and_an_output_under_a_file_are_refused_in_the_command_line_s_words(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ckpt = tmp_path / "llama"
    make_checkpoint("llama", ckpt, sharded=False)
    capsys.readouterr()  # what saving the checkpoint printed
    refused(capsys, ["prepare", "--ckpt", str(ckpt), "--out", str(tmp_path / "o"), "--device", "cpu:1"],
            "--device", "the CPU is one device here, with no numbered ones; use cpu")
    blocker = tmp_path / "notes.txt"
    blocker.write_text("mine")
    line = refused(capsys, ["prepare", "--ckpt", str(ckpt), "--out", str(blocker / "out")],
                   f"{blocker} is a file, not a folder; choose another output folder")
    assert "Errno" not in line and blocker.read_text() == "mine"


@pytest.mark.parametrize("swap", ["link", "file"])
def test_a_shard_swapped_after_the_checkpoint_was_opened_is_not_read(tmp_path: Path, swap: str) -> None:
    from safetensors.torch import save_file

    from tilefoundry.runtime import SafetensorsResource
    from tilefoundry.runtime.resource.errors import CheckpointError

    folder, outside = tmp_path / "ckpt", tmp_path / "outside"
    folder.mkdir()
    outside.mkdir()
    save_file({"w": torch.zeros(4)}, str(folder / "model.safetensors"))
    save_file({"w": torch.full((4,), 7.0)}, str(outside / "model.safetensors"))
    resource = SafetensorsResource(str(folder), device="cpu")  # the folder is opened (and checked) here
    (folder / "model.safetensors").unlink()
    if swap == "link":
        (folder / "model.safetensors").symlink_to(outside / "model.safetensors")
    else:
        os.link(outside / "model.safetensors", folder / "model.safetensors")  # another file under the name
    with pytest.raises(CheckpointError, match=r"model.safetensors' is (now a symlink|no longer the file it was)"):
        resource.load("w")

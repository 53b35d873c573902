"""Bad checkpoints: each fails with an error naming the file or key, and leaves every file byte-identical."""

from __future__ import annotations

import hashlib
import json
import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from tilefoundry.runtime.resource import (
    INDEX_NAME,
    SINGLE_NAME,
    CheckpointError,
    SafetensorsResource,
    WeightNotFoundError,
)

SHARD_A = "model-00001-of-00002.safetensors"
SHARD_B = "model-00002-of-00002.safetensors"


def snapshot(root: Path) -> dict[str, str]:
    """Every path under ``root`` (links unresolved) with the sha256 of its bytes or its link target."""
    state: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                state[rel] = "link:" + os.readlink(path)
            elif path.is_file():
                state[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                state[rel] = "dir"
    return state


@contextmanager
def unchanged(root: Path) -> Iterator[None]:
    """Assert that nothing under ``root`` is created, removed or modified inside the block."""
    before = snapshot(root)
    yield
    assert snapshot(root) == before


def make_checkpoint(ckpt: Path) -> None:
    ckpt.mkdir(parents=True)
    save_file({"a.w": torch.arange(6, dtype=torch.float32).reshape(2, 3)}, str(ckpt / SHARD_A))
    save_file({"b.w": torch.ones(4, dtype=torch.bfloat16), "b.big": torch.zeros(64)}, str(ckpt / SHARD_B))
    write_index(ckpt, {"a.w": SHARD_A, "b.w": SHARD_B, "b.big": SHARD_B})


def write_index(ckpt: Path, weight_map: dict[str, str]) -> None:
    (ckpt / INDEX_NAME).write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))


def raw_safetensors(header: object, data: bytes, *, header_len: int | None = None) -> bytes:
    text = json.dumps(header).encode() if not isinstance(header, bytes) else header
    length = len(text) if header_len is None else header_len
    return struct.pack("<Q", length) + text + data


@pytest.fixture
def ckpt(tmp_path: Path) -> Path:
    path = tmp_path.resolve() / "ckpt"
    make_checkpoint(path)
    return path


# ---------------------------------------------------------------- the folder itself


def test_a_folder_with_neither_layout_is_reported_as_such(tmp_path: Path) -> None:
    ckpt = tmp_path / "empty"
    ckpt.mkdir()
    save_file({"x": torch.ones(1)}, str(ckpt / "pytorch_model.safetensors"))
    with unchanged(tmp_path), pytest.raises(CheckpointError) as info:
        SafetensorsResource(str(ckpt), device="cpu")
    message = str(info.value)
    assert INDEX_NAME in message and SINGLE_NAME in message and "neither" in message
    assert str(ckpt) in message and "pytorch_model.safetensors" in message


def test_a_missing_folder_is_a_file_not_found_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        SafetensorsResource(str(tmp_path / "nope"), device="cpu")


def test_a_file_instead_of_a_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / SINGLE_NAME).write_bytes(b"")
    with pytest.raises(NotADirectoryError, match="not a folder"):
        SafetensorsResource(str(tmp_path / SINGLE_NAME), device="cpu")


# ---------------------------------------------------------------- the index


def test_invalid_json_in_the_index(ckpt: Path) -> None:
    (ckpt / INDEX_NAME).write_text('{"weight_map": {"a.w": "model-00001-of-00002.safetensors",}')
    with unchanged(ckpt.parent), pytest.raises(CheckpointError) as info:
        SafetensorsResource(str(ckpt), device="cpu")
    message = str(info.value)
    assert "not valid JSON" in message and INDEX_NAME in message and "line 1" in message


def test_an_index_that_is_not_utf8(ckpt: Path) -> None:
    (ckpt / INDEX_NAME).write_bytes(b"\xff\xfe\x00garbage")
    with unchanged(ckpt.parent), pytest.raises(CheckpointError, match="not UTF-8"):
        SafetensorsResource(str(ckpt), device="cpu")


@pytest.mark.parametrize("doc", [[], {"metadata": {}}, {"weight_map": ["a.w"]}])
def test_an_index_without_a_weight_map_object(ckpt: Path, doc: object) -> None:
    (ckpt / INDEX_NAME).write_text(json.dumps(doc))
    with unchanged(ckpt.parent), pytest.raises(CheckpointError) as info:
        SafetensorsResource(str(ckpt), device="cpu")
    assert "weight_map" in str(info.value) and INDEX_NAME in str(info.value)


def test_an_index_value_that_is_not_a_file_name(ckpt: Path) -> None:
    write_index(ckpt, {"a.w": 3})  # type: ignore[dict-item]
    with unchanged(ckpt.parent), pytest.raises(CheckpointError, match=r"maps 'a\.w' to 3"):
        SafetensorsResource(str(ckpt), device="cpu")


def test_an_index_naming_a_shard_through_dotdot(ckpt: Path) -> None:
    save_file({"a.w": torch.ones(1)}, str(ckpt.parent / "x.safetensors"))  # exists, outside the folder
    write_index(ckpt, {"a.w": "../x.safetensors", "b.w": SHARD_B})
    with unchanged(ckpt.parent), pytest.raises(CheckpointError) as info:
        SafetensorsResource(str(ckpt), device="cpu")
    message = str(info.value)
    assert "'../x.safetensors'" in message and "'a.w'" in message and INDEX_NAME in message
    assert "leaves checkpoint folder" in message


def test_an_index_naming_a_shard_by_absolute_path(ckpt: Path) -> None:
    outside = ckpt.parent / "x.safetensors"
    save_file({"a.w": torch.ones(1)}, str(outside))
    write_index(ckpt, {"a.w": str(outside)})
    with unchanged(ckpt.parent), pytest.raises(CheckpointError) as info:
        SafetensorsResource(str(ckpt), device="cpu")
    assert repr(str(outside)) in str(info.value) and "absolute path" in str(info.value)


def test_an_absolute_path_into_the_folder_itself_is_refused_too(ckpt: Path) -> None:
    write_index(ckpt, {"a.w": str(ckpt / SHARD_A)})
    with unchanged(ckpt.parent), pytest.raises(CheckpointError, match="absolute path"):
        SafetensorsResource(str(ckpt), device="cpu")


# ---------------------------------------------------------------- symlinks: followed to regular files anywhere


def test_an_index_naming_a_symlink_to_a_file_in_another_folder_reads_that_file(ckpt: Path) -> None:
    outside = ckpt.parent / "elsewhere"
    outside.mkdir()
    save_file({"a.w": torch.full((2,), 5.0)}, str(outside / "x.safetensors"))
    (ckpt / "linked.safetensors").symlink_to(outside / "x.safetensors")
    write_index(ckpt, {"a.w": "linked.safetensors", "b.w": SHARD_B, "b.big": SHARD_B})
    with unchanged(ckpt.parent):
        res = SafetensorsResource(str(ckpt), device="cpu")
        assert torch.equal(res.load("a.w"), torch.full((2,), 5.0))
        assert res.layout.shards["linked.safetensors"] == outside / "x.safetensors"


def test_a_symlinked_subfolder_leads_to_the_file_it_holds(ckpt: Path) -> None:
    outside = ckpt.parent / "elsewhere"
    outside.mkdir()
    save_file({"a.w": torch.ones(1)}, str(outside / "x.safetensors"))
    (ckpt / "sub").symlink_to(outside, target_is_directory=True)
    write_index(ckpt, {"a.w": "sub/x.safetensors"})
    with unchanged(ckpt.parent):
        assert torch.equal(SafetensorsResource(str(ckpt), device="cpu").load("a.w"), torch.ones(1))


def test_a_single_file_symlink_to_another_folder_reads_that_file(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    save_file({"x": torch.arange(3.0)}, str(tmp_path / "real.safetensors"))
    (ckpt / SINGLE_NAME).symlink_to(tmp_path / "real.safetensors")
    with unchanged(tmp_path):
        res = SafetensorsResource(str(ckpt), device="cpu")
        assert torch.equal(res.load("x"), torch.arange(3.0))
        assert res.files()[-1] == (tmp_path / "real.safetensors").resolve()


def _link_target(tmp_path: Path, kind: str) -> Path:
    """Something a checkpoint file may link to that is no regular file."""
    target = tmp_path / f"target-{kind}"
    if kind == "folder":
        target.mkdir()
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "device":
        return Path("/dev/null")
    return target  # "dangling": nothing there


@pytest.mark.parametrize("layout", ["single", "sharded"])
@pytest.mark.parametrize(("kind", "words"), [
    ("folder", "which is a folder, not a regular file"),
    ("fifo", "which is a FIFO (named pipe), not a regular file"),
    ("device", "which is a device, not a regular file"),
    ("dangling", "which does not exist (a dangling link)"),
])
def test_a_link_to_anything_but_a_regular_file_is_refused_by_name(tmp_path: Path, layout: str, kind: str,
                                                                  words: str) -> None:
    ckpt = tmp_path / "ckpt"
    if layout == "sharded":
        make_checkpoint(ckpt)
        (ckpt / SHARD_B).unlink()
        name = SHARD_B
    else:
        ckpt.mkdir()
        name = SINGLE_NAME
    target = _link_target(tmp_path, kind)
    (ckpt / name).symlink_to(target, target_is_directory=kind == "folder")
    with unchanged(tmp_path), pytest.raises(CheckpointError) as info:
        SafetensorsResource(str(ckpt), device="cpu")  # a FIFO is never opened: this returns at once
    message = str(info.value)
    assert f"{name!r}" in message and f"a symlink resolving to {str(target)!r}" in message and words in message
    assert "point the link at the file itself" in message or "restore the file it points to" in message


def test_a_link_loop_is_refused_by_name(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / SINGLE_NAME).symlink_to(ckpt / "loop.safetensors")
    (ckpt / "loop.safetensors").symlink_to(ckpt / SINGLE_NAME)
    with unchanged(tmp_path), pytest.raises(CheckpointError, match=r"'model\.safetensors'.*cannot be read"):
        SafetensorsResource(str(ckpt), device="cpu")


def test_the_file_read_is_the_one_the_link_led_to_when_the_checkpoint_was_opened(tmp_path: Path) -> None:
    ckpt, first, second = tmp_path / "ckpt", tmp_path / "first.safetensors", tmp_path / "second.safetensors"
    ckpt.mkdir()
    save_file({"x": torch.zeros(2)}, str(first))
    save_file({"x": torch.ones(2)}, str(second))
    (ckpt / SINGLE_NAME).symlink_to(first)
    res = SafetensorsResource(str(ckpt), device="cpu")
    (ckpt / SINGLE_NAME).unlink()
    (ckpt / SINGLE_NAME).symlink_to(second)  # the link now leads elsewhere: the opened checkpoint does not follow
    assert torch.equal(res.load("x"), torch.zeros(2))


def test_a_link_target_replaced_after_opening_is_not_read(tmp_path: Path) -> None:
    ckpt, target, other = tmp_path / "ckpt", tmp_path / "real.safetensors", tmp_path / "other.safetensors"
    ckpt.mkdir()
    save_file({"x": torch.zeros(2)}, str(target))
    save_file({"x": torch.ones(2)}, str(other))
    (ckpt / SINGLE_NAME).symlink_to(target)
    res = SafetensorsResource(str(ckpt), device="cpu")
    os.replace(other, target)  # another file (another inode) under the name the link resolved to
    with pytest.raises(CheckpointError) as info:
        res.load("x")
    message = str(info.value)
    assert repr(str(target.resolve())) in message and "no longer the file it was" in message
    assert "open the checkpoint again" in message


def test_an_index_naming_a_missing_shard(ckpt: Path) -> None:
    write_index(ckpt, {"a.w": SHARD_A, "c.w": "model-00003-of-00003.safetensors"})
    with unchanged(ckpt.parent), pytest.raises(CheckpointError) as info:
        SafetensorsResource(str(ckpt), device="cpu")
    message = str(info.value)
    assert "'model-00003-of-00003.safetensors'" in message and "'c.w'" in message
    assert "does not exist" in message and INDEX_NAME in message


def test_an_index_naming_a_folder_as_a_shard(ckpt: Path) -> None:
    (ckpt / "dir.safetensors").mkdir()
    write_index(ckpt, {"a.w": "dir.safetensors"})
    with unchanged(ckpt.parent), pytest.raises(CheckpointError, match="'dir.safetensors'.*not a regular"):
        SafetensorsResource(str(ckpt), device="cpu")


# ---------------------------------------------------------------- shards


def test_a_truncated_shard_names_the_file_and_the_tensor(ckpt: Path) -> None:
    path = ckpt / SHARD_B
    path.write_bytes(path.read_bytes()[:-40])
    res = SafetensorsResource(str(ckpt), device="cpu")  # shards are checked when first opened
    with unchanged(ckpt.parent), pytest.raises(CheckpointError) as info:
        res.load("b.w")
    message = str(info.value)
    assert str(path) in message and "corrupt" in message and "'b.big'" in message and "data bytes" in message


def test_a_truncated_shard_does_not_block_the_other_shards(ckpt: Path) -> None:
    path = ckpt / SHARD_B
    path.write_bytes(path.read_bytes()[:-40])
    res = SafetensorsResource(str(ckpt), device="cpu")
    assert torch.equal(res.load("a.w"), torch.arange(6, dtype=torch.float32).reshape(2, 3))
    with pytest.raises(CheckpointError):
        res.load("b.w")
    with pytest.raises(CheckpointError):  # a failed open is not cached as if it had worked
        res.load("b.w")


def test_a_truncated_unsharded_checkpoint(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    save_file({"x": torch.ones(100)}, str(ckpt / SINGLE_NAME))
    data = (ckpt / SINGLE_NAME).read_bytes()
    (ckpt / SINGLE_NAME).write_bytes(data[: len(data) // 2])
    res = SafetensorsResource(str(ckpt), device="cpu")
    with unchanged(tmp_path), pytest.raises(CheckpointError, match=r"model\.safetensors.*corrupt.*'x'"):
        res.load("x")


def test_a_shard_shorter_than_its_header_length(ckpt: Path) -> None:
    (ckpt / SHARD_A).write_bytes(b"\x01\x02\x03")
    res = SafetensorsResource(str(ckpt), device="cpu")
    with unchanged(ckpt.parent), pytest.raises(CheckpointError) as info:
        res.load("a.w")
    assert SHARD_A in str(info.value) and "3 bytes long" in str(info.value)


def test_a_header_claiming_more_bytes_than_the_file_has(ckpt: Path) -> None:
    header = {"a.w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}}
    (ckpt / SHARD_A).write_bytes(raw_safetensors(header, bytes(24), header_len=10_000))
    res = SafetensorsResource(str(ckpt), device="cpu")
    with unchanged(ckpt.parent), pytest.raises(CheckpointError) as info:
        res.load("a.w")
    assert SHARD_A in str(info.value) and "claims 10000 bytes" in str(info.value)


def test_a_header_that_is_not_json(ckpt: Path) -> None:
    (ckpt / SHARD_A).write_bytes(raw_safetensors(b"{this is not json}", bytes(24)))
    res = SafetensorsResource(str(ckpt), device="cpu")
    with unchanged(ckpt.parent), pytest.raises(CheckpointError) as info:
        res.load("a.w")
    assert SHARD_A in str(info.value) and "not valid JSON" in str(info.value)


@pytest.mark.parametrize(
    ("header", "words"),
    [
        ([1, 2, 3], "JSON list, not an object"),
        ({"a.w": "F32"}, "'a.w' is not an object"),
        ({"a.w": {"dtype": "F32", "shape": [2, 3]}}, "'a.w' lacks a valid dtype / shape / data_offsets"),
        ({"a.w": {"dtype": "F32", "shape": [2, -3], "data_offsets": [0, 24]}}, "lacks a valid"),
        ({"a.w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [24, 0]}}, "inverted byte range"),
        ({"a.w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 400]}}, "claims bytes [0, 400)"),
        ({"a.w": {"dtype": "F32", "shape": [2, 4], "data_offsets": [0, 24]}}, "needs 32 bytes"),
    ],
)
def test_a_corrupt_header_entry(ckpt: Path, header: object, words: str) -> None:
    (ckpt / SHARD_A).write_bytes(raw_safetensors(header, bytes(24)))
    res = SafetensorsResource(str(ckpt), device="cpu")
    with unchanged(ckpt.parent), pytest.raises(CheckpointError) as info:
        res.load("a.w")
    assert SHARD_A in str(info.value) and words in str(info.value)


def test_a_shard_safetensors_itself_refuses_is_reported_by_file(ckpt: Path) -> None:
    # A header our checks accept, but whose byte ranges leave a gap: safe_open refuses the layout.
    header = {"a.w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [8, 32]}}
    (ckpt / SHARD_A).write_bytes(raw_safetensors(header, bytes(32)))
    res = SafetensorsResource(str(ckpt), device="cpu")
    with unchanged(ckpt.parent), pytest.raises(CheckpointError) as info:
        res.load("a.w")
    assert SHARD_A in str(info.value) and "cannot be opened as safetensors" in str(info.value)


def test_a_key_the_index_maps_to_a_shard_that_does_not_hold_it(ckpt: Path) -> None:
    write_index(ckpt, {"a.w": SHARD_A, "b.w": SHARD_A, "b.big": SHARD_B})
    res = SafetensorsResource(str(ckpt), device="cpu")
    with unchanged(ckpt.parent), pytest.raises(CheckpointError) as info:
        res.load("b.w")
    message = str(info.value)
    assert "'b.w'" in message and repr(SHARD_A) in message and "does not hold it" in message
    assert INDEX_NAME in message


def test_a_missing_weight_names_the_key_and_the_checkpoint_dir(ckpt: Path) -> None:
    res = SafetensorsResource(str(ckpt), device="cpu", alias={"weight": "w"})
    with unchanged(ckpt.parent), pytest.raises(WeightNotFoundError) as info:
        res.subtree("c").load("weight")
    message = str(info.value)
    assert isinstance(info.value, KeyError)
    assert "'c.w'" in message and str(ckpt) in message and "alias 'weight'" in message


# ---------------------------------------------------------------- duplicate keys in the index text


@pytest.mark.parametrize(("text", "key"), [
    ('{"metadata": {}, "weight_map": {"a.w": "%A", "b.w": "%B", "a.w": "%B", "b.big": "%B"}}', "a.w"),
    ('{"weight_map": {"a.w": "%B"}, "weight_map": {"a.w": "%A", "b.w": "%B", "b.big": "%B"}}', "weight_map"),
], ids=["in_weight_map", "two_weight_maps"])
def test_an_index_naming_a_key_twice_is_refused(ckpt: Path, text: str, key: str) -> None:
    (ckpt / INDEX_NAME).write_text(text.replace("%A", SHARD_A).replace("%B", SHARD_B))
    with unchanged(ckpt.parent), pytest.raises(CheckpointError) as info:
        SafetensorsResource(str(ckpt), device="cpu")
    message = str(info.value)
    assert INDEX_NAME in message and f"names the key {key!r} twice" in message


# ---------------------------------------------------------------- Hugging Face hub-cache snapshots


def hub_snapshot(root: Path, files: dict[str, bytes]) -> Path:
    """A hub-cache repository under ``root``: every file a blob, the snapshot holding relative links to them."""
    repo = root / "models--org--tiny"
    (repo / "blobs").mkdir(parents=True)
    snap = repo / "snapshots" / "0123abcd"
    snap.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abcd")
    for name, data in files.items():
        blob = hashlib.sha256(data).hexdigest()
        (repo / "blobs" / blob).write_bytes(data)
        (snap / name).symlink_to(f"../../blobs/{blob}")
    return snap


def test_a_hub_cache_snapshot_reads_through_its_links_into_blobs(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    make_checkpoint(plain)
    snap = hub_snapshot(tmp_path / "hub", {p.name: p.read_bytes() for p in plain.iterdir()})
    with unchanged(tmp_path):
        res = SafetensorsResource(str(snap), device="cpu")
        ref = SafetensorsResource(str(plain), device="cpu")
        for key in ("a.w", "b.w", "b.big"):
            assert torch.equal(res.load(key), ref.load(key)) and res.load(key).dtype == ref.load(key).dtype
        assert all(p.parent.name == "blobs" for p in res.layout.shards.values())


def test_a_hub_cache_snapshot_with_one_file_reads_too(tmp_path: Path) -> None:
    data = tmp_path / "x.safetensors"
    save_file({"w": torch.arange(3.0)}, str(data))
    snap = hub_snapshot(tmp_path / "hub", {SINGLE_NAME: data.read_bytes()})
    assert torch.equal(SafetensorsResource(str(snap), device="cpu").load("w"), torch.arange(3.0))


def test_a_snapshot_link_into_another_repository_reads_that_blob(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    make_checkpoint(plain)
    files = {p.name: p.read_bytes() for p in plain.iterdir()}
    snap = hub_snapshot(tmp_path / "hub", files)
    other = hub_snapshot(tmp_path / "hub2", files)
    (snap / SHARD_B).unlink()
    (snap / SHARD_B).symlink_to(os.path.realpath(other / SHARD_B))  # a blob of another repository
    with unchanged(tmp_path):
        res = SafetensorsResource(str(snap), device="cpu")
        assert torch.equal(res.load("b.big"), torch.zeros(64))
        assert res.layout.shards[SHARD_B] == Path(os.path.realpath(other / SHARD_B))


@pytest.mark.parametrize("escape", ["dotdot_from_blobs", "blobs_is_a_link", "not_a_snapshot"])
def test_links_out_of_a_snapshot_read_the_regular_file_they_reach(tmp_path: Path, escape: str) -> None:
    plain = tmp_path / "plain"
    make_checkpoint(plain)
    snap = hub_snapshot(tmp_path / "hub", {p.name: p.read_bytes() for p in plain.iterdir()})
    repo = snap.parent.parent
    outside = tmp_path / "outside.safetensors"
    outside.write_bytes((plain / SHARD_B).read_bytes())
    if escape == "dotdot_from_blobs":  # the link text goes through blobs/ and out again
        (snap / SHARD_B).unlink()
        (snap / SHARD_B).symlink_to("../../blobs/../../../outside.safetensors")
    elif escape == "blobs_is_a_link":  # blobs/ itself points elsewhere
        moved = tmp_path / "elsewhere"
        (repo / "blobs").rename(moved)
        (repo / "blobs").symlink_to(moved, target_is_directory=True)
    else:  # a folder laid out like a snapshot but under another name
        renamed = repo / "snaps"
        (repo / "snapshots").rename(renamed)
        snap = renamed / snap.name
    with unchanged(tmp_path):
        res = SafetensorsResource(str(snap), device="cpu")
        for key in ("a.w", "b.w", "b.big"):
            assert torch.equal(res.load(key), SafetensorsResource(str(plain), device="cpu").load(key))


def test_a_snapshot_link_to_the_blobs_folder_itself_is_refused(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    make_checkpoint(plain)
    snap = hub_snapshot(tmp_path / "hub", {p.name: p.read_bytes() for p in plain.iterdir()})
    (snap / SHARD_B).unlink()
    (snap / SHARD_B).symlink_to("../../blobs")
    with unchanged(tmp_path), pytest.raises(CheckpointError) as info:
        SafetensorsResource(str(snap), device="cpu")
    message = str(info.value)
    assert f"shard {SHARD_B!r}" in message and "which is a folder, not a regular file" in message
    assert str(snap.parent.parent / "blobs") in message

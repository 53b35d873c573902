"""prepare never loses data: what it replaces, what it refuses, killed runs, concurrent runs, permissions.

Every case asserts what is on disk afterwards (byte for byte where it must be), not only the error.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import save_file

from tilefoundry.runtime.resource import DictResource, SafetensorsResource, prepared
from tilefoundry.runtime.resource.prepared import (
    INDEX_NAME,
    SHARD_NAME,
    cache_root,
    folder_lock,
    is_prepared,
    prepared_files,
    write_folder,
)

from .prepare_child import Small, raw

CHILD = Path(__file__).with_name("prepare_child.py")


def digest(folder: Path) -> dict[str, str]:
    """sha256 of every file below ``folder`` by relative path (directories listed as such)."""
    out = {}
    for p in sorted(folder.rglob("*")):
        rel = str(p.relative_to(folder))
        out[rel] = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "<dir>"
    return out


def leftovers(parent: Path) -> list[str]:
    """Hidden entries prepare may leave beside its output (.NAME.lock / .old-* / .partial-*)."""
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


def reference(tmp_path: Path, seed: int) -> dict[str, str]:
    """The digest of a clean prepare of ``raw(seed)`` into a folder of its own."""
    ref = tmp_path / "refs" / f"seed{seed}"
    if not ref.exists():
        Small.prepare(DictResource(raw(seed)), str(ref))
    return digest(ref)


def run_child(out: Path, seed: int, mode: str = "", **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(CHILD), str(out), str(seed), mode], capture_output=True, text=True,
                          check=False, **kw)


def start_child(out: Path, seed: int, mode: str = "") -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(CHILD), str(out), str(seed), mode], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


# -- what an existing output may hold -------------------------------------------------------------------------


def test_an_earlier_output_is_replaced_whole(tmp_path: Path) -> None:
    out = tmp_path / "work" / "out"
    Small.prepare(DictResource(raw(1)), str(out))
    assert digest(out) == reference(tmp_path, 1)
    assert prepared_files(out) == {INDEX_NAME, SHARD_NAME}
    Small.prepare(DictResource(raw(2)), str(out))
    assert digest(out) == reference(tmp_path, 2)
    assert sorted(p.name for p in out.parent.iterdir()) == ["out"], "no lock, partial or old folder is left"


def test_a_user_file_in_an_earlier_output_is_refused_and_kept(tmp_path: Path) -> None:
    out = tmp_path / "work" / "out"
    Small.prepare(DictResource(raw(1)), str(out))
    (out / "notes.txt").write_text("mine")
    before = digest(out)
    with pytest.raises(FileExistsError, match=r"holds 1 entry prepare did not write \(notes\.txt\).*move them away"):
        Small.prepare(DictResource(raw(2)), str(out))
    assert digest(out) == before
    assert sorted(p.name for p in out.parent.iterdir()) == ["out"]


def test_a_folder_of_user_files_is_refused_naming_the_first_few(tmp_path: Path) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    for i in range(7):
        (out / f"f{i}.txt").write_text(str(i))
    (out / "sub").mkdir()
    (out / "sub" / "deep.txt").write_text("deep")
    before = digest(out)
    with pytest.raises(FileExistsError) as info:
        Small.prepare(DictResource(raw(1)), str(out))
    message = str(info.value)
    assert "not a prepared checkpoint directory" in message and "holds 8 entries" in message
    assert "f0.txt, f1.txt, f2.txt, f3.txt, f4.txt, ..." in message and "f6.txt" not in message
    assert digest(out) == before and leftovers(tmp_path) == []


def test_a_subfolder_named_like_a_file_prepare_wrote_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    Small.prepare(DictResource(raw(1)), str(out))
    (out / SHARD_NAME).unlink()
    (out / SHARD_NAME).mkdir()
    (out / SHARD_NAME / "photo.jpg").write_bytes(b"\xff\xd8")
    before = digest(out)
    with pytest.raises(FileExistsError, match=SHARD_NAME.replace(".", r"\.")):
        Small.prepare(DictResource(raw(2)), str(out))
    assert digest(out) == before


def test_an_output_path_that_is_a_file_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.write_text("a file of mine")
    with pytest.raises(FileExistsError, match="exists and is not a folder"):
        Small.prepare(DictResource(raw(1)), str(out))
    assert out.read_text() == "a file of mine" and leftovers(tmp_path) == []


def test_an_empty_existing_folder_is_filled(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    Small.prepare(DictResource(raw(1)), str(out))
    assert digest(out) == reference(tmp_path, 1) and leftovers(tmp_path) == []


def _raw_checkpoint(folder: Path, seed: int) -> None:
    folder.mkdir(parents=True)
    save_file(raw(seed), str(folder / "model.safetensors"))


@pytest.mark.parametrize("where", ["inside", "same", "hub_blobs"])
def test_an_input_inside_the_output_is_refused(tmp_path: Path, where: str) -> None:
    out = tmp_path / "out"
    if where == "hub_blobs":  # the snapshot is outside the output, the file its link names is inside it
        repo = tmp_path / "models--org--m"
        out = repo / "blobs"
        _raw_checkpoint(out, 2)
        (out / "model.safetensors").rename(out / "0a1b2c")
        ckpt = repo / "snapshots" / "rev1"
        ckpt.mkdir(parents=True)
        (ckpt / "model.safetensors").symlink_to("../../blobs/0a1b2c")
    else:
        Small.prepare(DictResource(raw(1)), str(out))
        ckpt = out / "raw" if where == "inside" else out
        if where == "inside":
            _raw_checkpoint(ckpt, 2)
    before = digest(out)
    with pytest.raises(ValueError, match=r"the input .* lies inside the output folder .*write the output elsewhere"):
        Small.prepare(SafetensorsResource(str(ckpt), device="cpu"), str(out))
    assert digest(out) == before and leftovers(out.parent) == []


def test_a_symlink_to_the_output_prepares_the_folder_it_names(tmp_path: Path) -> None:
    real = tmp_path / "real"
    Small.prepare(DictResource(raw(1)), str(real))
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    Small.prepare(DictResource(raw(2)), str(link))
    assert link.is_symlink() and digest(real) == reference(tmp_path, 2)
    assert leftovers(tmp_path) == []


# -- changes while prepare runs: checked again at the swap, under the lock --------------------------------------


class _Meddling(DictResource):
    """A DictResource that calls ``act`` once, when the weight ``table`` is read (while prepare converts)."""

    def __init__(self, data: dict[str, torch.Tensor], act: Callable[[], None]) -> None:
        super().__init__(data)
        self._act = [act]

    def load(self, name: str) -> torch.Tensor:
        if name == "table" and self._act:
            self._act.pop()()
        return super().load(name)


def test_a_folder_that_appears_while_prepare_runs_is_kept(tmp_path: Path) -> None:
    out = tmp_path / "out"

    def appear() -> None:
        out.mkdir()
        (out / "photos.txt").write_text("made meanwhile")

    with pytest.raises(FileExistsError, match=r"photos\.txt"):
        Small.prepare(_Meddling(raw(1), appear), str(out))
    assert digest(out) == {"photos.txt": hashlib.sha256(b"made meanwhile").hexdigest()}
    assert leftovers(tmp_path) == [], "the partial output and the lock are gone"


def test_a_file_added_to_the_earlier_output_while_prepare_runs_is_kept(tmp_path: Path) -> None:
    out = tmp_path / "out"
    Small.prepare(DictResource(raw(1)), str(out))

    def add() -> None:
        (out / "notes.txt").write_text("added meanwhile")

    with pytest.raises(FileExistsError, match=r"notes\.txt"):
        Small.prepare(_Meddling(raw(2), add), str(out))
    expected = dict(reference(tmp_path, 1), **{"notes.txt": hashlib.sha256(b"added meanwhile").hexdigest()})
    assert digest(out) == expected and leftovers(tmp_path) == []


def test_a_prepare_finishing_meanwhile_is_replaced_by_the_later_swap(tmp_path: Path) -> None:
    out = tmp_path / "out"

    def other_prepare() -> None:
        Small.prepare(DictResource(raw(3)), str(out))

    Small.prepare(_Meddling(raw(4), other_prepare), str(out))
    assert digest(out) == reference(tmp_path, 4), "the last swap wins, whole"
    assert leftovers(tmp_path) == []


def test_the_swap_check_sees_a_change_made_by_another_process(tmp_path: Path) -> None:
    out = tmp_path / "out"
    Small.prepare(DictResource(raw(1)), str(out))
    child = start_child(out, 2, "pause")
    assert child.stdout is not None and child.stdin is not None
    assert child.stdout.readline().strip() == "filled", child.stderr.read() if child.stderr else ""
    (out / "notes.txt").write_text("mine")
    _, err = child.communicate("go\n")
    assert child.returncode == 2 and "notes.txt" in err, err
    assert digest(out) == dict(reference(tmp_path, 1), **{"notes.txt": hashlib.sha256(b"mine").hexdigest()})
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("one_step", [True, False], ids=["exchange", "two-renames"])
def test_a_file_added_at_the_last_moment_is_seen_in_the_folder_moved_aside(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch,
                                                                           one_step: bool) -> None:
    out = tmp_path / "out"
    Small.prepare(DictResource(raw(1)), str(out))
    real_replace, real_exchange = os.replace, prepared._exchange

    def replace(src: Any, dst: Any) -> None:
        if Path(src) == out:  # after the check under the lock, just before the folder is moved aside
            (out / "late.txt").write_text("written at the last moment")
        real_replace(src, dst)

    def exchange(a: Path, b: Path) -> bool:
        if not one_step:
            return False
        if b == out and not (out / "late.txt").exists():  # the first exchange; the second puts it back
            (out / "late.txt").write_text("written at the last moment")
        return real_exchange(a, b)

    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(prepared, "_exchange", exchange)
    with pytest.raises(FileExistsError, match=rf"{out} is not a prepared checkpoint directory .*late\.txt"):
        Small.prepare(DictResource(raw(2)), str(out))
    monkeypatch.undo()
    late = hashlib.sha256(b"written at the last moment").hexdigest()
    assert digest(out) == dict(reference(tmp_path, 1), **{"late.txt": late}), "moved back, nothing removed"
    assert leftovers(tmp_path) == []


def _waits_on(lock: Path, pid: int) -> bool:
    """True when process ``pid`` is blocked waiting for the flock on ``lock`` (Linux /proc/locks)."""
    inode = os.stat(lock).st_ino
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "->" in fields and str(pid) in fields and fields[-3].endswith(f":{inode}"):
            return True
    return False


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs Linux /proc/locks to see a blocked flock")
def test_a_second_prepare_waits_for_the_lock_then_swaps_whole(tmp_path: Path) -> None:
    out = tmp_path / "out"
    Small.prepare(DictResource(raw(1)), str(out))
    child = start_child(out, 2, "pause")
    assert child.stdout is not None and child.stdin is not None
    assert child.stdout.readline().strip() == "filled"
    with folder_lock(out):
        child.stdin.write("go\n")
        child.stdin.flush()
        lock = tmp_path / ".out.lock"
        deadline = time.monotonic() + 120  # a liveness guard only: the child gets there in well under a second
        while not _waits_on(lock, child.pid):
            assert child.poll() is None, "the child finished while another process held the lock"
            assert time.monotonic() < deadline, "the child never reached the lock"
            time.sleep(0.05)
        assert digest(out) == reference(tmp_path, 1), "nothing is swapped while the lock is held"
    child.communicate()
    assert child.returncode == 0
    assert digest(out) == reference(tmp_path, 2) and leftovers(tmp_path) == []


def test_two_prepares_at_once_leave_one_whole_output(tmp_path: Path) -> None:
    out = tmp_path / "out"
    Small.prepare(DictResource(raw(1)), str(out))
    children = [start_child(out, seed) for seed in (5, 6)]
    for child in children:
        child.communicate()
        assert child.returncode == 0
    assert digest(out) in (reference(tmp_path, 5), reference(tmp_path, 6))
    assert leftovers(tmp_path) == []


# -- killed runs ------------------------------------------------------------------------------------------------


def _hidden(parent: Path, kind: str) -> list[Path]:
    return sorted(p for p in parent.iterdir() if p.name.startswith(f".out.{kind}-"))


def test_a_run_killed_between_the_two_renames_is_recovered_by_the_next(tmp_path: Path) -> None:
    out = tmp_path / "out"
    Small.prepare(DictResource(raw(1)), str(out))
    done = run_child(out, 2, "kill-between-renames")
    assert done.returncode == -signal.SIGKILL, done.stderr
    olds, partials = _hidden(tmp_path, "old"), _hidden(tmp_path, "partial")
    assert not out.exists() and len(olds) == 1 and len(partials) == 1, "killed with the output moved aside"
    assert digest(olds[0]) == reference(tmp_path, 1) and digest(partials[0]) == reference(tmp_path, 2)

    Small.prepare(DictResource(raw(3)), str(out))
    assert digest(out) == reference(tmp_path, 3)
    assert leftovers(tmp_path) == [], "no copy of a model leaks"


def test_after_a_kill_a_failing_run_still_restores_the_old_output(tmp_path: Path) -> None:
    out = tmp_path / "out"
    Small.prepare(DictResource(raw(1)), str(out))
    assert run_child(out, 2, "kill-between-renames").returncode == -signal.SIGKILL
    broken = raw(3)
    broken["table"] = torch.zeros(3)
    with pytest.raises(ValueError, match="weight table"):
        Small.prepare(DictResource(broken), str(out))
    assert digest(out) == reference(tmp_path, 1), "the earlier output is back, byte for byte"
    assert leftovers(tmp_path) == []


def test_a_run_killed_before_the_swap_leaves_a_partial_the_next_removes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    Small.prepare(DictResource(raw(1)), str(out))
    assert run_child(out, 2, "kill-before-swap").returncode == -signal.SIGKILL
    assert digest(out) == reference(tmp_path, 1) and len(_hidden(tmp_path, "partial")) == 1
    assert is_prepared(out)
    Small.prepare(DictResource(raw(3)), str(out))
    assert digest(out) == reference(tmp_path, 3) and leftovers(tmp_path) == []


def test_a_run_killed_right_after_the_one_step_exchange_never_hides_the_output(tmp_path: Path) -> None:
    out = tmp_path / "out"
    Small.prepare(DictResource(raw(1)), str(out))
    assert run_child(out, 2, "kill-after-exchange").returncode == -signal.SIGKILL
    assert digest(out) == reference(tmp_path, 2), "the output is the new one: it was never missing"
    partials = _hidden(tmp_path, "partial")
    assert len(partials) == 1 and digest(partials[0]) == reference(tmp_path, 1), "the old one, not yet removed"
    Small.prepare(DictResource(raw(3)), str(out))
    assert digest(out) == reference(tmp_path, 3) and leftovers(tmp_path) == []


def test_a_run_killed_after_the_swap_leaves_an_old_copy_the_next_removes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    Small.prepare(DictResource(raw(1)), str(out))
    assert run_child(out, 2, "kill-after-swap").returncode == -signal.SIGKILL
    assert digest(out) == reference(tmp_path, 2), "the killed run's output is in place"
    olds = _hidden(tmp_path, "old")
    assert len(olds) == 1 and digest(olds[0]) == reference(tmp_path, 1)
    Small.prepare(DictResource(raw(3)), str(out))
    assert digest(out) == reference(tmp_path, 3) and leftovers(tmp_path) == []


def test_a_live_partial_of_another_run_is_not_removed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    Small.prepare(DictResource(raw(1)), str(out))
    child = start_child(out, 2, "pause")
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "filled"
    partials = _hidden(tmp_path, "partial")
    assert len(partials) == 1
    Small.prepare(DictResource(raw(3)), str(out))  # recovers leftovers under the lock, twice
    assert partials[0].is_dir() and (partials[0] / SHARD_NAME).is_file(), "the running child's partial is kept"
    child.communicate("go\n")
    assert child.returncode == 0
    assert digest(out) == reference(tmp_path, 2) and leftovers(tmp_path) == []


# -- permissions ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("umask", "dir_mode", "file_mode"), [(0o022, 0o755, 0o644), (0o077, 0o700, 0o600),
                                                              (0o002, 0o775, 0o664)])
def test_prepared_folders_take_the_umask(tmp_path: Path, umask: int, dir_mode: int, file_mode: int) -> None:
    companion = tmp_path / "config.json"
    companion.write_text("{}")
    companion.chmod(0o444)  # a read-only source: the copy still gets the umask's mode
    from tilefoundry.runtime.prepare import prepare_module

    previous = os.umask(umask)
    try:
        out = prepare_module(Small, DictResource(raw(1)), tmp_path / "out", progress=False, companions=[companion])
    finally:
        os.umask(previous)
    assert stat.S_IMODE(out.stat().st_mode) == dir_mode
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in out.iterdir()} == {
        SHARD_NAME: file_mode, INDEX_NAME: file_mode, "config.json": file_mode}
    assert prepared_files(out) == {SHARD_NAME, INDEX_NAME, "config.json"}


# -- the folder writer and the cache root -----------------------------------------------------------------------


def test_write_folder_refuses_an_existing_folder_it_does_not_own(tmp_path: Path) -> None:
    target = tmp_path / "t"
    target.mkdir()
    (target / "a.txt").write_text("theirs")

    def fill(folder: Path) -> None:
        (folder / "a.txt").write_text("ours")

    with pytest.raises(FileExistsError, match=r"converting: .* is not an earlier conversion it may replace"):
        write_folder(target, fill, owned=lambda _: None, what="converting", kind="an earlier conversion")
    assert (target / "a.txt").read_text() == "theirs" and leftovers(tmp_path) == []
    write_folder(target, fill, owned=lambda _: {"a.txt"}, what="converting", kind="an earlier conversion")
    assert (target / "a.txt").read_text() == "ours" and leftovers(tmp_path) == []


def test_a_failing_fill_leaves_nothing(tmp_path: Path) -> None:
    def fill(folder: Path) -> None:
        (folder / "half.bin").write_bytes(b"x" * 10)
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        write_folder(tmp_path / "t", fill, owned=lambda _: None, what="w", kind="k")
    assert list(tmp_path.iterdir()) == []


def test_cache_root_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TILEFOUNDRY_CACHE", str(tmp_path / "c"))
    assert cache_root() == tmp_path / "c"
    monkeypatch.setenv("TILEFOUNDRY_CACHE", "")
    assert cache_root() == Path.home() / ".cache" / "tilefoundry"
    monkeypatch.delenv("TILEFOUNDRY_CACHE")
    assert cache_root() == Path.home() / ".cache" / "tilefoundry"


def test_the_index_names_every_file_and_carries_the_mark(tmp_path: Path) -> None:
    out = tmp_path / "out"
    Small.prepare(DictResource(raw(1)), str(out))
    index = json.loads((out / INDEX_NAME).read_text())
    assert index["metadata"]["prepared_by"] == "tilefoundry" and index["metadata"]["companions"] == []
    assert index["weight_map"] == {"table": SHARD_NAME, "w": SHARD_NAME}
    index["metadata"]["prepared_by"] = "someone else"
    (out / INDEX_NAME).write_text(json.dumps(index))
    assert not is_prepared(out)
    before = digest(out)
    with pytest.raises(FileExistsError, match="not a prepared checkpoint directory"):
        Small.prepare(DictResource(raw(2)), str(out))
    assert digest(out) == before


# -- entries of the user's named like a writer's leftovers --------------------------------------------------------


def _user_entries(parent: Path) -> dict[str, bytes]:
    (parent / ".out.partial-mine").mkdir()
    (parent / ".out.partial-mine" / "thesis.txt").write_bytes(b"chapter one")
    (parent / ".out.old-backup").mkdir()
    (parent / ".out.old-backup" / "notes.txt").write_bytes(b"keep me")
    return {".out.partial-mine/thesis.txt": b"chapter one", ".out.old-backup/notes.txt": b"keep me"}


def _still_there(parent: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        assert (parent / name).read_bytes() == data, name


@pytest.mark.parametrize("existing", [True, False], ids=["replacing", "first"])
def test_folders_of_the_user_named_like_leftovers_are_never_removed_nor_adopted(tmp_path: Path,
                                                                                existing: bool) -> None:
    out = tmp_path / "out"
    if existing:
        Small.prepare(DictResource(raw(1)), str(out))
    files = _user_entries(tmp_path)
    Small.prepare(DictResource(raw(2)), str(out))
    assert digest(out) == reference(tmp_path, 2), "the output is the new one, not the user's .out.old-backup"
    _still_there(tmp_path, files)
    Small.prepare(DictResource(raw(3)), str(out))  # and again, replacing
    _still_there(tmp_path, files)


def test_a_lock_file_of_the_user_is_refused_and_kept(tmp_path: Path) -> None:
    out = tmp_path / "out"
    Small.prepare(DictResource(raw(1)), str(out))
    (tmp_path / ".out.lock").write_bytes(b"my lock notes")
    with pytest.raises(FileExistsError, match=r"\.out\.lock is in the way of the lock a write of out takes and is "
                                              r"not one TileFoundry made"):
        Small.prepare(DictResource(raw(2)), str(out))
    assert (tmp_path / ".out.lock").read_bytes() == b"my lock notes" and digest(out) == reference(tmp_path, 1)


def test_a_reader_names_the_output_a_killed_run_hid_and_renames_nothing(tmp_path: Path) -> None:
    from tilefoundry.models.checkpoint import checkpoint_folder

    out = tmp_path / "out"
    Small.prepare(DictResource(raw(1)), str(out))
    assert run_child(out, 2, "kill-between-renames").returncode == -signal.SIGKILL  # the two-rename swap
    (old,) = _hidden(tmp_path, "old")
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(FileNotFoundError, match=rf"previous content is complete in '{old}': run the same prepare "
                                                r"again \(it puts that back first\), or pass that folder"):
        checkpoint_folder(out)
    assert sorted(os.listdir(tmp_path)) == before, "a reader renamed nothing"

"""A Hugging Face model id given as --ckpt resolves, offline, to its snapshot in the local hub cache; a folder whose
files are symlinks to regular files elsewhere reads like the folder they link to."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from tilefoundry.cli.main import main
from tilefoundry.models.checkpoint import checkpoint_folder
from tilefoundry.models.hub import cached_snapshot, hub_cache_folder, looks_like_model_id
from tilefoundry.models.session import TextSession
from tilefoundry.runtime.resource import CheckpointError

from .hf_models import add_tokenizer, folder_digest, make_checkpoint
from .refusals import SRC, refused

REPO = "owner/tiny-qwen3"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
OTHER_COMMIT = "fedcba9876543210fedcba9876543210fedcba98"
PROMPT, NEW = "hello", 5


def lay_out_in_hub_cache(plain: Path, cache: Path, repo_id: str = REPO, commit: str = COMMIT,
                         ref: str | None = "main") -> Path:
    """Put ``plain``'s files into ``cache`` as the hub does: ``models--owner--name/`` with ``blobs/<sha256>``,
    ``refs/<ref>`` holding the commit hash and ``snapshots/<commit>/<file>`` a relative link to its blob."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    snap = repo / "snapshots" / commit
    snap.mkdir(parents=True)
    if ref is not None:
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / ref).write_text(commit)
    for p in sorted(plain.iterdir()):
        data = p.read_bytes()
        blob = hashlib.sha256(data).hexdigest()
        (repo / "blobs" / blob).write_bytes(data)
        (snap / p.name).symlink_to(f"../../blobs/{blob}")
    return snap


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny sharded Qwen3 checkpoint with a tokenizer: a plain local folder."""
    folder = tmp_path_factory.mktemp("plain") / "qwen3"
    make_checkpoint("qwen3", folder, sharded=True)
    add_tokenizer(folder)
    return folder


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty hub cache named by HF_HUB_CACHE, the working folder an empty one (no folder owner/ there)."""
    root = tmp_path / "hub-cache"
    root.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(root))
    monkeypatch.chdir(work)
    return root


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every socket connection in this process raises: reaching the network shows."""
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def session_tokens(ckpt: str | Path) -> tuple[Path, list[int]]:
    session = TextSession.open(ckpt, device="cpu", backend="reference", max_new_tokens=NEW, prompt=PROMPT)
    return session.checkpoint.folder, session.generate().tokens


def cli_tokens(capsys: pytest.CaptureFixture[str], ckpt: str | Path) -> list[int]:
    status = main(["generate", "--ckpt", str(ckpt), "--prompt", PROMPT, "--max-new-tokens", str(NEW),
                   "--backend", "reference", "--json"])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    return json.loads(captured.out)["tokens"]


# -- a model id resolves to its cached snapshot ---------------------------------------------------------------


def test_a_model_id_opens_its_cached_snapshot_and_generates_like_the_folder(plain: Path, cache: Path,
                                                                            no_network: None) -> None:
    snap = lay_out_in_hub_cache(plain, cache)
    before = folder_digest(cache)
    folder, tokens = session_tokens(REPO)
    assert folder == snap.resolve()
    assert tokens == session_tokens(snap)[1] == session_tokens(plain)[1]
    assert len(tokens) == NEW
    assert folder_digest(cache) == before and sorted(p.name for p in cache.iterdir()) == ["models--owner--tiny-qwen3"]


def test_generate_takes_a_model_id_on_the_command_line_offline(plain: Path, cache: Path, no_network: None,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    lay_out_in_hub_cache(plain, cache)
    by_id = cli_tokens(capsys, REPO)
    assert os.environ["HF_HUB_OFFLINE"] == "1", "the command ran with the hub libraries offline"
    assert by_id == cli_tokens(capsys, plain) and len(by_id) == NEW


def test_hf_home_names_the_cache_when_hf_hub_cache_is_unset(plain: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.chdir(tmp_path)
    snap = lay_out_in_hub_cache(plain, tmp_path / "hf-home" / "hub")
    assert hub_cache_folder() == tmp_path / "hf-home" / "hub"
    assert checkpoint_folder(REPO) == snap.resolve()


def test_a_revision_after_the_id_picks_that_snapshot(plain: Path, cache: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    make_checkpoint("qwen3", other, sharded=False, seed=1)
    main_snap = lay_out_in_hub_cache(plain, cache)
    v2_snap = lay_out_in_hub_cache(other, cache, commit=OTHER_COMMIT, ref="v2")
    assert checkpoint_folder(REPO) == main_snap.resolve()
    assert checkpoint_folder(f"{REPO}@main") == main_snap.resolve()
    assert checkpoint_folder(f"{REPO}@v2") == v2_snap.resolve()
    assert checkpoint_folder(f"{REPO}@{OTHER_COMMIT}") == v2_snap.resolve()
    with pytest.raises(FileNotFoundError) as info:
        checkpoint_folder(f"{REPO}@v3")
    message = str(info.value)
    assert f"'{REPO}@v3'" in message and "no snapshot for revision 'v3'" in message
    assert f"`hf download {REPO} --revision v3`" in message


def test_prepare_takes_a_model_id(plain: Path, cache: Path, tmp_path: Path, no_network: None,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    lay_out_in_hub_cache(plain, cache)
    assert main(["prepare", "--ckpt", REPO, "--out", str(tmp_path / "from_id")]) == 0
    assert main(["prepare", "--ckpt", str(plain), "--out", str(tmp_path / "from_folder")]) == 0
    assert folder_digest(tmp_path / "from_id") == folder_digest(tmp_path / "from_folder")
    assert f"into {tmp_path / 'from_id'}" in capsys.readouterr().out


CHECKED = '''\
from tilefoundry import func, module
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, tf

seq = DimVar("seq", 1, 8)


@module(entry="proj")
class Proj:
    @func
    def proj(x: Tensor[(seq, 4), "f32"], w: ConstTensor[(4, 4), "f32"]):
        return tf.matmul(x, w)
'''


def test_check_reads_weights_by_model_id(cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "proj.py"
    source.write_text(CHECKED)
    weights = tmp_path / "weights"
    weights.mkdir()
    w = torch.eye(4)
    w[0, 0] = float("nan")  # shows that the cached weights, not random ones, are read
    save_file({"w": w}, str(weights / "model.safetensors"))
    lay_out_in_hub_cache(weights, cache, repo_id="owner/proj")
    status = main(["check", f"{source}:Proj", "--ckpt", "owner/proj", "--no-alias"])
    out = capsys.readouterr().out
    assert status == 1 and "weights:   checkpoint owner/proj, no alias table" in out and "FAIL" in out


# -- what stays refused ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("model_id", ["owner/missing", "owner/missing@v1"])
def test_an_id_the_cache_lacks_is_refused_naming_the_cache_and_the_way_out(cache: Path, model_id: str,
                                                                          no_network: None) -> None:
    with pytest.raises(FileNotFoundError) as info:
        checkpoint_folder(model_id)
    message = str(info.value)
    assert f"checkpoint {model_id!r} is no local folder" in message and repr(str(cache)) in message
    assert "no models--owner--missing folder" in message and "never downloads" in message
    assert "`hf download owner/missing" in message and "huggingface-cli download owner/missing" in message
    assert "HF_HUB_CACHE / HF_HOME" in message and "pass a local folder" in message
    assert list(cache.iterdir()) == [], "looking up an id writes nothing into the cache"


def test_the_command_line_refuses_an_uncached_id_in_one_line(plain: Path, cache: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    lay_out_in_hub_cache(plain, cache)  # another repository is cached; this one is not
    refused(capsys, ["generate", "--ckpt", "owner/missing", "--prompt", "hi"], "'owner/missing' is no local folder",
            str(cache), "hf download owner/missing")
    refused(capsys, ["prepare", "--ckpt", "owner/missing", "--out", str(tmp_path / "out")],
            "'owner/missing' is no local folder", "hf download owner/missing")
    assert not (tmp_path / "out").exists()


def test_an_incomplete_cached_snapshot_names_the_missing_file(plain: Path, cache: Path) -> None:
    snap = lay_out_in_hub_cache(plain, cache)
    shard = sorted(p for p in snap.iterdir() if p.name.endswith(".safetensors"))[0]
    os.unlink(os.path.realpath(shard))  # a download stopped before this blob arrived
    with pytest.raises(CheckpointError) as info:
        session_tokens(REPO)
    message = str(info.value)
    assert repr(shard.name) in message and "which does not exist (a dangling link)" in message


def test_a_snapshot_the_cache_knows_to_be_incomplete_is_refused_naming_what_is_missing(plain: Path,
                                                                                       cache: Path) -> None:
    errors = pytest.importorskip("huggingface_hub.errors")
    if not hasattr(errors, "IncompleteSnapshotError"):
        pytest.skip("this huggingface_hub keeps no tree listings of cached snapshots")
    snap = lay_out_in_hub_cache(plain, cache)
    files = {p.name: {"size": p.stat().st_size, "blob_id": "0" * 40} for p in plain.iterdir()}
    files["model-00009-of-00009.safetensors"] = {"size": 1, "blob_id": "1" * 40}  # listed, never downloaded
    trees = snap.parent.parent / "trees"
    trees.mkdir()
    (trees / f"{COMMIT}.json").write_text(json.dumps({"format_version": 1, "files": files}))
    with pytest.raises(FileNotFoundError) as info:
        checkpoint_folder(REPO)
    message = str(info.value)
    assert f"checkpoint {REPO!r} is no local folder" in message and "its snapshot there is incomplete" in message
    assert "model-00009-of-00009.safetensors" in message and f"`hf download {REPO}`" in message


def test_a_local_folder_wins_over_a_model_id(plain: Path, cache: Path) -> None:
    snap = lay_out_in_hub_cache(plain, cache)
    local = Path.cwd() / REPO
    shutil.copytree(plain, local)
    assert checkpoint_folder(REPO) == local.resolve()
    shutil.rmtree(local)
    assert checkpoint_folder(REPO) == snap.resolve(), "with no such local path the id is looked up"
    local.write_text("not a folder")  # a file by that name wins over the id too
    with pytest.raises(FileNotFoundError, match=rf"'{REPO}' is a file, not a folder"):
        checkpoint_folder(REPO)


@pytest.mark.parametrize("text", ["owner/name/extra", "./owner/name", "/nowhere/owner", "owner--x/name",
                                  "owner/na..me", "owner/name@", "owner/name.git", "nothing"])
def test_a_missing_path_that_is_no_model_id_keeps_the_no_such_folder_refusal(cache: Path, text: str) -> None:
    assert not looks_like_model_id(text)
    with pytest.raises(FileNotFoundError) as info:
        checkpoint_folder(text)
    message = str(info.value)
    assert f"checkpoint folder {text!r} does not exist; pass the folder holding config.json" in message
    assert "Hugging Face cache" not in message


@pytest.mark.parametrize(("text", "shaped"), [
    ("HuggingFaceTB/SmolLM2-135M-Instruct", True), ("Qwen/Qwen3-0.6B", True), ("a_b/c.d-e", True),
    (f"owner/name@{COMMIT}", True), ("owner/name@refs/pr/1", True), ("owner/name@v1.0", True),
    ("owner/name@refs/../x", False), ("~/owner", False), ("owner/", False), ("/owner", False), ("-a/b", False),
    ("a/" + "b" * 95, False),
])
def test_the_shape_of_a_model_id(text: str, shaped: bool) -> None:
    assert looks_like_model_id(text) is shaped


def test_cached_snapshot_refuses_what_is_no_model_id(cache: Path) -> None:
    with pytest.raises(ValueError, match=r"'a/b/c' is not a Hugging Face model id; an id is owner/name"):
        cached_snapshot("a/b/c")


def test_only_resolving_an_id_imports_huggingface_hub(plain: Path, cache: Path) -> None:
    snap = lay_out_in_hub_cache(plain, cache)
    code = ("import sys\nfrom tilefoundry.cli.main import build_parser\nbuild_parser()\n"
            "from tilefoundry.models.checkpoint import checkpoint_folder\n"
            f"checkpoint_folder({str(plain)!r})\n"
            "print('huggingface_hub' in sys.modules)\n"
            f"print(checkpoint_folder({REPO!r}))\n"
            "print('huggingface_hub' in sys.modules)\n")
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", str(snap.resolve()), "True"], "a folder never loads huggingface_hub"


# -- symlinked weights --------------------------------------------------------------------------------------------


def test_a_folder_whose_shards_link_to_another_folder_generates_like_it(plain: Path, tmp_path: Path) -> None:
    linked = tmp_path / "linked"
    linked.mkdir()
    for p in plain.iterdir():
        if p.name.endswith(".safetensors"):
            (linked / p.name).symlink_to(p)  # the weights stay where they are
        else:
            shutil.copy(p, linked / p.name)
    before = folder_digest(plain)
    assert any(p.is_symlink() for p in linked.iterdir())
    assert session_tokens(linked)[1] == session_tokens(plain)[1]
    assert folder_digest(plain) == before


def test_a_folder_whose_model_safetensors_links_to_another_folder_generates_like_it(tmp_path: Path,
                                                                                    no_network: None) -> None:
    single = tmp_path / "single"
    make_checkpoint("qwen3", single, sharded=False)
    add_tokenizer(single)
    linked = tmp_path / "linked"
    linked.mkdir()
    for p in single.iterdir():
        (linked / p.name).symlink_to(os.path.relpath(p, linked))  # every file a relative link, as a hub snapshot
    assert session_tokens(linked)[1] == session_tokens(single)[1]

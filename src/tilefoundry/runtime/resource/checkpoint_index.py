"""Reading a checkpoint directory's layout: an index plus shards, or one unsharded file.

Two shapes are accepted (the Hugging Face conventions):

* ``model.safetensors.index.json`` whose ``weight_map`` names, for each key, the shard file holding it;
* a single ``model.safetensors`` and no index: the file's own key list is the map.

When both are present the index wins. Everything here is validated when the layout is read, before any
tensor is: the index must be JSON of the right shape, every shard it names must be spelled relative to the
checkpoint folder (no absolute path, no ``..``) and must be a regular file, and no JSON object of the index may
name a key twice. Symlinks are followed wherever they lead, so a Hugging Face hub-cache snapshot (whose files
link into the repository's ``blobs/``) and a folder whose shards link to another disk both read; a link to a
folder, a FIFO, a device or nothing (a dangling link) is refused, naming the file. The file each name resolves
to is recorded by identity (device and inode) when the layout is read, and only that file is ever read
(:mod:`.shard_file` checks it when it opens the shard). Shard *contents* are checked when a shard is first
opened.

An index may spell one file several ways (``s.safetensors`` and ``./s.safetensors``, a symlink
and its target, two hard links). Each spelling is kept as a key of :attr:`CheckpointLayout.shards`, so that
messages can name the file as the index does, but every spelling of one file maps to the same path: the
file (device and inode) decides, not the text.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath
from types import MappingProxyType

from .errors import CheckpointError, CheckpointNotFoundError

__all__ = ["INDEX_NAME", "SINGLE_NAME", "CheckpointLayout", "read_checkpoint_layout"]

INDEX_NAME = "model.safetensors.index.json"
"""File name of a sharded checkpoint's index."""

SINGLE_NAME = "model.safetensors"
"""File name of an unsharded checkpoint."""


@dataclass(frozen=True)
class CheckpointLayout:
    """Where a checkpoint's tensors live.

    Attributes:
        root: the checkpoint folder, symlinks resolved.
        index_path: the index file, or None for an unsharded checkpoint.
        weight_map: raw key -> shard name (as the index spells it), or None for an unsharded checkpoint,
            whose single shard's own key list is the map.
        shards: shard name (every spelling the index uses) -> resolved path of the shard file. Spellings of
            one file map to one path (the first spelling's, in index order), so a path stands for a file.
        identities: resolved shard path -> ``(st_dev, st_ino)`` of the regular file found there when the layout
            was read; a shard is read only while its path still holds that file.
    """

    root: Path
    index_path: Path | None
    weight_map: Mapping[str, str] | None
    shards: Mapping[str, Path]
    identities: Mapping[Path, tuple[int, int]] = field(default_factory=lambda: MappingProxyType({}))

    def describe(self) -> str:
        """``'<dir>'`` or ``'<dir> (index model.safetensors.index.json)'``, for error messages."""
        if self.index_path is None:
            return f"{str(self.root)!r} ({SINGLE_NAME})"
        return f"{str(self.root)!r} (index {self.index_path.name})"


def _kind(mode: int) -> str:
    """What a non-regular file is, in words."""
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _resolve_member(root: Path, name: str, *, what: str, source: Path | None,
                    key: str | None) -> tuple[Path, tuple[int, int]]:
    """Resolve ``name`` (relative to ``root``) to a regular file, following symlinks wherever they lead.

    Returns the resolved path and the identity ``(st_dev, st_ino)`` of the file found there now. The name
    itself must stay relative and free of ``..`` (it is the index's text); a link to anything but a regular file
    (a folder, a FIFO, a device, nothing) is refused, naming ``name`` and what it resolves to.
    """
    where = f"{source.name} maps {key!r} to " if source is not None else ""
    windows = PureWindowsPath(name)
    if PurePosixPath(name).is_absolute() or windows.is_absolute() or windows.drive:
        raise CheckpointError(
            f"{where}{what} {name!r}, an absolute path, in checkpoint {str(root)!r}; shard names must be "
            "relative to the checkpoint folder. Fix the index, or copy (or symlink) the shard into the folder"
        )
    if ".." in PurePosixPath(name.replace("\\", "/")).parts:
        raise CheckpointError(
            f"{where}{what} {name!r}, which leaves checkpoint folder {str(root)!r} through '..'; shard "
            "names must stay inside the checkpoint folder. Fix the index, or copy (or symlink) the shard into "
            "the folder"
        )
    spelled = os.path.join(root, name)
    resolved = os.path.realpath(spelled)
    linked = resolved != os.path.normpath(spelled)
    called = f"{where}{what} {name!r} in {str(root)!r}" + (f", a symlink resolving to {resolved!r}" if linked else "")
    try:
        st = os.stat(resolved)
    except FileNotFoundError:
        if linked or os.path.lexists(spelled):
            raise CheckpointError(
                f"{called}, which does not exist (a dangling link); restore the file it points to, or replace the "
                "link with the file itself"
            ) from None
        raise CheckpointError(
            f"{called}, which does not exist; the checkpoint is incomplete: download the missing file"
        ) from None
    except OSError as exc:
        raise CheckpointError(f"{called}, which cannot be read ({exc.strerror or exc}); replace it with the file "
                              "itself") from None
    if not stat.S_ISREG(st.st_mode):
        fix = "point the link at the file itself" if linked else "put the file itself there"
        raise CheckpointError(f"{called}, which is {_kind(st.st_mode)}, not a regular file; {fix}")
    return Path(resolved), (st.st_dev, st.st_ino)


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """``json.loads`` object hook: the object as a dict, refusing a key it names twice (JSON keeps the last)."""
    obj: dict[str, object] = {}
    for key, value in pairs:
        if key in obj:
            raise _DuplicateKey(key)
        obj[key] = value
    return obj


def _read_index(root: Path, index_path: Path) -> dict[str, str]:
    try:
        text = index_path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CheckpointError(
            f"index {str(index_path)!r} is not UTF-8 text ({exc}); restore it from the checkpoint's source"
        ) from None
    except OSError as exc:
        raise CheckpointError(f"cannot read index {str(index_path)!r}: {exc.strerror or exc}") from None
    try:
        doc = json.loads(text, object_pairs_hook=_unique_keys)
    except _DuplicateKey as dup:
        raise CheckpointError(
            f"index {str(index_path)!r} names the key {dup.key!r} twice in one JSON object; a weight mapped twice "
            "is ambiguous, so nothing is read. Restore the index from the checkpoint's source"
        ) from None
    except RecursionError:
        raise CheckpointError(
            f"index {str(index_path)!r} nests JSON deeper than any checkpoint index does (Python's JSON reader gives "
            "up); restore it from the checkpoint's source"
        ) from None
    except json.JSONDecodeError as exc:
        raise CheckpointError(
            f"index {str(index_path)!r} is not valid JSON ({exc.msg} at line {exc.lineno}, column "
            f"{exc.colno}); restore it from the checkpoint's source"
        ) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("weight_map"), dict):
        raise CheckpointError(
            f"index {str(index_path)!r} has no 'weight_map' object; a safetensors index is "
            '{"metadata": {...}, "weight_map": {"<key>": "<shard file>", ...}}'
        )
    weight_map: dict[str, str] = {}
    for key, shard in doc["weight_map"].items():
        if not isinstance(shard, str) or not shard:
            raise CheckpointError(
                f"index {str(index_path)!r} maps {key!r} to {shard!r}; each weight_map value must be a shard "
                "file name"
            )
        weight_map[key] = shard
    return weight_map


def read_checkpoint_layout(ckpt_dir: str | os.PathLike[str]) -> CheckpointLayout:
    """Read and validate the layout of the checkpoint folder ``ckpt_dir``.

    Raises:
        FileNotFoundError / NotADirectoryError: ``ckpt_dir`` is missing or is not a folder.
        CheckpointError: the folder holds neither an index nor ``model.safetensors``; the index is not JSON
            or lacks a weight_map; a shard it names is spelled as an absolute path or through ``..``, is missing,
            or is (or links to) no regular file.
    """
    given = os.fspath(ckpt_dir)
    if not os.path.exists(given):
        raise FileNotFoundError(f"checkpoint folder {given!r} does not exist")
    if not os.path.isdir(given):
        raise NotADirectoryError(
            f"checkpoint path {given!r} is not a folder; pass the folder holding {INDEX_NAME} or "
            f"{SINGLE_NAME}"
        )
    root = Path(os.path.realpath(given))
    index_candidate = root / INDEX_NAME
    single_candidate = root / SINGLE_NAME

    if os.path.lexists(index_candidate):
        index_path, _ = _resolve_member(root, INDEX_NAME, what="index", source=None, key=None)
        weight_map = _read_index(root, index_path)
        shards: dict[str, Path] = {}
        path_of_file: dict[tuple[int, int], Path] = {}  # (st_dev, st_ino) -> the path that stands for it
        for key, shard in weight_map.items():
            if shard in shards:
                continue
            path, identity = _resolve_member(root, shard, what="shard", source=index_path, key=key)
            shards[shard] = path_of_file.setdefault(identity, path)
        identities = {path: identity for identity, path in path_of_file.items()}
        return CheckpointLayout(root, index_path, MappingProxyType(weight_map), MappingProxyType(shards),
                                MappingProxyType(identities))

    if os.path.lexists(single_candidate):
        path, identity = _resolve_member(root, SINGLE_NAME, what="checkpoint file", source=None, key=None)
        return CheckpointLayout(root, None, None, MappingProxyType({SINGLE_NAME: path}),
                                MappingProxyType({path: identity}))

    others = sorted(p.name for p in root.glob("*.safetensors"))
    found = f"; it does hold {', '.join(others[:5])}{' ...' if len(others) > 5 else ''}" if others else ""
    raise CheckpointNotFoundError(
        f"checkpoint folder {given!r} holds neither {INDEX_NAME} (a sharded checkpoint) nor {SINGLE_NAME} "
        f"(an unsharded one){found}. Point at the folder that holds one of them"
    )

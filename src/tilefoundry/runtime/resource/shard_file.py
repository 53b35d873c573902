"""One safetensors shard file: header validation, and the pool of lazily opened ``safe_open`` handles.

A safetensors file is an 8-byte little-endian header length ``N``, ``N`` bytes of JSON header
(``{"<key>": {"dtype": ..., "shape": [...], "data_offsets": [begin, end]}, "__metadata__": {...}}``), then
the tensor bytes, offsets relative to the end of the header. ``safe_open`` validates that structure when a
shard is opened; when it refuses a file, :func:`read_shard_header` checks it against the file's real size
so that a truncated or corrupt shard is reported by file name and key rather than as a bare
deserialization error.

:class:`ShardPool` opens each shard file at most once (on first use) and hands the same handle to every
resource view sharing the pool. Handles are keyed by the file's path, not by the name the index spells it
with, so two spellings of one file (which the layout maps to one path) share one handle.
"""

from __future__ import annotations

import errno
import json
import math
import os
import struct
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from safetensors import SafetensorError, safe_open

from .errors import CheckpointError

__all__ = ["OpenShard", "ShardPool", "read_shard_header"]

# Bytes per element of the dtypes safetensors stores whole-byte elements for.
_ITEMSIZE = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4,
    "I64": 8, "U64": 8, "F64": 8, "C64": 8,
}

# safetensors' own ceiling on the header size; a larger claim is corruption, not a big model.
_MAX_HEADER = 100_000_000


def _corrupt(path: Path, problem: str) -> CheckpointError:
    return CheckpointError(
        f"shard {str(path)!r} is corrupt: {problem}. The file is damaged or was cut short while copying; "
        "restore it from the checkpoint's source"
    )


def read_shard_header(path: Path) -> dict[str, dict[str, Any]]:
    """Read and check the header of the safetensors file ``path``; return ``{key: entry}`` without metadata.

    Raises CheckpointError naming the file (and the key, when one entry is at fault) when the file is shorter
    than its header length, the header is not a JSON object of tensor entries, or an entry's byte range
    lies past the end of the file or disagrees with its dtype and shape.
    """
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            prefix = f.read(8)
            if len(prefix) < 8:
                raise _corrupt(path, f"it is {size} bytes long, too short for the 8-byte header length")
            (header_len,) = struct.unpack("<Q", prefix)
            if header_len > size - 8:
                raise _corrupt(
                    path, f"its header claims {header_len} bytes but only {size - 8} bytes follow the length"
                )
            if header_len > _MAX_HEADER:
                raise _corrupt(path, f"its header claims {header_len} bytes, above safetensors' limit")
            raw = f.read(header_len)
    except OSError as exc:
        raise CheckpointError(f"cannot read shard {str(path)!r}: {exc.strerror or exc}") from None
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _corrupt(path, f"its header is not valid JSON ({exc})") from None
    except RecursionError:
        raise _corrupt(path, "its header nests JSON deeper than any safetensors header does (Python's JSON reader "
                             "gives up)") from None
    if not isinstance(header, dict):
        raise _corrupt(path, f"its header is a JSON {type(header).__name__}, not an object")

    data_len = size - 8 - header_len
    entries: dict[str, dict[str, Any]] = {}
    for key, entry in header.items():
        if key == "__metadata__":
            continue
        if not isinstance(entry, dict):
            raise _corrupt(path, f"header entry {key!r} is not an object")
        dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
        if (
            not isinstance(dtype, str)
            or not isinstance(shape, list)
            or not all(isinstance(d, int) and d >= 0 for d in shape)
            or not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(isinstance(o, int) for o in offsets)
        ):
            raise _corrupt(path, f"header entry {key!r} lacks a valid dtype / shape / data_offsets")
        begin, end = offsets
        if not 0 <= begin <= end:
            raise _corrupt(path, f"tensor {key!r} has an inverted byte range [{begin}, {end})")
        if end > data_len:
            raise _corrupt(
                path,
                f"tensor {key!r} claims bytes [{begin}, {end}) of the data section, but the file holds only "
                f"{data_len} data bytes",
            )
        itemsize = _ITEMSIZE.get(dtype)
        if itemsize is not None and (end - begin) != math.prod(shape) * itemsize:
            raise _corrupt(
                path,
                f"tensor {key!r} ({dtype}, shape {shape}) needs {math.prod(shape) * itemsize} bytes but its "
                f"byte range [{begin}, {end}) holds {end - begin}",
            )
        entries[key] = entry
    return entries


@dataclass(frozen=True)
class OpenShard:
    """An opened shard: its path, its ``safe_open`` handle, and the keys its header lists."""

    path: Path
    handle: Any
    keys: frozenset[str]


class ShardPool:
    """Lazily opened ``safe_open`` handles, at most one per shard file, shared by every view of a resource.

    A shard's header is validated the first time it is opened (by ``safe_open``, diagnosed by
    :func:`read_shard_header` when it fails); a shard that fails is not cached, so it is reported again on
    the next attempt.
    """

    def __init__(self, shards: Mapping[str, Path], identities: Mapping[Path, tuple[int, int]] | None = None) -> None:
        """``shards`` maps each shard name to its file's path; names of one file must map to equal paths.

        ``identities`` gives each path's ``(st_dev, st_ino)`` as found when the checkpoint was opened (the layout's);
        a path it lacks is taken now. A shard is read only if the file found at its path when it is first read is
        still that file (not replaced, nor swapped for a link to another file meanwhile), and it is read through
        the descriptor that checked it.
        """
        self._paths = shards
        self._identity: dict[Path, tuple[int, int] | None] = {}
        for path in shards.values():
            if identities is not None and path in identities:
                self._identity[path] = identities[path]
                continue
            try:
                st = os.stat(path, follow_symlinks=False)
                self._identity[path] = (st.st_dev, st.st_ino)
            except OSError:
                self._identity[path] = None  # reported when it is read
        self._names: dict[Path, str] = {}  # path -> its first name in ``shards``, for ``opened``
        for name, path in shards.items():
            self._names.setdefault(path, name)
        self._open: dict[Path, OpenShard] = {}
        self._lock = threading.Lock()

    def get(self, shard: str) -> OpenShard:
        """The open handle of ``shard`` (a name from the layout's shard map), opening it on first use."""
        path = self._paths[shard]
        found = self._open.get(path)
        if found is not None:
            return found
        with self._lock:
            found = self._open.get(path)
            if found is None:
                found = self._open_shard(path)
                self._open[path] = found
            return found

    def _open_shard(self, path: Path) -> OpenShard:
        # safe_open checks the whole header (byte ranges in bounds, contiguous, sized by dtype and shape)
        # before mapping the file. When it refuses, read_shard_header says which part is wrong, by key.
        try:
            # O_NONBLOCK: a FIFO put at the path meanwhile opens at once (and fails the identity check) rather than
            # waiting for a writer; it changes nothing for a regular file
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise CheckpointError(f"shard {str(path)!r} is now a symlink; it was a file when the checkpoint was "
                                      "opened, and a link is not followed: open the checkpoint again") from None
            raise CheckpointError(f"cannot read shard {str(path)!r}: {exc.strerror or exc}") from None
        try:
            st = os.fstat(fd)
            if self._identity.get(path) != (st.st_dev, st.st_ino):
                raise CheckpointError(f"shard {str(path)!r} is no longer the file it was when the checkpoint was "
                                      "opened (replaced meanwhile); nothing of it is read: open the checkpoint again")
            through = f"/proc/self/fd/{fd}"  # the file this descriptor checked, whatever the name holds now
            handle = safe_open(through if os.path.exists(through) else os.fspath(path), framework="pt", device="cpu")
        except (SafetensorError, OSError) as exc:
            read_shard_header(path)  # raises a CheckpointError naming the file and the faulty entry
            raise CheckpointError(
                f"shard {str(path)!r} cannot be opened as safetensors: {exc}. Restore it from the "
                "checkpoint's source"
            ) from None
        finally:
            os.close(fd)
        return OpenShard(path, handle, frozenset(handle.keys()))

    @property
    def opened(self) -> tuple[str, ...]:
        """The shard files opened so far, in opening order, each once, by its first name in the shard map."""
        return tuple(self._names[path] for path in self._open)

    def close(self) -> None:
        """Drop every handle; a later read opens (and validates) its shard again."""
        with self._lock:
            self._open.clear()

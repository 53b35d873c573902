"""The disk cache of built libraries: content-addressed, written atomically under a file lock.

An entry is a folder ``<root>/kernels/<base key>-<compiler key>/`` holding the library, its source and
``entry.json`` (what built it). The base key digests the source, the flags, the tvm-ffi version, the
runtime headers and the target; the compiler key digests the compiler's path and executable. A build
happens in a temporary folder beside the entries and is renamed into place, under an exclusive lock on
the key, so a second process, or two at once, never rebuild an entry or see half of one. A process that
has no compiler still loads an entry built for the same source and flags by any compiler.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..runtime.file_lock import exclusive_lock
from ..runtime.resource.prepared import cache_root  # the one place that decides $TILEFOUNDRY_CACHE

ENTRY_FILE = "entry.json"
# The file a folder this cache makes holds from its creation on (a build's, an entry, a precompiled header's):
# the proof that removing it removes nothing of the user's.
MADE_MARK = ".tilefoundry-made"
_KERNELS = "kernels"
# The folder under the kernel cache that holds the precompiled runtime headers (codegen/pch.py).
PCH_FOLDER = "pch"


class DiskCache:
    """Built libraries under ``root/kernels`` (``root`` defaults to :func:`cache_root`)."""

    def __init__(self, root: Path | None = None) -> None:
        self.dir = (root if root is not None else cache_root()) / _KERNELS
        self._reported: set[Path] = set()  # damaged entries already reported

    def entry(self, base_key: str, compiler_key: str) -> Path:
        """The folder of one entry."""
        return self.dir / f"{base_key}-{compiler_key}"

    def find(self, base_key: str, compiler_key: str | None) -> Path | None:
        """A complete, intact entry: the exact one, or (``compiler_key`` None: no compiler here) any for the source.

        An entry whose files differ from what was recorded when it was written (a truncated library: loading it
        would kill the process) is passed over, saying so in one line on stderr; the caller builds it again.
        """
        if compiler_key is not None:
            path = self.entry(base_key, compiler_key)
            return path if (path / ENTRY_FILE).is_file() and self._intact(path) else None
        if not self.dir.is_dir():
            return None
        found = [p for p in self.dir.glob(f"{base_key}-*") if (p / ENTRY_FILE).is_file() and self._intact(p)]
        return max(found, key=lambda p: p.stat().st_mtime) if found else None

    def _intact(self, entry: Path) -> bool:
        """Whether the entry's files have the sizes and digests ``put`` recorded (an entry from before the records
        were kept is taken as it is)."""
        try:
            files = json.loads((entry / ENTRY_FILE).read_text()).get("files")
        except (OSError, ValueError, AttributeError):
            files = None
        if not isinstance(files, dict):
            return True
        for name, want in files.items():
            got = _record(entry / name) if (entry / name).is_file() else None
            if got != want:
                if entry not in self._reported:  # once, though a build looks twice (before and under the lock)
                    self._reported.add(entry)
                    print(f"tilefoundry: the cached {name} in {entry} is not what was built there (truncated or "
                          "changed since); building it again", file=sys.stderr)
                return False
        return True

    @contextmanager
    def locked(self, base_key: str) -> Iterator[None]:
        """Hold the key's exclusive lock (a second builder of the key waits here, then finds the entry)."""
        with exclusive_lock(self.dir / ".locks" / f"{base_key}.lock"):
            yield

    def put(self, base_key: str, compiler_key: str, fill: Callable[[Path], dict]) -> Path:
        """Create an entry: ``fill(tmp)`` writes its files into a fresh folder and returns its metadata.

        Call under :meth:`locked`. The folder is renamed into place only once complete; a failure leaves
        nothing behind.
        """
        final = self.entry(base_key, compiler_key)
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = made_folder(self.dir, f".{base_key[:12]}-")
        try:
            meta = fill(tmp)
            meta["files"] = {f.name: _record(f) for f in sorted(tmp.iterdir()) if f.is_file() and f.name != MADE_MARK}
            (tmp / ENTRY_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
            if final.exists():  # an entry left incomplete by a killed process, or damaged since: replace it
                remove_made(final)
            os.replace(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return final

    @staticmethod
    def metadata(entry: Path) -> dict:
        """What ``put`` recorded for the entry folder ``entry`` (its command, the compiler's diagnostics...)."""
        return json.loads((entry / ENTRY_FILE).read_text())

    def _exists(self) -> bool:
        """True when the cache folder exists; NotADirectoryError when something else holds its name."""
        if self.dir.exists() and not self.dir.is_dir():
            raise NotADirectoryError(f"{self.dir} is not a folder")
        return self.dir.is_dir()

    def entries(self) -> list[Path]:
        """Every complete entry."""
        if not self._exists():
            return []
        return sorted(p for p in self.dir.iterdir() if p.is_dir() and (p / ENTRY_FILE).is_file())

    def info(self) -> dict[str, object]:
        """Where the cache is, how many libraries it holds and their size in bytes."""
        entries = self.entries()
        size = sum(f.stat().st_size for e in entries for f in e.iterdir() if f.is_file())
        return {"path": str(self.dir), "entries": len(entries), "bytes": size}

    def clear(self) -> int:
        """Remove every entry; returns how many went.

        Only what this cache made is removed: entries and precompiled runtime headers (folders holding the mark
        every folder it makes holds, or, made before the mark, the record it wrote), and temporary build folders
        an interrupted build left behind more than an hour ago. A build running right now, the lock files and
        anything else under the folder are left alone; a library already loaded keeps working.
        """
        if not self._exists():
            return 0
        n = 0
        stale = time.time() - 3600
        for p in self.dir.iterdir():
            if p.is_dir() and (p / ENTRY_FILE).is_file() and is_made(p):
                shutil.rmtree(p, ignore_errors=True)
                n += 1
            elif p.is_dir() and p.name.startswith(".") and p.stat().st_mtime < stale and (p / MADE_MARK).is_file():
                shutil.rmtree(p, ignore_errors=True)
        pch = self.dir / PCH_FOLDER  # the precompiled headers (codegen/pch.py), but one being made now
        if pch.is_dir():
            for p in pch.iterdir():
                if not p.name.startswith(".") and p.is_dir() and is_made(p):
                    shutil.rmtree(p, ignore_errors=True)
                elif p.name.endswith(".failed") and p.is_file() and _json_with_command(p):
                    p.unlink(missing_ok=True)
        return n


def made_folder(parent: Path, prefix: str) -> Path:
    """A new folder ``<prefix><random>`` under ``parent`` holding :data:`MADE_MARK` from its creation on."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    (folder / MADE_MARK).write_text("made by tilefoundry's kernel cache\n")
    return folder


def is_made(folder: Path) -> bool:
    """Whether ``folder`` is one this cache made: it holds the mark, or (made before the mark) the JSON record an
    entry or a precompiled header holds, naming the command that built it."""
    return (folder / MADE_MARK).is_file() or any(_json_with_command(folder / n) for n in (ENTRY_FILE, "pch.json"))


def remove_made(folder: Path) -> None:
    """Remove ``folder``, a folder this cache made; one it did not make is refused, naming it."""
    if not is_made(folder):
        raise FileExistsError(f"{folder} is in the kernel cache's way and is not one it made; move it away")
    shutil.rmtree(folder, ignore_errors=True)


def _json_with_command(path: Path) -> bool:
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    return isinstance(record, dict) and "command" in record


def _record(path: Path) -> dict[str, object]:
    """The size and SHA-256 of a file, as an entry records them."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return {"size": path.stat().st_size, "sha256": h.hexdigest()}

"""The disk cache of built libraries: content-addressed, written atomically under a file lock.

An entry is a folder ``<root>/kernels/<base key>-<compiler key>/`` holding the library, its source and
``entry.json`` (what built it). The base key digests the source, the flags, the tvm-ffi version, the
runtime headers and the target; the compiler key digests the compiler's path and executable. A build
happens in a temporary folder beside the entries and is renamed into place, under an exclusive lock on
the key, so a second process, or two at once, never rebuild an entry or see half of one. A process that
has no compiler still loads an entry built for the same source and flags by any compiler.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..runtime.resource.prepared import cache_root  # the one place that decides $TILEFOUNDRY_CACHE

ENTRY_FILE = "entry.json"
_KERNELS = "kernels"
# The folder under the kernel cache that holds the precompiled runtime headers (codegen/pch.py).
PCH_FOLDER = "pch"


class DiskCache:
    """Built libraries under ``root/kernels`` (``root`` defaults to :func:`cache_root`)."""

    def __init__(self, root: Path | None = None) -> None:
        self.dir = (root if root is not None else cache_root()) / _KERNELS

    def entry(self, base_key: str, compiler_key: str) -> Path:
        """The folder of one entry."""
        return self.dir / f"{base_key}-{compiler_key}"

    def find(self, base_key: str, compiler_key: str | None) -> Path | None:
        """A complete entry: the exact one, or (``compiler_key`` None: no compiler here) any for the source."""
        if compiler_key is not None:
            path = self.entry(base_key, compiler_key)
            return path if (path / ENTRY_FILE).is_file() else None
        if not self.dir.is_dir():
            return None
        found = [p for p in self.dir.glob(f"{base_key}-*") if (p / ENTRY_FILE).is_file()]
        return max(found, key=lambda p: p.stat().st_mtime) if found else None

    @contextmanager
    def locked(self, base_key: str) -> Iterator[None]:
        """Hold the key's exclusive lock (a second builder of the key waits here, then finds the entry)."""
        locks = self.dir / ".locks"
        locks.mkdir(parents=True, exist_ok=True)
        with open(locks / f"{base_key}.lock", "a+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def put(self, base_key: str, compiler_key: str, fill: Callable[[Path], dict]) -> Path:
        """Create an entry: ``fill(tmp)`` writes its files into a fresh folder and returns its metadata.

        Call under :meth:`locked`. The folder is renamed into place only once complete; a failure leaves
        nothing behind.
        """
        final = self.entry(base_key, compiler_key)
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{base_key[:12]}-", dir=self.dir))
        try:
            meta = fill(tmp)
            (tmp / ENTRY_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
            if final.exists():  # an entry left incomplete by a process killed mid-rename: replace it
                shutil.rmtree(final)
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

        Only entries are removed (folders holding ``entry.json``) and the precompiled runtime headers, plus
        temporary build folders an interrupted build left behind more than an hour ago. A build running right
        now, the lock files and anything else under the folder are left alone; a library already loaded keeps
        working.
        """
        if not self._exists():
            return 0
        n = 0
        stale = time.time() - 3600
        for p in self.dir.iterdir():
            if p.is_dir() and (p / ENTRY_FILE).is_file():
                shutil.rmtree(p, ignore_errors=True)
                n += 1
            elif p.is_dir() and p.name.startswith(".") and p.name != ".locks" and p.stat().st_mtime < stale:
                shutil.rmtree(p, ignore_errors=True)
        pch = self.dir / PCH_FOLDER  # the precompiled headers (codegen/pch.py), but one being made now
        if pch.is_dir():
            for p in pch.iterdir():
                if not p.name.startswith("."):
                    shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
        return n

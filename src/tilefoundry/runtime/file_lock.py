"""``exclusive_lock(path)``: a lock file several processes take in turn (``flock``), for work one of them does once
(a kernel build, an automatic prepare) while the others wait, then find its result."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path

__all__ = ["exclusive_lock"]


@contextlib.contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    """Hold the exclusive lock of the file ``path`` (made, with its folder, when missing; never removed: removing a
    lock file another process waits on would let a third take a new one at once) for the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)

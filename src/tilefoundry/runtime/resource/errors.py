"""Exception types raised by the weight resources.

Two failures are distinguished because callers react to them differently:

* :class:`WeightNotFoundError` (a :class:`KeyError`): the resource is sound, but it holds no tensor under
  the requested name. The message names the requested name, the raw key it resolved to, and where it was
  looked for (the checkpoint directory, or the in-memory mapping), with near matches when there are any.
* :class:`CheckpointError` (a :class:`ValueError`): the checkpoint on disk is itself unusable -- an index
  that is not JSON or names a shard outside the checkpoint folder, a missing or truncated shard, a corrupt
  shard header, an index entry pointing at a shard that does not hold the key. The message names the file
  (and the key, where one is involved).
* :class:`UnreadTensorsError` (a CheckpointError): the checkpoint holds tensors no declared weight read,
  so the model built from its config is not the model the checkpoint stores (too few layers or experts).
  The message names the first few keys and their count, and the way to accept them.

Neither is raised after writing anything: resources only ever read.
"""

from __future__ import annotations

__all__ = ["CheckpointError", "CheckpointNotFoundError", "UnreadTensorsError", "WeightNotFoundError"]


class CheckpointError(ValueError):
    """A checkpoint directory, index or shard file is malformed; the message names the file at fault."""


class CheckpointNotFoundError(CheckpointError, FileNotFoundError):
    """The folder holds no checkpoint (neither an index nor ``model.safetensors``): a CheckpointError, and a
    FileNotFoundError, as the reference implementation raises there, so either ``except`` clause catches it."""


class UnreadTensorsError(CheckpointError):
    """The checkpoint holds tensors that no declared weight reads; ``keys`` lists them all, sorted."""

    def __init__(self, message: str, *, keys: list[str]) -> None:
        super().__init__(message)
        self.keys = keys


class WeightNotFoundError(KeyError):
    """No tensor is stored under the requested name.

    A :class:`KeyError`, so ``except KeyError`` keeps working; unlike a plain KeyError its ``str`` is the
    readable message rather than the quoted repr of it.
    """

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.key = key  # the raw key looked for

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[type[WeightNotFoundError], tuple[str], dict[str, object]]:
        return (type(self), (self.message,), {"key": self.key})

"""Where a tensor lives: host memory, or one of the GPU's global / shared / register spaces."""

from __future__ import annotations

from enum import Enum


class Storage(str, Enum):
    """Storage kind of a tensor. ``gmem`` is the default for kernel parameters."""

    host = "host"
    gmem = "gmem"
    smem = "smem"
    rmem = "rmem"

    def __str__(self) -> str:
        return self.value


def storage_of(spec: str | Storage) -> Storage:
    """Resolve a storage spelling; ValueError lists the valid kinds."""
    if isinstance(spec, Storage):
        return spec
    try:
        return Storage(spec)
    except ValueError:
        valid = ", ".join(s.value for s in Storage)
        raise ValueError(f"unknown storage {spec!r}; valid: {valid}") from None

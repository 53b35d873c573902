"""``SafetensorsResource``: reads weights from a safetensors checkpoint folder, sharded or not."""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError

from .alias import AliasValue, validate_alias_table
from .checkpoint_index import SINGLE_NAME, CheckpointLayout, read_checkpoint_layout
from .device import resolve_device
from .errors import CheckpointError, WeightNotFoundError
from .scoped import ReadRequest, ScopedResource, check_slice
from .shard_file import ShardPool

__all__ = ["SafetensorsResource"]


@dataclass(frozen=True)
class _Checkpoint:
    """What every view of one SafetensorsResource shares: the layout, the handle pool, the device."""

    layout: CheckpointLayout
    pool: ShardPool
    device: torch.device


def _near(key: str, keys: Iterable[str]) -> str:
    near = difflib.get_close_matches(key, list(keys), n=3)
    return f"; close matches: {', '.join(map(repr, near))}" if near else ""


class SafetensorsResource(ScopedResource):
    """A resource over a safetensors checkpoint folder.

    The folder holds either ``model.safetensors.index.json`` plus the shards its ``weight_map`` names, or
    one ``model.safetensors``. The layout (index JSON, shard names relative to the folder, each a regular file or
    a symlink to one, wherever it points) is checked here, at construction; a shard's header is checked when the
    shard is first opened, and only the file its name resolved to at construction is read. Each shard file
    is opened at most once, lazily, however many ways the index spells it (``./s.safetensors``, a symlink or
    hard link), and the handle is shared by every ``subtree`` view. Reads fetch only the
    requested tensor, keep its stored element type, and place it on ``device``.

    Args:
        ckpt_dir: the checkpoint folder.
        prefix: raw prefix of this view (``"model"`` and ``"model."`` are the same scope).
        device: where read tensors are placed; checked up front (``torch.device`` must know it and it must
            hold a tensor on this machine).
        alias: ``{canonical: raw}`` table (see :mod:`tilefoundry.runtime.resource.alias`).

    Raises:
        FileNotFoundError / NotADirectoryError: ``ckpt_dir`` is missing or not a folder.
        CheckpointError: the folder holds neither layout, or its index is malformed or names a shard by an
            absolute path or through ``..``, a missing shard, or one that is (or links to) a folder, a FIFO, a
            device or nothing; later, a shard that is corrupt, replaced since construction, or does not hold a
            key its index maps to it.
        ValueError: an unknown or unavailable ``device``.
        KeyError (WeightNotFoundError): from ``load`` / ``load_group``, for a key the checkpoint lacks.

    A resource only ever reads: no failure changes a file.
    """

    def __init__(
        self,
        ckpt_dir: str | os.PathLike[str],
        prefix: str = "",
        device: str = "cuda",
        alias: Mapping[str, AliasValue] | None = None,
    ) -> None:
        resolved_device = resolve_device(device)
        table = validate_alias_table(alias)
        layout = read_checkpoint_layout(ckpt_dir)
        super().__init__(prefix, table)
        self._ckpt = _Checkpoint(layout, ShardPool(layout.shards, layout.identities), resolved_device)

    def _scoped(self, prefix: str) -> SafetensorsResource:
        view = object.__new__(SafetensorsResource)
        ScopedResource.__init__(view, prefix, self._alias, self._reads)
        view._ckpt = self._ckpt
        return view

    def raw_keys(self) -> frozenset[str]:
        """Every key of the checkpoint: the index's weight map, or the single file's header (opening it)."""
        layout = self._ckpt.layout
        if layout.weight_map is not None:
            return frozenset(layout.weight_map)
        return self._ckpt.pool.get(SINGLE_NAME).keys

    def describe(self) -> str:
        """``checkpoint '<dir>' (index ...)`` or ``checkpoint '<dir>' (model.safetensors)``."""
        return f"checkpoint {self._ckpt.layout.describe()}"

    def files(self) -> tuple[Path, ...]:
        """The checkpoint folder, its index (if any) and every shard file, symlinks resolved."""
        layout = self._ckpt.layout
        index = (layout.index_path,) if layout.index_path is not None else ()
        return (layout.root, *index, *dict.fromkeys(layout.shards.values()))

    @property
    def ckpt_dir(self) -> Path:
        """The checkpoint folder (symlinks resolved)."""
        return self._ckpt.layout.root

    @property
    def device(self) -> torch.device:
        """Where read tensors are placed."""
        return self._ckpt.device

    @property
    def layout(self) -> CheckpointLayout:
        """The validated checkpoint layout (index, weight map, shard paths)."""
        return self._ckpt.layout

    @property
    def opened_shards(self) -> tuple[str, ...]:
        """The shard files opened so far (by any view sharing this checkpoint), each once.

        A file is named by the index's first spelling of it.
        """
        return self._ckpt.pool.opened

    def close(self) -> None:
        """Drop the shard handles of every view of this checkpoint; a later read reopens lazily.

        Tensors already read stay valid.
        """
        self._ckpt.pool.close()

    def _read(self, key: str, request: ReadRequest) -> torch.Tensor:
        shard = self._shard_of(key, request)
        try:
            tensor = shard.handle.get_tensor(key)
        except SafetensorError as exc:
            raise CheckpointError(
                f"reading {key!r} from shard {os.fspath(shard.path)!r} failed: {exc}; restore the shard "
                "from the checkpoint's source"
            ) from None
        return self._placed(tensor)

    def _read_slice(self, key: str, request: ReadRequest, dim: int, start: int, stop: int) -> torch.Tensor:
        """Only the slice's bytes, through safetensors' ``get_slice``."""
        shard = self._shard_of(key, request)
        try:
            part = shard.handle.get_slice(key)
            shape = tuple(part.get_shape())
            check_slice(shape, request.name, dim, start, stop)
            tensor = part[(slice(None),) * dim + (slice(start, stop),)]
        except SafetensorError as exc:
            raise CheckpointError(
                f"reading a slice of {key!r} from shard {os.fspath(shard.path)!r} failed: {exc}; restore the shard "
                "from the checkpoint's source"
            ) from None
        return self._placed(tensor.contiguous())

    def _shape(self, key: str, request: ReadRequest) -> tuple[int, ...]:
        """From the shard's header."""
        shard = self._shard_of(key, request)
        try:
            return tuple(shard.handle.get_slice(key).get_shape())
        except SafetensorError as exc:
            raise CheckpointError(f"reading the shape of {key!r} from shard {os.fspath(shard.path)!r} failed: {exc}; "
                                  "restore the shard from the checkpoint's source") from None

    def _placed(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor if tensor.device == self._ckpt.device else tensor.to(self._ckpt.device)

    def _shard_of(self, key: str, request: ReadRequest):  # noqa: ANN202 - the pool's opened shard
        """The opened shard holding the raw key ``key`` (WeightNotFoundError / CheckpointError if none)."""
        layout = self._ckpt.layout
        if layout.weight_map is not None:
            shard_name = layout.weight_map.get(key)
            if shard_name is None:
                raise WeightNotFoundError(
                    f"no weight {key!r} in checkpoint {layout.describe()} ({request.describe()})"
                    f"{_near(key, layout.weight_map)}. Check the name, or add an alias entry mapping "
                    f"{request.name!r} to the stored name",
                    key=key,
                )
            shard = self._ckpt.pool.get(shard_name)
            if key not in shard.keys:
                raise CheckpointError(
                    f"{layout.index_path.name if layout.index_path else 'the index'} in {str(layout.root)!r} "
                    f"maps {key!r} to shard {shard_name!r}, but that shard does not hold it; the index and "
                    "the shards disagree: restore the checkpoint from its source"
                )
        else:
            shard = self._ckpt.pool.get(SINGLE_NAME)
            if key not in shard.keys:
                raise WeightNotFoundError(
                    f"no weight {key!r} in checkpoint {layout.describe()} ({request.describe()})"
                    f"{_near(key, shard.keys)}. Check the name, or add an alias entry mapping "
                    f"{request.name!r} to the stored name",
                    key=key,
                )
        return shard

    def __repr__(self) -> str:
        return (
            f"SafetensorsResource({str(self._ckpt.layout.root)!r}, prefix={self._prefix!r}, "
            f"device={str(self._ckpt.device)!r}, {len(self._alias)} alias entries)"
        )

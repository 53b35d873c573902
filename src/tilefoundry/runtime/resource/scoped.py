"""``ScopedResource``: the alias-resolving ``load`` / ``load_group`` / ``subtree`` every resource shares.

Concrete resources only say how to read one raw key (:meth:`ScopedResource._read`), how to make a view
under another prefix (:meth:`ScopedResource._scoped`), which raw keys they hold (:meth:`raw_keys`) and how
to name themselves in a message (:meth:`describe`); the naming rules live here once.

Every view of one resource shares a log of the raw keys read through any of them, so that after a whole
Module tree was read (``load``, ``prepare``) :meth:`ScopedResource.refuse_unread` can name the tensors that
nothing read: a checkpoint holding more layers or experts than the config declares.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TypeVar

import torch

from .alias import AliasValue, Preprocessed, join_key, lookup_alias, normalize_prefix
from .errors import UnreadTensorsError

__all__ = ["ReadRequest", "ScopedResource", "check_slice"]

_Self = TypeVar("_Self", bound="ScopedResource")


@dataclass(frozen=True)
class ReadRequest:
    """How a raw key was reached: the requested name, the scope, and the alias entry that fired (if any).

    Concrete resources put :meth:`describe` into their error messages.
    """

    name: str
    prefix: str
    alias_key: str | None = None

    def describe(self) -> str:
        """A short phrase such as ``requested as 'w' under prefix 'layer0.' via alias 'w'``."""
        text = f"requested as {self.name!r}"
        if self.prefix:
            text += f" under prefix {self.prefix!r}"
        if self.alias_key is not None:
            text += f" via alias {self.alias_key!r}"
        return text


def _check_name(name: object, what: str) -> str:
    if not isinstance(name, str):
        raise TypeError(f"{what} takes a weight name (str), got {type(name).__name__}")
    if not name:
        raise ValueError(f"{what} takes a non-empty weight name, got ''")
    return name


def check_slice(shape: tuple[int, ...], name: str, dim: int, start: int, stop: int) -> None:
    """Refuse a slice ``[start, stop)`` along ``dim`` that does not lie inside ``shape``, naming the weight."""
    if not 0 <= dim < len(shape) or not 0 <= start < stop <= shape[dim]:
        raise ValueError(f"load_slice({name!r}, dim={dim}, [{start}, {stop})): the tensor has shape "
                         f"{tuple(shape)}; the slice must be a non-empty range of one of its axes")


def _narrow(tensor: torch.Tensor, name: str, dim: int, start: int, stop: int) -> torch.Tensor:
    check_slice(tuple(tensor.shape), name, dim, start, stop)
    return tensor.narrow(dim, start, stop - start).clone()


class ScopedResource(ABC):
    """Base of the concrete resources: a prefix, an alias table carried down to every view, and the rules.

    Subclasses implement :meth:`_read`, :meth:`_scoped`, :meth:`raw_keys` and :meth:`describe`.
    """

    _prefix: str
    _alias: Mapping[str, AliasValue]
    _reads: set[str]

    def __init__(self, prefix: str, alias: Mapping[str, AliasValue], reads: set[str] | None = None) -> None:
        """``reads`` is the read log a view shares with the resource it was made from (a new one when None)."""
        self._prefix = normalize_prefix(prefix)
        self._alias = alias
        self._reads = set() if reads is None else reads

    @property
    def prefix(self) -> str:
        """The accumulated raw prefix of this view (empty, or ending in ``"."``)."""
        return self._prefix

    @property
    def alias(self) -> Mapping[str, AliasValue]:
        """The read-only alias table shared by this view and all views derived from it."""
        return self._alias

    @abstractmethod
    def _read(self, key: str, request: ReadRequest) -> torch.Tensor:
        """Read the raw key ``key``; raise WeightNotFoundError naming it when absent."""

    @abstractmethod
    def _scoped(self: _Self, prefix: str) -> _Self:
        """A view of the same data under ``prefix`` (already normalized), sharing the alias table and read log."""

    @abstractmethod
    def raw_keys(self) -> frozenset[str]:
        """Every raw key the underlying data holds, whatever this view's prefix."""

    @abstractmethod
    def describe(self) -> str:
        """The data this resource reads, for messages (``checkpoint '/m' (model.safetensors)``)."""

    def files(self) -> tuple[Path, ...]:
        """The folder and files this resource reads from (none for in-memory data)."""
        return ()

    @property
    def read_keys(self) -> frozenset[str]:
        """The raw keys read so far through this resource or any view sharing its data."""
        return frozenset(self._reads)

    def unread_keys(self, allowed: Iterable[str] = ()) -> list[str]:
        """Raw keys no read reached so far, sorted, except those matching a glob pattern of ``allowed``."""
        patterns = tuple(allowed)
        return sorted(k for k in self.raw_keys() - self._reads if not any(fnmatchcase(k, p) for p in patterns))

    def refuse_unread(self, allowed: Iterable[str] = ()) -> None:
        """Raise UnreadTensorsError naming the raw tensors nothing read (see :meth:`unread_keys`).

        Call it after a whole Module tree was read from this resource: a tensor nothing read means the
        Module is not the model the checkpoint stores.
        """
        unread = self.unread_keys(allowed)
        if not unread:
            return
        shown = ", ".join(repr(k) for k in unread[:5]) + (", ..." if len(unread) > 5 else "")
        raise UnreadTensorsError(
            f"{self.describe()} holds {len(unread)} tensor{'s' if len(unread) != 1 else ''} that no declared "
            f"weight reads: {shown}. The config declares fewer layers or experts than the checkpoint holds, or "
            "the checkpoint belongs to another model: fix config.json, or accept the extra tensors with "
            "allow_unused=True (on the command line: --allow-unused)",
            keys=unread,
        )

    def _fetch(self, key: str, request: ReadRequest) -> torch.Tensor:
        """Read the raw key ``key`` and log it as read."""
        tensor = self._read(key, request)
        self._reads.add(key)
        return tensor

    def load(self, name: str) -> torch.Tensor:
        """Return the tensor ``name`` resolves to in this scope, in its stored element type.

        Raises KeyError (WeightNotFoundError) when absent, and TypeError naming ``load_group`` when
        ``name`` is a one-to-many (tuple-valued) alias.
        """
        name = _check_name(name, "load")
        stored = self._stored(name)
        if stored is not None:
            return self._fetch(*stored)
        hit = lookup_alias(self._alias, self._prefix, name)
        assert hit is not None and isinstance(hit.value, Preprocessed)
        raw = self._fetch(join_key(self._prefix, hit.value.name), ReadRequest(name, self._prefix, hit.key))
        return self._apply(hit.value, raw, name, hit.key)

    def _stored(self, name: str) -> tuple[str, ReadRequest] | None:
        """The raw key ``name`` reads as it is stored (no alias, or a one-to-one alias) and how it was reached; None
        for a Preprocessed alias (its raw tensor read, then changed). A one-to-many alias is a TypeError naming
        ``load_group``."""
        prefix = self._prefix
        hit = lookup_alias(self._alias, prefix, name)
        if hit is None:
            return f"{prefix}{name}", ReadRequest(name, prefix)
        value = hit.value
        if isinstance(value, tuple):
            raise TypeError(
                f"{name!r} (alias {hit.key!r}) is a one-to-many group of {len(value)} raw tensors "
                f"{value!r}; read it with load_group({name!r}), which returns them in declared order"
            )
        if isinstance(value, Preprocessed):
            return None
        return join_key(prefix, value), ReadRequest(name, prefix, hit.key)

    def load_slice(self, name: str, dim: int, start: int, stop: int) -> torch.Tensor:
        """Return indices ``[start, stop)`` along axis ``dim`` of the tensor ``name`` resolves to, reading only
        those bytes where the storage allows it (a safetensors file: ``get_slice``). A tensor-parallel rank reads
        its slice of one checkpoint so.

        A Preprocessed alias reads its whole raw tensor, applies its read, then slices the result.

        Raises KeyError (WeightNotFoundError) when absent, TypeError for a one-to-many alias (as ``load``), and
        ValueError when ``dim`` or ``[start, stop)`` lies outside the tensor's shape.
        """
        name = _check_name(name, "load_slice")
        stored = self._stored(name)
        if stored is None:
            return _narrow(self.load(name), name, dim, start, stop)
        key, request = stored
        tensor = self._read_slice(key, request, dim, start, stop)
        self._reads.add(key)
        return tensor

    def shape_of(self, name: str) -> tuple[int, ...]:
        """The shape of the tensor ``name`` resolves to (as ``load`` would return it), reading no more than the
        storage needs to tell (a safetensors file: its header)."""
        name = _check_name(name, "shape_of")
        stored = self._stored(name)
        return tuple(self.load(name).shape) if stored is None else self._shape(*stored)

    def _shape(self, key: str, request: ReadRequest) -> tuple[int, ...]:
        """The raw key's shape: here from the tensor read; a resource that can tell without reading overrides it."""
        return tuple(self._read(key, request).shape)

    def _read_slice(self, key: str, request: ReadRequest, dim: int, start: int, stop: int) -> torch.Tensor:
        """Read ``[start, stop)`` along ``dim`` of the raw key ``key``: here the whole tensor, then its slice (a copy
        of its own); a resource that can read less overrides it."""
        return _narrow(self._read(key, request), request.name, dim, start, stop)

    def load_group(self, name: str) -> tuple[torch.Tensor, ...] | None:
        """Return the raw tensors of the one-to-many alias ``name`` in declared order, never stacked.

        Returns None when ``name`` has no tuple-valued alias (the one-to-one case, an Absolute or a
        Preprocessed entry included); ``load`` reads those.
        """
        name = _check_name(name, "load_group")
        prefix = self._prefix
        hit = lookup_alias(self._alias, prefix, name)
        if hit is None or not isinstance(hit.value, tuple):
            return None
        request = ReadRequest(name, prefix, hit.key)
        return tuple(self._fetch(f"{prefix}{member}", request) for member in hit.value)

    def subtree(self: _Self, seg: str) -> _Self:
        """Return a view scoped one path segment deeper; ``seg`` is alias-resolved to one relative path.

        Raises TypeError when ``seg`` hits a tuple-valued, Preprocessed or Absolute alias: a subtree
        segment must resolve to one relative name.
        """
        seg = _check_name(seg, "subtree")
        hit = lookup_alias(self._alias, self._prefix, seg)
        if hit is None:
            relative = seg
        elif isinstance(hit.value, str):
            relative = hit.value
        else:
            if isinstance(hit.value, tuple):
                kind = "a tuple (one-to-many group)"
            elif isinstance(hit.value, Preprocessed):
                kind = "a Preprocessed leaf"
            else:
                kind = "an Absolute leaf"
            raise TypeError(
                f"subtree({seg!r}): alias {hit.key!r} maps it to {kind} {hit.value!r}, but a subtree segment "
                "must resolve to one relative path; map the segment to a str (e.g. 'model.layers.0'), and "
                "keep tuple / Preprocessed / Absolute entries for the weights inside it"
            )
        return self._scoped(f"{self._prefix}{relative}.")

    @staticmethod
    def _apply(entry: Preprocessed, raw: torch.Tensor, name: str, alias_key: str) -> torch.Tensor:
        out = entry.read(raw)
        if not isinstance(out, torch.Tensor):
            raise TypeError(
                f"Preprocessed read for {name!r} (alias {alias_key!r}) returned {type(out).__name__}, "
                "not a torch.Tensor"
            )
        if out.dtype != raw.dtype:
            raise TypeError(
                f"Preprocessed read for {name!r} (alias {alias_key!r}) changed the element type from "
                f"{raw.dtype} to {out.dtype}; a read keeps the checkpoint's stored type. Change precision "
                'with a weight converter (@<func>.converter("<weight>")) instead'
            )
        if out.device != raw.device:
            raise TypeError(
                f"Preprocessed read for {name!r} (alias {alias_key!r}) moved the tensor from {raw.device} to "
                f"{out.device}; choose the device with the resource's device argument instead"
            )
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}(prefix={self._prefix!r}, {len(self._alias)} alias entries)"

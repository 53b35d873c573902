"""``DictResource``: an in-memory resource (and test double) over a flat ``{"layer0.w": tensor}`` mapping."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from types import MappingProxyType

import torch

from .alias import AliasValue, validate_alias_table
from .errors import WeightNotFoundError
from .scoped import ReadRequest, ScopedResource

__all__ = ["DictResource"]


class DictResource(ScopedResource):
    """A resource over a flat, dot-prefixed mapping of raw keys to tensors.

    Tensors are returned as stored (same object, element type and device). ``subtree`` only extends the
    prefix names are joined onto; every view shares the mapping and the alias table.

    Args:
        data: raw key -> tensor, e.g. ``{"layer0.w": t}``; copied shallowly at construction.
        prefix: the raw prefix of this view (``"model"`` and ``"model."`` are the same scope).
        alias: ``{canonical: raw}`` table (see :mod:`tilefoundry.runtime.resource.alias`).
    """

    def __init__(
        self,
        data: Mapping[str, torch.Tensor],
        prefix: str = "",
        alias: Mapping[str, AliasValue] | None = None,
    ) -> None:
        if not isinstance(data, Mapping):
            raise TypeError(
                f"DictResource takes a mapping of raw key -> torch.Tensor, got {type(data).__name__}"
            )
        for key, value in data.items():
            if not isinstance(key, str):
                raise TypeError(f"DictResource keys are raw names (str), got {key!r}")
            if not isinstance(value, torch.Tensor):
                raise TypeError(f"DictResource[{key!r}] is a {type(value).__name__}, not a torch.Tensor")
        super().__init__(prefix, validate_alias_table(alias))
        self._data: Mapping[str, torch.Tensor] = MappingProxyType(dict(data))

    def _scoped(self, prefix: str) -> DictResource:
        view = object.__new__(DictResource)
        ScopedResource.__init__(view, prefix, self._alias, self._reads)
        view._data = self._data
        return view

    def raw_keys(self) -> frozenset[str]:
        """Every key of the mapping."""
        return frozenset(self._data)

    def describe(self) -> str:
        """``this DictResource (N tensors)``."""
        return f"this DictResource ({len(self._data)} tensors)"

    def _read(self, key: str, request: ReadRequest) -> torch.Tensor:
        try:
            return self._data[key]
        except KeyError:
            pass
        near = difflib.get_close_matches(key, list(self._data), n=3)
        hint = f"; close matches: {', '.join(map(repr, near))}" if near else ""
        raise WeightNotFoundError(
            f"no tensor {key!r} in this DictResource ({request.describe()}; it holds {len(self._data)} keys)"
            f"{hint}. Add the key, or an alias entry mapping {request.name!r} to the stored name",
            key=key,
        ) from None

    def __repr__(self) -> str:
        return (
            f"DictResource({len(self._data)} tensors, prefix={self._prefix!r}, "
            f"{len(self._alias)} alias entries)"
        )

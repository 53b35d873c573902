"""Checkpoint aliases: the ``{canonical: raw}`` table every resource takes, and its lookup rule.

A resource addresses tensors by *raw key* (the name the checkpoint stores) while a Module asks for its
weights by *canonical name* (its own bare weight and child names). An alias table bridges the two, one
path segment or leaf at a time, always relative to the prefix the caller has already accumulated:

* ``str``            -- a relative raw name, joined onto the prefix (``{"gamma_kv": "kv_norm.weight"}``);
* ``tuple[str, ...]``-- a one-to-many group (per-expert shards, ...), each member joined onto the prefix,
  read by ``load_group`` in declared order and never stacked by the resource;
* :class:`Absolute`  -- a whole raw key, with no prefix joined onto it (reaches a tensor a parent owns);
* :class:`Preprocessed` -- one raw name plus a one-tensor read transform (transpose, slice, dropped axis).

Lookup order for ``name`` under ``prefix`` (see :func:`lookup_alias`): the path-qualified key
``f"{prefix}{name}"`` first, then the bare ``name``, then identity (the raw key ``f"{prefix}{name}"``).
The prefix is the accumulated *raw* prefix -- the resolved segments joined with dots, ending in a dot --
so a path-qualified alias key spells the parent path as the checkpoint does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TypeAlias

import torch

__all__ = [
    "Absolute",
    "AliasHit",
    "AliasValue",
    "Preprocessed",
    "join_key",
    "lookup_alias",
    "normalize_prefix",
    "validate_alias_table",
]


@dataclass(frozen=True)
class Absolute:
    """An alias value naming a whole raw checkpoint key, with no prefix joined onto it.

    It is how a node reaches a tensor stored at or above its parent's level. It is a leaf-only form:
    ``load`` reads it, ``load_group`` treats it as the one-to-one case (returns None), and ``subtree``
    refuses it.
    """

    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"Absolute(name) takes a non-empty raw checkpoint key (a str), got {self.name!r}")


@dataclass(frozen=True)
class Preprocessed:
    """An alias value naming one raw tensor and the one-tensor transform ``read`` applied when it is loaded.

    Use it only where the checkpoint stores one tensor differently from how the Module declares it (a
    transpose, a slice of a fused tensor, a dropped axis). ``read`` must keep the stored element type and
    device; anything computed from more than one raw tensor, or a change of precision, is a weight converter's
    job (``@<func>.converter("<weight>")``), not the resource's.
    """

    name: str | Absolute
    read: Callable[[torch.Tensor], torch.Tensor]

    def __post_init__(self) -> None:
        if isinstance(self.name, tuple):
            raise TypeError(
                f"Preprocessed(name={self.name!r}) names several raw tensors; Preprocessed reads exactly "
                "one. "
                "A value computed from several raw tensors is a weight converter's job: register "
                '@<func>.converter("<weight>") taking those raw names as parameters.'
            )
        if not isinstance(self.name, (str, Absolute)) or (isinstance(self.name, str) and not self.name):
            raise TypeError(
                f"Preprocessed(name=...) takes a non-empty raw name (str) or an Absolute, got {self.name!r}"
            )
        if not callable(self.read):
            raise TypeError(
                f"Preprocessed(read=...) takes a callable Tensor -> Tensor, got {type(self.read).__name__}"
            )


AliasValue: TypeAlias = str | tuple[str, ...] | Absolute | Preprocessed
"""What an alias table maps a canonical name to (see the module docstring)."""


@dataclass(frozen=True)
class AliasHit:
    """The alias entry that fired for a lookup: the table key that matched, and its value."""

    key: str
    value: AliasValue


def normalize_prefix(prefix: str) -> str:
    """Return ``prefix`` ready for ``f"{prefix}{name}"``: empty, or ending in exactly one ``"."``.

    ``"model"`` and ``"model."`` therefore name the same scope.
    """
    if not isinstance(prefix, str):
        raise TypeError(f"prefix must be a str such as 'model.' (or ''), got {type(prefix).__name__}")
    if prefix and not prefix.endswith("."):
        prefix += "."
    return prefix


def join_key(prefix: str, target: str | Absolute) -> str:
    """The raw key an alias target names under ``prefix``: ``Absolute`` ignores the prefix, a str joins it."""
    if isinstance(target, Absolute):
        return target.name
    return f"{prefix}{target}"


def _check_value(key: str, value: object) -> None:
    if isinstance(value, (Absolute, Preprocessed)):
        return
    if isinstance(value, str):
        if not value:
            raise ValueError(f"alias {key!r} maps to an empty name; map it to the raw checkpoint name")
        return
    if isinstance(value, tuple):
        if not value:
            raise ValueError(f"alias {key!r} maps to an empty tuple; a group needs at least one raw name")
        for member in value:
            if not isinstance(member, str) or not member:
                raise TypeError(
                    f"alias {key!r}: every member of a group must be a non-empty raw name (str), "
                    f"got {member!r}"
                )
        return
    hint = " (use a tuple for a one-to-many group)" if isinstance(value, list) else ""
    raise TypeError(
        f"alias {key!r} maps to {value!r} of type {type(value).__name__}; an alias value is a str, a tuple "
        f"of str, an Absolute or a Preprocessed{hint}"
    )


def validate_alias_table(alias: Mapping[str, AliasValue] | None) -> Mapping[str, AliasValue]:
    """Check an alias table's keys and values and return a read-only copy of it (empty for None)."""
    if alias is None:
        return MappingProxyType({})
    if not isinstance(alias, Mapping):
        raise TypeError(f"alias must be a mapping {{canonical: raw}}, got {type(alias).__name__}")
    table: dict[str, AliasValue] = {}
    for key, value in alias.items():
        if not isinstance(key, str) or not key:
            raise TypeError(f"alias keys are non-empty canonical names (str), got {key!r}")
        _check_value(key, value)
        table[key] = value
    return MappingProxyType(table)


def lookup_alias(alias: Mapping[str, AliasValue], prefix: str, name: str) -> AliasHit | None:
    """Find the alias entry for ``name`` under ``prefix``, or None when identity applies.

    The path-qualified key ``f"{prefix}{name}"`` wins over the bare ``name``; with neither present the
    caller uses identity, i.e. the raw key ``f"{prefix}{name}"``.
    """
    qualified = f"{prefix}{name}"
    if qualified in alias:
        return AliasHit(qualified, alias[qualified])
    if name in alias:
        return AliasHit(name, alias[name])
    return None

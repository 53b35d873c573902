"""Placement vocabulary: topology levels, shard attributes and mesh descriptions.

These are metadata for lowering and codegen; they never change a value the evaluator computes.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Topology:
    """One program topology level, e.g. ``Topology("cta", 132)`` or ``Topology("thread", 256)``."""

    name: str
    size: int

    def __post_init__(self) -> None:
        if self.name not in ("cta", "thread"):
            raise ValueError(f"Topology name must be 'cta' or 'thread', got {self.name!r}")
        if not isinstance(self.size, int) or self.size < 1:
            raise ValueError(f"Topology {self.name!r}: size must be a positive int, got {self.size!r}")


@dataclass(frozen=True)
class S:
    """Split along tensor axis ``axis`` across a mesh axis."""

    axis: int


@dataclass(frozen=True)
class B:
    """Broadcast: every instance holds the whole extent."""


@dataclass(frozen=True)
class P:
    """Partial: instances hold partial results still to be combined by ``reduction``."""

    reduction: str = "sum"


@dataclass(frozen=True)
class Dynamic:
    """Data-dependent placement, resolved before use."""


@dataclass(frozen=True)
class MeshAxis:
    """One named axis of a mesh scope (``m.tile`` inside ``with Mesh(...) as m``)."""

    mesh: MeshSpec
    name: str
    extent: int


@dataclass(frozen=True)
class MeshSpec:
    """A mesh: topology names, layout shape and axis names (see ``tilefoundry.dsl.Mesh``)."""

    topologies: tuple[str, ...]
    layout: tuple[int, ...]
    names: tuple[str, ...]

    def __post_init__(self) -> None:
        if len(self.layout) != len(self.names):
            raise ValueError(f"Mesh: layout {self.layout} and names {self.names} differ in length")
        if len(set(self.names)) != len(self.names):
            raise ValueError(f"Mesh: duplicate axis names in {self.names}")
        for t in self.topologies:
            if t not in ("cta", "thread"):
                raise ValueError(f"Mesh: unknown topology {t!r}; valid: 'cta', 'thread'")

    def axis(self, name: str) -> MeshAxis:
        """The named axis; AttributeError lists the axis names."""
        if name not in self.names:
            raise AttributeError(f"mesh has no axis {name!r}; axes: {', '.join(self.names)}")
        return MeshAxis(self, name, self.layout[self.names.index(name)])

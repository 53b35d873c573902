"""Placement vocabulary: topology levels, shard attributes, meshes and shard layouts.

These are metadata for lowering and codegen; they never change a value the evaluator computes.

A tensor axis is split over a mesh axis by writing ``N @ mesh.axis`` where its extent goes, in a
``Tensor[...]`` annotation or in ``tf.reshard``: ``Tensor[(168 @ cta.block, 64), "f32"]``. ``N`` equal to
the mesh axis's extent E splits the axis one element-block per instance; ``N`` a larger multiple of E is
canonicalised to ``(E @ axis, N // E)``: the axis, read row-major, is E blocks of ``N // E`` contiguous
elements, one block per instance. Any other ``N`` is refused, naming both numbers. The placed tensor's
type keeps its global shape (168, 64) and carries the distribution as a :class:`ShardLayout`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Union


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


def validate_topologies(topologies: Any, where: str) -> tuple[Topology, ...] | None:
    """A declared hierarchy: Topology instances with distinct names (None when nothing is declared)."""
    if topologies is None:
        return None
    if isinstance(topologies, Topology) or isinstance(topologies, (str, bytes)) or not isinstance(
            topologies, Sequence):
        raise TypeError(f"{where}: topologies= takes a tuple of Topology, e.g. (Topology('cta', 132), "
                        f"Topology('thread', 256)); got {topologies!r}")
    seen: set[str] = set()
    for t in topologies:
        if not isinstance(t, Topology):
            raise TypeError(f"{where}: topologies= holds {t!r}, not a Topology; write Topology('cta', 132)")
        if t.name in seen:
            raise ValueError(f"{where}: topology {t.name!r} is declared twice in {tuple(topologies)}")
        seen.add(t.name)
    return tuple(topologies)


@dataclass(frozen=True)
class S:
    """Split: a mesh axis walks flat canonical mode ``axis`` of a ShardLayout (row-major flattening)."""

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


ShardAttr = Union[S, B, P, Dynamic]  # noqa: UP007 - a runtime alias


@dataclass(frozen=True)
class MeshAxis:
    """One named axis of a mesh scope (``m.tile`` inside ``with Mesh(...) as m``).

    ``N @ m.tile`` splits a tensor axis of extent N over it (see the module docstring).
    """

    mesh: MeshSpec
    name: str
    extent: int

    def __rmatmul__(self, n: Any) -> Split | tuple[Split, int]:
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"{n!r} @ {self}: the split extent must be a static int (the number of elements "
                            f"along the tensor axis), got {type(n).__name__}")
        e = self.extent
        if n == e:
            return Split(e, self)
        if n > e and n % e == 0:
            return (Split(e, self), n // e)
        raise ValueError(f"{n} @ {self}: mesh axis {self.name} has extent {e}, and {n} is neither {e} nor a "
                         f"multiple of {e} larger than it; a split axis gives each of the {e} instances an "
                         "equal block")

    def __str__(self) -> str:
        return f"{self.name}({self.extent})"


@dataclass(frozen=True)
class Split:
    """One canonical mode of extent ``extent`` split over mesh axis ``axis`` (``extent == axis.extent``)."""

    extent: int
    axis: MeshAxis

    def __str__(self) -> str:
        return f"{self.extent} @ {self.axis.name}"

    __repr__ = __str__


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

    @staticmethod
    def nest(meshes: Sequence[MeshSpec]) -> MeshSpec:
        """The mesh of nested scopes, outermost first: their topologies, axes and names in order."""
        if len(meshes) == 1:
            return meshes[0]
        topos = tuple(t for m in meshes for t in m.topologies)
        if len(set(topos)) != len(topos):
            raise ValueError(f"nested meshes {' / '.join(str(m) for m in meshes)} place one topology level twice")
        return MeshSpec(topos, tuple(e for m in meshes for e in m.layout), tuple(n for m in meshes for n in m.names))

    def groups(self, sizes: dict[str, int] | None = None) -> dict[str, tuple[int, ...]]:
        """Which axes each topology level walks (spec 2.3's rule): from the last topology backwards, trailing
        axes are consumed until their product is that topology's size; the first topology keeps the rest.

        ``sizes`` gives the topology sizes (a declared hierarchy); without it a level after the first
        takes one axis. ValueError names the mesh and the sizes when they do not fit.
        """
        end = len(self.layout)
        out: dict[str, tuple[int, ...]] = {}
        for i in range(len(self.topologies) - 1, 0, -1):
            topo = self.topologies[i]
            want = sizes.get(topo) if sizes else None
            start, product = end, 1
            if want is None:
                start = end - 1 if end > 0 else 0
            else:
                while product != want:
                    if start == 0 or product > want:
                        raise ValueError(f"{self}: no trailing axes multiply to the {topo} size {want} "
                                         f"(extents {self.layout[:end]})")
                    start -= 1
                    product *= self.layout[start]
            out[topo] = tuple(range(start, end))
            end = start
        if self.topologies:
            first = self.topologies[0]
            out[first] = tuple(range(0, end))
            want = sizes.get(first) if sizes else None
            product = 1
            for a in out[first]:
                product *= self.layout[a]
            if want is not None and product != want:
                raise ValueError(f"{self}: the {first} axes {tuple(self.names[a] for a in out[first])} multiply to "
                                 f"{product}, but the {first} size is {want}")
        return out

    def check_fits(self, hierarchy: Sequence[Topology], where: str) -> None:
        """Refuse a mesh using a level the hierarchy does not declare, or whose axes do not fit its sizes."""
        sizes = {t.name: t.size for t in hierarchy}
        for t in self.topologies:
            if t not in sizes:
                raise ValueError(f"{where}: {self} places topology {t!r}, which the hierarchy "
                                 f"{tuple(hierarchy)} does not declare")
        try:
            self.groups(sizes)
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None

    def __str__(self) -> str:
        axes = ", ".join(f"{n}={e}" for n, e in zip(self.names, self.layout))
        return f"Mesh({', '.join(self.topologies)}: {axes})"


Mode = Union[int, Split, tuple]  # noqa: UP007 - a runtime alias: an extent, a split, or row-major sub-modes


@dataclass(frozen=True)
class ShardLayout:
    """How a tensor is spread over a mesh, as the C++ ``tilefoundry::ShardLayout`` holds it (spec 2.4).

    Attributes:
        layout: the canonical layout, one entry per tensor axis: an extent, a :class:`Split`, or a tuple of
            those (the axis read row-major as sub-modes, e.g. ``(Split(4, block), 42)``).
        attrs: one shard attribute per mesh axis (``S(k)`` names the flat mode the axis walks, ``B``, ``P``,
            ``Dynamic``).
        mesh: the mesh the tensor is spread over.
    """

    layout: tuple[Mode, ...]
    attrs: tuple[ShardAttr, ...]
    mesh: MeshSpec

    def __post_init__(self) -> None:
        if len(self.attrs) != len(self.mesh.layout):
            raise ValueError(f"ShardLayout: {len(self.attrs)} shard attributes for {self.mesh}, which has "
                             f"{len(self.mesh.layout)} axes")
        modes = self.modes()
        for m, a in enumerate(self.attrs):
            if isinstance(a, S):
                if not 0 <= a.axis < len(modes):
                    raise ValueError(f"ShardLayout: S({a.axis}) on mesh axis {self.mesh.names[m]}, but the layout has "
                                     f"{len(modes)} modes")
                if modes[a.axis] != self.mesh.layout[m]:
                    raise ValueError(f"ShardLayout: mode {a.axis} has extent {modes[a.axis]}, but mesh axis "
                                     f"{self.mesh.names[m]} splitting it has extent {self.mesh.layout[m]}")

    @classmethod
    def from_shape(cls, entries: Sequence[Any], mesh: MeshSpec | None = None) -> tuple[tuple[Any, ...], ShardLayout]:
        """The global shape and the layout of a shape written with ``N @ mesh.axis`` entries.

        ``mesh`` is the mesh to spread over (the scopes open around a reshard); by default the one mesh
        every split names.
        """
        splits = [m for e in entries for m in _flat(e) if isinstance(m, Split)]
        if mesh is None:
            meshes = list(dict.fromkeys(s.axis.mesh for s in splits))
            mesh = MeshSpec.nest(meshes)
        shape: list[Any] = []
        layout: list[Mode] = []
        for e in entries:
            shape.append(_extent(e))
            layout.append(_split_of(e) if isinstance(e, Split) else e)
        flat = [m for e in layout for m in _flat(e)]
        attrs: list[ShardAttr] = []
        for name in mesh.names:
            k = [i for i, m in enumerate(flat) if isinstance(m, Split) and m.axis.name == name]
            if len(k) > 1:
                raise ValueError(f"mesh axis {name} splits two axes of one tensor ({', '.join(map(str, entries))})")
            attrs.append(S(k[0]) if k else B())
        for s in splits:
            if s.axis.name not in mesh.names:
                raise ValueError(f"{s}: mesh axis {s.axis.name} is not an axis of {mesh}")
        return tuple(shape), cls(tuple(layout), tuple(attrs), mesh)

    def modes(self) -> tuple[Any, ...]:
        """The flat canonical modes' extents, row-major."""
        return tuple(m.extent if isinstance(m, Split) else m for e in self.layout for m in _flat(e))

    def axis_modes(self) -> tuple[tuple[int, ...], ...]:
        """For each tensor axis, the indices of its flat modes."""
        out, k = [], 0
        for e in self.layout:
            n = len(_flat(e))
            out.append(tuple(range(k, k + n)))
            k += n
        return tuple(out)

    def split_of(self, mode: int) -> int | None:
        """The mesh axis splitting flat mode ``mode`` (None: not split)."""
        for m, a in enumerate(self.attrs):
            if isinstance(a, S) and a.axis == mode:
                return m
        return None

    def reduce(self, axes: Sequence[int], keepdim: bool) -> ShardLayout:
        """The layout of a reduction's result: each reduced axis becomes one mode of extent 1 (or goes, without
        keepdim), and a mesh axis that split a reduced axis becomes a broadcast (every instance holds the result).
        """
        old = self.axis_modes()
        layout: list[Mode] = []
        renumber: dict[int, int] = {}
        for a, e in enumerate(self.layout):
            if a in axes:
                if keepdim:
                    layout.append(1)
                continue
            start = sum(len(_flat(x)) for x in layout)
            for i, k in enumerate(old[a]):
                renumber[k] = start + i
            layout.append(e)
        attrs = tuple(S(renumber[a.axis]) if isinstance(a, S) and a.axis in renumber else
                      (B() if isinstance(a, S) else a) for a in self.attrs)
        return ShardLayout(tuple(layout), attrs, self.mesh)

    def canonical_text(self) -> str:
        """Text for the canonical form of a Module (and messages)."""
        def mode(e: Any) -> str:
            if isinstance(e, tuple):
                return "(" + ", ".join(mode(x) for x in e) + ")"
            return str(e)
        attrs = ", ".join(_attr_text(a) for a in self.attrs)
        return f"ShardLayout(({', '.join(mode(e) for e in self.layout)}), [{attrs}], {self.mesh})"

    __str__ = canonical_text


def _attr_text(a: ShardAttr) -> str:
    if isinstance(a, S):
        return f"S({a.axis})"
    if isinstance(a, P):
        return f"P({a.reduction})"
    return type(a).__name__


def _flat(e: Any) -> tuple[Any, ...]:
    return tuple(x for sub in e for x in _flat(sub)) if isinstance(e, tuple) else (e,)


def _split_of(e: Split) -> Split:
    return e


def _extent(e: Any) -> Any:
    if isinstance(e, Split):
        return e.extent
    if isinstance(e, tuple):
        n = 1
        for sub in e:
            n = n * _extent(sub)
        return n
    return e


def has_splits(entries: Any) -> bool:
    """True when a shape (or reshard target) holds ``N @ mesh.axis`` entries."""
    return isinstance(entries, (tuple, list)) and any(isinstance(m, Split) for e in entries for m in _flat(e))

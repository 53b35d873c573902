"""A mesh of the lowered program: named axes mapped onto the topology levels (cta, thread)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MeshAxis:
    """One mesh axis: its name, extent, the topology level it walks and its stride in that level's id."""

    name: str
    extent: int
    level: str
    stride: int

    def __str__(self) -> str:
        return f"{self.name}={self.extent}"


@dataclass(frozen=True)
class TMesh:
    """A mesh: the C++ name it is declared under, its levels (in order) and its axes (in layout order).

    The axes of one level linearise that level's program id, the last one fastest (the runtime's
    ``Mesh::local_index`` rule, spec 2.3).
    """

    name: str
    levels: tuple[str, ...]
    axes: tuple[MeshAxis, ...]

    def axis_index(self, name: str) -> int:
        """Position of the named axis; KeyError names the axes."""
        for i, a in enumerate(self.axes):
            if a.name == name:
                return i
        raise KeyError(f"mesh {self.name} has no axis {name!r}; axes: {', '.join(a.name for a in self.axes)}")

    def level_size(self, level: str) -> int:
        """Product of the extents of the axes on ``level`` (1 when it has none)."""
        n = 1
        for a in self.axes:
            if a.level == level:
                n *= a.extent
        return n

    def __str__(self) -> str:
        groups = []
        for level in self.levels:
            axes = ", ".join(str(a) for a in self.axes if a.level == level)
            groups.append(f"{level}({axes})")
        return f"{self.name} = mesh {' x '.join(groups)}"


def level_strides(axes: tuple[tuple[str, int, str], ...]) -> tuple[MeshAxis, ...]:
    """Axes ``(name, extent, level)`` with the row-major stride each takes within its level."""
    out: list[MeshAxis] = []
    for i, (name, extent, level) in enumerate(axes):
        stride = 1
        for _, extent2, level2 in axes[i + 1:]:
            if level2 == level:
                stride *= extent2
        out.append(MeshAxis(name, extent, level, stride))
    return tuple(out)

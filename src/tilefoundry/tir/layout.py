"""The CuTe layout of a buffer: flat modes with strides, and how a mesh distributes them (ShardLayout)."""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.types.dim import Dim
from .mesh import TMesh


@dataclass(frozen=True)
class ShardAttr:
    """One mesh axis's shard attribute: ``S`` (splits flat mode ``mode``), ``B`` (broadcast) or ``P``."""

    kind: str
    mode: int | None = None
    reduction: str | None = None

    def __str__(self) -> str:
        if self.kind == "S":
            return f"S<{self.mode}>"
        if self.kind == "P":
            return f"P<{self.reduction}>"
        return self.kind


@dataclass(frozen=True)
class TLayout:
    """Flat modes in CuTe (colexicographic) order with strides in elements; over ``mesh`` when distributed.

    A mode split by a mesh axis has that axis's extent; its stride is the distance between two
    instances' pieces, 0 where each instance keeps its piece in storage of its own (registers, or shared
    memory across CTAs). ``attrs`` holds one shard attribute per mesh axis. ``bound``, when set, is how many
    elements of the layout exist in its colexicographic order: the layout is padded past them to whole mesh
    axes (a row that does not split evenly over the threads), and the runtime's ``local()`` gives each
    instance only its existing elements (a ShardLayout with a bound, runtime shard_layout.h).
    """

    shape: tuple[Dim, ...]
    stride: tuple[Dim, ...]
    mesh: TMesh | None = None
    attrs: tuple[ShardAttr, ...] = ()
    bound: Dim | None = None

    def __post_init__(self) -> None:
        if len(self.shape) != len(self.stride):
            raise ValueError(f"TLayout: shape {self.shape} and stride {self.stride} differ in rank")
        if self.mesh is not None and len(self.attrs) != len(self.mesh.axes):
            raise ValueError(f"TLayout: {len(self.attrs)} shard attributes for a mesh of {len(self.mesh.axes)} axes")

    @property
    def rank(self) -> int:
        """Number of flat modes."""
        return len(self.shape)

    def split_modes(self) -> dict[int, int]:
        """Flat mode -> the mesh axis splitting it."""
        return {a.mode: m for m, a in enumerate(self.attrs) if a.kind == "S" and a.mode is not None}

    def local_shape(self) -> tuple[Dim, ...]:
        """The shape one instance sees: every split mode becomes 1."""
        split = self.split_modes()
        return tuple(1 if i in split else d for i, d in enumerate(self.shape))

    def __str__(self) -> str:
        shape = ", ".join(str(d) for d in self.shape)
        stride = ", ".join(str(d) for d in self.stride)
        text = f"({shape}):({stride})"
        if self.mesh is not None:
            text += f" [{', '.join(str(a) for a in self.attrs)}] over {self.mesh.name}"
        if self.bound is not None:
            text += f" bound {self.bound}"
        return text

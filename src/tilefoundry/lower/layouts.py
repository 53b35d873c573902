"""CuTe layouts of a row-wise program's buffers: a row spread over the thread mesh, or one element.

One row of H elements is split, in row-major order, into ``(n, *mesh axes, V)``: a thread holds ``n``
vectors of ``V`` contiguous elements, consecutive threads hold consecutive vectors. The flat CuTe modes
list them innermost first, ``(V, *reversed mesh axes, n)``, each mesh axis splitting its own mode. In
gmem the modes take the row's real strides; in rmem a thread stores only its ``n * V`` elements, so
the split modes have stride 0. A per-row scalar has as many modes, all of extent 1 and stride 0, and
is a broadcast over the mesh: every thread holds (and reads) the one value.

A row that the mesh's vectors do not tile (``H`` not a multiple of ``threads * V``: a length such as 4095
or a DimVar) takes ``n = ceil(H / (threads * V))`` and the bound ``H``: the layout is padded to whole
vectors a thread, and each thread's view holds only the row's elements (its last vectors may be
padding, which no op reads, writes or reduces). ``V`` divides ``H`` (schedule.py), so a thread's part
ends on a whole vector.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.types.dim import Dim, floordiv
from ..ir.types.storage import Storage
from ..tir.layout import ShardAttr, TLayout
from ..tir.mesh import TMesh


@dataclass(frozen=True)
class RowLayouts:
    """The layouts of one row-wise kernel, by (vector or scalar, storage)."""

    mesh: TMesh
    vector_width: int
    row: Dim

    @property
    def threads(self) -> int:
        """Threads the row is spread over."""
        n = 1
        for a in self.mesh.axes:
            n *= a.extent
        return n

    @property
    def padded(self) -> bool:
        """Whether the row is padded to whole vectors a thread (see the module docstring)."""
        span = self.threads * self.vector_width
        return span > 1 and not (isinstance(self.row, int) and self.row % span == 0)

    @property
    def rank(self) -> int:
        """Flat modes of every row buffer: the vector, one per mesh axis, the per-thread count."""
        return len(self.mesh.axes) + 2

    def vector(self, storage: Storage) -> TLayout:
        """A row of H elements in ``storage``."""
        axes = self.mesh.axes
        span = self.threads * self.vector_width
        per_thread = floordiv(self.row + (span - 1), span) if self.padded else floordiv(self.row, span)
        shape: list[Dim] = [self.vector_width] + [a.extent for a in reversed(axes)] + [per_thread]
        split = {1 + i: len(axes) - 1 - i for i in range(len(axes))}  # flat mode -> mesh axis
        stride: list[Dim] = []
        acc: Dim = 1
        for i, d in enumerate(shape):
            private = storage is Storage.rmem and i in split
            stride.append(0 if private else acc)
            if not private:
                acc = acc * d
        attrs = [ShardAttr("S", mode) for mode in sorted(split, key=lambda k: split[k])]
        return TLayout(tuple(shape), tuple(stride), self.mesh, tuple(attrs), self.row if self.padded else None)

    def scalar(self) -> TLayout:
        """One element per row, which every thread reads (a broadcast over the mesh)."""
        return TLayout((1,) * self.rank, (0,) * self.rank, self.mesh, tuple(ShardAttr("B") for _ in self.mesh.axes))

    def picks(self, k: int) -> TLayout:
        """``k`` elements per row (topk's results), which every thread holds: the scalar's layout with ``k``
        contiguous elements along its first mode."""
        return TLayout((k,) + (1,) * (self.rank - 1), (1,) + (0,) * (self.rank - 1), self.mesh,
                       tuple(ShardAttr("B") for _ in self.mesh.axes))

    def reduced_axes(self) -> tuple[int, ...]:
        """The flat modes a reduction along the row folds: all of them."""
        return tuple(range(self.rank))

"""CuTe layouts of a row-wise program's buffers: a row spread over the thread mesh, or one element.

One row of H elements is split, in row-major order, into ``(n, *mesh axes, V)``: a thread holds ``n``
vectors of ``V`` contiguous elements, consecutive threads hold consecutive vectors. The flat CuTe modes
list them innermost first, ``(V, *reversed mesh axes, n)``, each mesh axis splitting its own mode. In
gmem the modes take the row's real strides; in rmem a thread stores only its ``n * V`` elements, so
the split modes have stride 0. A per-row scalar has as many modes, all of extent 1 and stride 0, and
is a broadcast over the mesh: every thread holds (and reads) the one value.
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
    def rank(self) -> int:
        """Flat modes of every row buffer: the vector, one per mesh axis, the per-thread count."""
        return len(self.mesh.axes) + 2

    def vector(self, storage: Storage) -> TLayout:
        """A row of H elements in ``storage``."""
        axes = self.mesh.axes
        threads = 1
        for a in axes:
            threads *= a.extent
        per_thread = floordiv(self.row, threads * self.vector_width)
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
        return TLayout(tuple(shape), tuple(stride), self.mesh, tuple(attrs))

    def scalar(self) -> TLayout:
        """One element per row, which every thread reads (a broadcast over the mesh)."""
        return TLayout((1,) * self.rank, (0,) * self.rank, self.mesh, tuple(ShardAttr("B") for _ in self.mesh.axes))

    def reduced_axes(self) -> tuple[int, ...]:
        """The flat modes a reduction along the row folds: all of them."""
        return tuple(range(self.rank))

"""How a value is spread over a mesh, as lowering reads it, and the CuTe layouts that follow from it.

A value's *structure* lists, per tensor axis, its row-major sub-modes, each ``(extent, mesh axis or
None)``: an axis written ``168 @ cta.block`` with block = 4 is ``((4, "block"), (42, None))``; an axis
not split is one mode. Its storage decides the strides: a mode split by a mesh axis is *private* (stride
0: each instance keeps its part in storage of its own) in rmem for every level and in smem for the cta
level; the other modes are laid out row-major, compactly.

The TLayout of a buffer lists the modes axis by axis, each axis's sub-modes innermost first (CuTe's
colexicographic order), and gives each mesh axis the flat mode it splits (``S<k>``) or ``B``. An op's
operands are viewed in its result's structure, so that every runtime call pairs elements one to one:
an operand that is 1 along an axis (or lacks it) repeats with stride 0; one holding the axis in shared
memory (gmem, or smem split only over threads) is read at the sub-modes' strides.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.types.dim import Dim, dims_equal
from ..ir.types.shard import B, MeshSpec, S, ShardLayout, Split
from ..ir.types.storage import Storage
from ..ir.types.tensor_type import TensorType
from ..tir.layout import ShardAttr, TLayout
from ..tir.mesh import TMesh, level_strides

SubMode = tuple[Dim, "str | None"]


@dataclass(frozen=True)
class Structure:
    """Per tensor axis its row-major sub-modes ``(extent, mesh axis name or None)``, over ``mesh``."""

    axes: tuple[tuple[SubMode, ...], ...]
    mesh: MeshSpec | None

    @property
    def shape(self) -> tuple[Dim, ...]:
        out = []
        for modes in self.axes:
            n: Dim = 1
            for e, _ in modes:
                n = n * e
            out.append(n)
        return tuple(out)

    def flat(self) -> list[tuple[int, int]]:
        """(axis, sub-mode) of each flat CuTe mode: axes in order, each axis's sub-modes innermost first."""
        return [(a, j) for a, modes in enumerate(self.axes) for j in reversed(range(len(modes)))]

    def reduced(self, axes: tuple[int, ...], keepdim: bool) -> Structure:
        """The structure of a reduction's result over the same mesh."""
        out = []
        for a, modes in enumerate(self.axes):
            if a in axes:
                if keepdim:
                    out.append(((1, None),))
            else:
                out.append(modes)
        return Structure(tuple(out), self.mesh)


def structure_of(t: TensorType) -> Structure:
    """The structure a type describes (one unsplit mode per axis when it has no ShardLayout)."""
    layout = t.layout
    if layout is None:
        return Structure(tuple(((d, None),) for d in t.shape), None)
    if not isinstance(layout, ShardLayout):
        raise TypeError(f"a layout lowering cannot read: {layout!r}")
    for a in layout.attrs:
        if not isinstance(a, (S, B)):
            raise ValueError(f"{layout}: a {type(a).__name__} shard attribute is not compiled yet (splits and "
                             "broadcasts are)")
    axes = []
    for entry in layout.layout:
        subs = entry if isinstance(entry, tuple) else (entry,)
        axes.append(tuple((m.extent, m.axis.name) if isinstance(m, Split) else (m, None) for m in _flat(subs)))
    return Structure(tuple(axes), layout.mesh)


def _flat(e: tuple) -> tuple:
    return tuple(x for sub in e for x in (_flat(sub) if isinstance(sub, tuple) else (sub,)))


class Meshes:
    """The TMesh of every mesh a function places values over, levels assigned by the hierarchy's sizes."""

    def __init__(self, sizes: dict[str, int]) -> None:
        self.sizes = sizes
        self.by_spec: dict[MeshSpec, TMesh] = {}

    def of(self, spec: MeshSpec) -> TMesh:
        if spec not in self.by_spec:
            groups = spec.groups(self.sizes or None)
            level = {a: t for t, axes in groups.items() for a in axes}
            axes = tuple((n, e, level[i]) for i, (n, e) in enumerate(zip(spec.names, spec.layout)))
            name = "mesh" if not self.by_spec else f"mesh_{len(self.by_spec)}"
            self.by_spec[spec] = TMesh(name, spec.topologies, level_strides(axes))
        return self.by_spec[spec]

    def level_of(self, spec: MeshSpec, axis: str) -> str:
        tm = self.of(spec)
        return tm.axes[tm.axis_index(axis)].level


def private(meshes: Meshes, st: Structure, axis: str | None, storage: Storage) -> bool:
    """True when a mode split by ``axis`` has stride 0 in ``storage``."""
    if axis is None or st.mesh is None:
        return False
    if storage is Storage.rmem:
        return True
    return storage is Storage.smem and meshes.level_of(st.mesh, axis) == "cta"


def home_strides(meshes: Meshes, st: Structure, storage: Storage) -> tuple[tuple[Dim, ...], ...]:
    """Per axis, per sub-mode, the stride in a buffer of ``storage`` holding the value (row-major, compact)."""
    strides: list[list[Dim]] = [[0] * len(m) for m in st.axes]
    acc: Dim = 1
    for a in reversed(range(len(st.axes))):
        for j in reversed(range(len(st.axes[a]))):
            extent, axis = st.axes[a][j]
            if private(meshes, st, axis, storage):
                continue
            strides[a][j] = acc
            acc = acc * extent
    return tuple(tuple(s) for s in strides)


def tlayout(meshes: Meshes, target: Structure, strides: tuple[tuple[Dim, ...], ...],
            reduced_axes: tuple[int, ...] = ()) -> TLayout:
    """The TLayout of a view in ``target``'s structure with the given strides.

    A mesh axis splitting a mode of ``reduced_axes`` is a broadcast in it (a reduction's destination).
    """
    flat = target.flat()
    shape = tuple(target.axes[a][j][0] for a, j in flat)
    stride = tuple(strides[a][j] for a, j in flat)
    if target.mesh is None:
        return TLayout(shape, stride)
    tm = meshes.of(target.mesh)
    attrs: list[ShardAttr] = []
    for name in target.mesh.names:
        k = [i for i, (a, j) in enumerate(flat) if target.axes[a][j][1] == name and a not in reduced_axes]
        attrs.append(ShardAttr("S", k[0]) if k else ShardAttr("B"))
    return TLayout(shape, stride, tm, tuple(attrs))


class ViewError(ValueError):
    """An operand that does not hold what the op's result needs it to (placed differently)."""


def operand_strides(meshes: Meshes, operand: Structure, storage: Storage, own: tuple[tuple[Dim, ...], ...],
                    target: Structure) -> tuple[tuple[Dim, ...], ...]:
    """The strides of ``operand`` (stored with ``own`` strides) read in ``target``'s structure.

    Raises ViewError when the operand's placement does not provide what the target needs.
    """
    offset = len(target.axes) - len(operand.axes)
    if offset < 0:
        raise ViewError(f"an operand of rank {len(operand.axes)} in a result of rank {len(target.axes)}")
    out: list[tuple[Dim, ...]] = []
    for a, tmodes in enumerate(target.axes):
        oa = a - offset
        if oa < 0 or dims_equal(operand.shape[oa], 1):
            out.append((0,) * len(tmodes))
            continue
        omodes = operand.axes[oa]
        if omodes == tmodes:
            out.append(own[oa])
            continue
        whole = _whole_axis_stride(meshes, operand, storage, own, oa)
        if whole is None or not dims_equal(operand.shape[oa], target.shape[a]):
            raise ViewError(f"axis {oa} is laid out as {_modes_text(omodes)} in {storage.value}, the result as "
                            f"{_modes_text(tmodes)}")
        strides: list[Dim] = []
        acc: Dim = whole
        for extent, _ in reversed(tmodes):
            strides.append(acc)
            acc = acc * extent
        out.append(tuple(reversed(strides)))
    return tuple(out)


def _whole_axis_stride(meshes: Meshes, st: Structure, storage: Storage, own: tuple[tuple[Dim, ...], ...],
                       a: int) -> Dim | None:
    """The stride of axis ``a`` as one mode, when every instance can read all of it (else None)."""
    modes = st.axes[a]
    if any(private(meshes, st, axis, storage) for _, axis in modes):
        return None
    strides = own[a]
    for j in range(len(modes) - 1):
        if not dims_equal(strides[j], strides[j + 1] * modes[j + 1][0]):
            return None
    return strides[-1]


def _modes_text(modes: tuple[SubMode, ...]) -> str:
    return "(" + ", ".join(f"{e} @ {ax}" if ax else str(e) for e, ax in modes) + ")"

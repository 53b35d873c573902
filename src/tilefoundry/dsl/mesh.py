"""``Mesh``: a lexical placement scope inside a ``@func`` body (recorded on nodes; values unchanged)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..ir.core.tracer import current_trace
from ..ir.types.shard import MeshAxis, MeshSpec


class Mesh:
    """``with Mesh(("cta",), layout=(132,), names=("tile",)) as m:`` places the ops traced inside.

    ``m.tile`` names a mesh axis. Outside tracing the scope records nothing.
    """

    def __init__(self, topologies: Sequence[str], layout: Sequence[int], names: Sequence[str]) -> None:
        self.spec = MeshSpec(tuple(topologies), tuple(layout), tuple(names))
        self._pushed = False

    def __enter__(self) -> Mesh:
        ctx = current_trace()
        if ctx is not None:
            ctx.mesh_stack.append(self.spec)
            self._pushed = True
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._pushed:
            current_trace().mesh_stack.pop()
            self._pushed = False

    def __getattr__(self, name: str) -> MeshAxis:
        if name.startswith("_") or name == "spec":
            raise AttributeError(name)
        return self.spec.axis(name)

    def __repr__(self) -> str:
        s = self.spec
        return f"Mesh({s.topologies}, layout={s.layout}, names={s.names})"

"""The topology sizes a Module declares for lowering (its effective hierarchy)."""

from __future__ import annotations

from ..ir.core.module import Module
from ..ir.types.shard import Topology
from .schedule import Declared


def declared_topologies(mod: Module) -> Declared:
    """The cta and thread sizes the Module declares (None where it declares none)."""
    topos = effective_topologies(mod)
    sizes = {t.name: t.size for t in topos or ()}
    return Declared(cta=sizes.get("cta"), thread=sizes.get("thread"))


def effective_topologies(mod: Module) -> tuple[Topology, ...] | None:
    """The Module's own topologies, else those it inherits from its owner."""
    hierarchy = getattr(mod, "effective_topologies", None)
    if callable(hierarchy):
        return hierarchy()
    return mod.topologies

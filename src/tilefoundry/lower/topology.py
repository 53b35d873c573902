"""The topology sizes a Module runs under, for lowering: its effective hierarchy (own, or its owner's)."""

from __future__ import annotations

from ..ir.core.module import Module
from .schedule import Declared


def declared_topologies(mod: Module) -> Declared:
    """The cta and thread sizes the Module declares (None where it declares none)."""
    topos = mod._effective_topologies()
    sizes = {t.name: t.size for t in topos or ()}
    return Declared(cta=sizes.get("cta"), thread=sizes.get("thread"))

"""The loader: a LinkedModule becomes a CompiledModule (spec 1.1.3, 1.4).

The library is loaded with ``tvm_ffi.load_module`` and the entry bound by the symbol named by the
module's entry. Not public API: ``tilefoundry.build`` / ``compile`` / ``jit`` call it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .compiled import CompiledModule

if TYPE_CHECKING:
    from ..codegen.linked import LinkedModule


def load_linked_module(linked: LinkedModule) -> CompiledModule:
    """``CompiledModule(type=linked.entry, fn=<the library's entry>)``."""
    import tvm_ffi

    lib = tvm_ffi.load_module(str(linked.library))
    fn = lib[linked.entry.name]
    return CompiledModule(linked.entry, fn, source=linked.source, library=linked.library, tir=linked.tir,
                          keep_alive=lib)

"""The loader: a LinkedModule becomes a CompiledModule (spec 1.1.3, 1.4).

The library is loaded with ``tvm_ffi.load_module`` and the entry bound by the symbol named by the
module's entry. Not public API: ``tilefoundry.build`` / ``compile`` / ``jit`` call it, and the decode
engine loads its hand-written kernels through ``load_library``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .compiled import CompiledModule

if TYPE_CHECKING:
    from ..codegen.linked import LinkedModule


def load_library(linked: LinkedModule) -> Any:
    """The built library as a tvm-ffi Module (every exported function, by name)."""
    import tvm_ffi

    return tvm_ffi.load_module(str(linked.library))


def load_linked_module(linked: LinkedModule) -> CompiledModule:
    """``CompiledModule(type=linked.entry, fn=<the library's entry>)``."""
    if linked.entry is None:
        raise TypeError(f"{linked.library} has no entry ABI (a hand-written library): load it with load_library")
    lib = load_library(linked)
    fn = lib[linked.entry.name]
    return CompiledModule(linked.entry, fn, source=linked.source, library=linked.library, tir=linked.tir,
                          keep_alive=lib)

"""The loader: a LinkedModule becomes a CompiledModule (spec 1.1.3, 1.4).

The library is loaded with ``tvm_ffi.load_module`` and the entry bound by the symbol named by the
module's entry. Not public API: ``tilefoundry.build`` / ``compile`` / ``jit`` call it; ``load_library``
loads a library of several entries (the tests' acceptance units).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .abi import EntryABI
from .compiled import CompiledModule

if TYPE_CHECKING:
    from ..codegen.linked import LinkedModule


def load_library(linked: LinkedModule) -> Any:
    """The built library as a tvm-ffi Module (every exported function, by name)."""
    import tvm_ffi

    return tvm_ffi.load_module(str(linked.library))


def load_linked_module(linked: LinkedModule) -> CompiledModule:
    """``CompiledModule(type=linked.entry, fn=<the library's entry>)``, with every other exported function of the
    library a CompiledModule of its own in its ``functions``."""
    if linked.entry is None:
        raise TypeError(f"{linked.library} has no entry ABI (a hand-written library): load it with load_library")
    lib = load_library(linked)

    def bind(abi: EntryABI, functions: dict[str, CompiledModule] | None = None) -> CompiledModule:
        return CompiledModule(abi, lib[abi.name], source=linked.source, library=linked.library, tir=linked.tir,
                              keep_alive=lib, functions=functions)

    others = {abi.name: bind(abi) for abi in linked.entries if abi.name != linked.entry.name}
    entry = bind(linked.entry, others)
    for other in others.values():
        other.functions.update(entry.functions)
    return entry

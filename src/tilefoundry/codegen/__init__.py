"""Code generation: TIR to one translation unit per target, built into a library (spec 1.1.3, 1.4).

``generate(tir_module)`` emits the source (``cpu/`` or ``cuda/``, by the module's target) as a
:class:`LinkableModule`; ``link`` builds it with the target's compiler through the disk cache into a
:class:`LinkedModule`, which the runtime's loader binds. ``build_progress(mode)`` picks how builds say
that they run (a tqdm line on a terminal, one line per build elsewhere, terminal only, or nothing).
"""

from __future__ import annotations

from ..runtime.abi import EntryABI, param_abi_of
from ..tir.dispatch import Dispatch
from ..tir.function import PrimFunc, TirModule
from .build import BuildError, build_progress, link
from .cache import DiskCache, cache_root
from .linked import LinkableModule, LinkedModule
from .options import CompilerOptions
from .toolchain import CompilerNotFoundError, ToolchainError

__all__ = ["BuildError", "CompilerNotFoundError", "CompilerOptions", "DiskCache", "LinkableModule",
           "LinkedModule", "ToolchainError", "build_progress", "cache_root", "entry_abi", "generate", "link"]


def entry_abi(fn: PrimFunc | Dispatch) -> EntryABI:
    """The compiled entry's ABI: every parameter (outputs trailing), ``output_count`` set from lowering."""
    return EntryABI(fn.name, tuple(param_abi_of(p) for p in fn.params), fn.output_count)


def generate(mod: TirModule) -> LinkableModule:
    """The translation unit of ``mod`` for its target."""
    if mod.target.kind == "cpu":
        from .cpu import emit_cpu

        source = emit_cpu(mod)
    else:
        from .cuda import emit_cuda

        source = emit_cuda(mod)
    entries = tuple(entry_abi(f) for f in (*mod.functions.values(), *mod.dispatches.values()))
    return LinkableModule(mod.name, mod.target, source, entries, mod.entry, str(mod))

"""``build`` and ``compile``: lowering, code generation, the build step and the loader, chained (spec 1.4).

``compile(fn_or_mod, target=...)`` runs the whole pipeline and returns a CompiledModule; ``build``
starts from a Module or an already lowered TirModule. Neither caches in the process (``jit`` does);
both reuse built libraries through the disk cache.
"""

from __future__ import annotations

from typing import Any

from ..target import Target
from .compiled import CompiledModule

__all__ = ["build", "compile"]


def build(mod: Any, *, target: str | Target | None = None, options: Any = None) -> CompiledModule:
    """Generate code for ``mod`` (a Module, a Function, or a TirModule from ``lower``), build it and load
    its entry as a CompiledModule.

    Raises:
        TypeError: ``mod`` is not TileFoundry IR.
        ValueError: the Module has no entry function, or declares a target of another kind.
        LoweringError: an op the compiler cannot handle (named, with its function and line).
        BuildError: the compiler refused the generated source (its diagnostics are in the message).
        CompilerNotFoundError: the target's compiler is not installed (and nothing is cached).
    """
    from ..codegen import generate, link
    from ..lower import as_module, lower
    from ..tir.function import TirModule
    from .loader import load_linked_module

    if isinstance(mod, TirModule):
        if target is not None:
            raise TypeError("build(tir_module) builds for the target it was lowered for; do not pass target=")
        tir = mod
    else:
        module = as_module(mod, "build")
        if module.entry is None:
            raise ValueError(f"build: Module {module.name!r} has no entry function, so a compiled module has "
                             f"nothing to call; declare @module(entry=...) (functions: {', '.join(module.functions)})")
        tir = lower(module, target, split_rows=getattr(options, "split_rows", True))
    early = getattr(options, "early_reads", ())  # link refuses options of another type
    if early:
        tir = tir.with_early_reads(early)
    return load_linked_module(link(generate(tir), options))


def compile(fn_or_mod: Any, *, target: str | Target = "cuda", options: Any = None) -> CompiledModule:  # noqa: A001
    """Lower, build and load ``fn_or_mod`` for ``target`` (no in-process cache: see ``jit``)."""
    from ..lower import as_module

    return build(as_module(fn_or_mod, "compile"), target=target, options=options)

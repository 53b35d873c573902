"""``jit``: compile a Function or Module once per process and return its callable RuntimeModule (spec 1.3).

The in-process cache is keyed by ``sha256(canonical_module_text + target_text + canonical_options_text)``:
the Module's canonical text (functions, its effective topology hierarchy, mesh scopes; never object
identities), the target's text and the options' canonical text. Two threads asking for one key
compile it once; ``jit.cache_clear()`` empties the cache and ``jit.cache_info()`` reports its size.
Under it, built libraries are reused across processes through the disk cache.

The default target, ``"cuda"``, is this machine's GPU (its compute capability picks the architecture); where
torch sees no GPU, ``jit`` refuses it before anything is built, in one line naming ``target="cpu"`` and an
architecture to build for (``target="cuda:sm_90a"``).
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any

from ..target import Target, refuse_without_gpu, resolve_target
from .module import RuntimeModule

__all__ = ["jit", "jit_key"]


def jit_key(fn_or_mod: Any, target: str | Target = "cuda", options: Any = None) -> str:
    """The in-process cache key of ``jit(fn_or_mod, target=target, options=options)``."""
    from ..codegen.options import CompilerOptions
    from ..lower import as_module, target_for

    mod = as_module(fn_or_mod, "jit")
    return _key(mod, target_for(mod, target, "jit"), _options(options, CompilerOptions))


def _key(mod: Any, tgt: Target, opts: Any) -> str:
    from ..ir.core.canonical import canonical_module_text

    text = canonical_module_text(mod) + "\n" + str(tgt) + "\n" + opts.canonical_text()
    return hashlib.sha256(text.encode()).hexdigest()


def _options(options: Any, cls: type) -> Any:
    if options is None:
        return cls()
    if not isinstance(options, cls):
        raise TypeError(f"options must be a CompilerOptions, got {type(options).__name__}")
    return options


class _Jit:
    """The ``jit`` callable and its cache."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cache: dict[str, RuntimeModule] = {}
        self._building: dict[str, threading.Event] = {}

    def __call__(self, fn_or_mod: Any, *, target: str | Target = "cuda", options: Any = None) -> RuntimeModule:
        """Compile ``fn_or_mod`` (a @func Function or a Module) for ``target`` and return its RuntimeModule.

        Args:
            fn_or_mod: TileFoundry IR; a bare Function is wrapped in a one-function Module declaring no
                execution context. A raw Python function is refused (TypeError): decorate it with @func.
            target: ``"cuda"`` (default: this machine's GPU, at its compute capability), ``"cuda:sm_90a"`` (an
                architecture, built with or without a GPU), ``"cpu"``, ``CudaTarget(...)`` or ``CpuTarget()``.
                A Module that declares a target of another kind is refused, naming both.
            options: CompilerOptions, or None for the defaults.

        Returns:
            A CompiledModule (a RuntimeModule): call it with the inputs (outputs allocated) or with inputs
            and outputs.

        Raises:
            ValueError: an unknown target; or ``"cuda"`` (the default) where torch sees no GPU, before anything
                is built (pass ``target="cpu"``, or an architecture such as ``target="cuda:sm_90a"``).
        """
        from ..codegen.options import CompilerOptions
        from ..lower import as_module, target_for
        from .pipeline import compile as compile_

        if isinstance(target, str):
            resolve_target(target)  # an unknown spelling is refused before anything else
        opts = _options(options, CompilerOptions)
        mod = as_module(fn_or_mod, "jit")
        tgt = target_for(mod, target, "jit")
        refuse_without_gpu(tgt, "jit")  # nothing to run it on: refused before lowering or a build
        key = _key(mod, tgt, opts)
        while True:
            with self._lock:
                if key in self._cache:
                    return self._cache[key]
                pending = self._building.get(key)
                if pending is None:
                    pending = self._building[key] = threading.Event()
                    break
            pending.wait()  # another thread compiles this key; take its result (or try again if it failed)
        try:
            compiled = compile_(fn_or_mod, target=target, options=opts)
            with self._lock:
                self._cache[key] = compiled
            return compiled
        finally:
            with self._lock:
                self._building.pop(key, None)
            pending.set()

    def cache_clear(self) -> None:
        """Forget every compiled module (the disk cache of libraries is kept)."""
        with self._lock:
            self._cache.clear()

    def cache_info(self) -> dict[str, int]:
        """``{"size": N}``: how many compiled modules the process holds."""
        with self._lock:
            return {"size": len(self._cache)}


jit = _Jit()

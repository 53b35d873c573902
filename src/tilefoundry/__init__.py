"""TileFoundry: author a network once, run it on a reference evaluator and on fast runtime twins, and
compile its kernels to C++ on the runtime headers.

Public verbs: ``func`` and ``module`` author; ``lower`` (HIR to TIR), ``build`` (TIR or IR to a loaded
CompiledModule), ``compile`` (the whole pipeline) and ``jit`` (``compile`` with an in-process cache)
compile; ``CompilerOptions`` configures the build step; ``TextSession`` generates text from a checkpoint.

The names are imported when first used (``tilefoundry.func``, ``from tilefoundry import jit``), so that
``import tilefoundry`` alone, and the ``tilefoundry`` command's ``--help``, do not import torch. The IR's slots
(``ir.core.backends``) are filled when first used, whichever module was imported first, from the layers named
here in :data:`SLOT_PROVIDERS`.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

# Public name -> the module defining it.
_PUBLIC = {
    "CompilerOptions": "tilefoundry.codegen.options",
    "DType": "tilefoundry.ir.types.dtype",
    "TextSession": "tilefoundry.models.session",
    "build": "tilefoundry.runtime.pipeline",
    "compile": "tilefoundry.runtime.pipeline",
    "func": "tilefoundry.dsl.decorators",
    "jit": "tilefoundry.runtime.jit",
    "lower": "tilefoundry.lower",
    "module": "tilefoundry.dsl.decorators",
}

SLOT_PROVIDERS = ("tilefoundry.evaluator", "tilefoundry.runtime.prepare")
"""The layers that fill the IR's slots when imported (the evaluator, weight preparation)."""

__all__ = ["CompilerOptions", "DType", "TextSession", "build", "compile", "func", "jit", "lower", "module"]

if TYPE_CHECKING:
    from .codegen.options import CompilerOptions
    from .dsl.decorators import func, module
    from .ir.types.dtype import DType
    from .lower import lower
    from .models.session import TextSession
    from .runtime.jit import jit
    from .runtime.pipeline import build, compile  # noqa: A004 - the public verb


def _public(name: str) -> Any:
    """The public ``name``, imported on first use (the IR fills its slots from SLOT_PROVIDERS when it needs them)."""
    return getattr(importlib.import_module(_PUBLIC[name]), name)


class _Package(types.ModuleType):
    """The package's module type. ``lower`` is both the public verb and the compiler's subpackage: Python binds
    a subpackage as an attribute of its parent when it is imported, and the verb must win, as it always has."""

    @property
    def lower(self) -> Any:
        return _public("lower")

    @lower.setter
    def lower(self, value: Any) -> None:
        pass  # the import system binding the subpackage: sys.modules holds it, the attribute stays the verb


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        value = _public(name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tilefoundry' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))


sys.modules[__name__].__class__ = _Package

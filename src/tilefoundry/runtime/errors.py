"""Errors of the runtime-twin layer: a twin that cannot be generated, a kernel called before ``load``."""

from __future__ import annotations

__all__ = ["NotLoadedError", "TwinDefinitionError"]


class TwinDefinitionError(TypeError):
    """``@runtime_module`` refused a class (or the semantic Module) at decoration time.

    The message names every mismatch found (missing and extra kernels or children, a reserved name, a
    kernel whose signature differs from its ``@func``) and the way to fix it.
    """


class NotLoadedError(RuntimeError):
    """A twin kernel that needs weights was called before the twin's ``load(resource)`` bound them."""

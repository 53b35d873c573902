"""Errors of the runtime-twin layer: a twin that cannot be generated, a kernel called before ``load``."""

from __future__ import annotations

__all__ = ["NotLoadedError", "TwinDefinitionError"]


class TwinDefinitionError(TypeError):
    """``@runtime_module`` refused a class (or the semantic Module) at decoration time.

    The message names every mismatch found (missing and extra kernels or children, a reserved name, a
    kernel whose signature differs from its ``@func``) and the way to fix it.
    """


class NotLoadedError(RuntimeError, KeyError):
    """A twin kernel that needs weights was called before the twin's ``load(resource)`` bound them.

    Also a KeyError (what the reference implementation raises there: a weight not bound), so ``except KeyError``
    catches it too; its ``str`` is the message itself, not KeyError's quoted form.
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""

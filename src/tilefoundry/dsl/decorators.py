"""``@func`` and ``@module``: the authoring decorators."""

from __future__ import annotations

import types as pytypes
from collections.abc import Callable
from typing import Any

from ..ir.core.errors import ModuleDefinitionError
from ..ir.core.function import Converter, Function, Variant, enclosing_locals, has_pass_body
from ..ir.core.module import Module
from ..target import resolve_target


def _in_class_body(pyfunc: Callable[..., Any]) -> bool:
    parts = pyfunc.__qualname__.split(".")
    return len(parts) > 1 and parts[-2] != "<locals>"


def func(fn: Callable[..., Any] | None = None, *, topologies: Any = None, target: Any = None) -> Any:
    """Turn an annotated Python function into a HIR ``Function``.

    ``@func`` in a ``@module`` class body declares a kernel of that Module. A bare ``@func`` yields a
    Function (traced at once, so authoring errors point at the definition); ``@func(topologies=...,
    target=...)`` outside a class yields an implicit one-function Module whose entry is that function.
    """

    def deco(pyfunc: Callable[..., Any]) -> Function | Module:
        in_class = _in_class_body(pyfunc)
        tgt = resolve_target(target) if target is not None else None
        fn = Function(pyfunc, topologies=topologies, target=tgt, localns=enclosing_locals())
        if in_class:
            return fn
        if not has_pass_body(pyfunc):  # a body of `pass` dispatches to variants declared after it
            _ = fn.graph
        if topologies is not None or target is not None:
            mod = Module(fn.name, {fn.name: fn}, entry=fn.name, target=tgt, topologies=topologies)
            mod._trace_all()  # its meshes are checked against the hierarchy it declares
            return mod
        return fn

    if fn is not None:
        return deco(fn)
    return deco


_ALLOWED = "a @func kernel, a Module or tuple of Modules (children), or a plain def (method)"


def module(cls: type | None = None, *, entry: str | None = None, target: Any = None,
           topologies: Any = None) -> Any:
    """Turn a class body into a ``Module`` instance bound to the class's name.

    Members: ``@func`` kernels become functions; a Module (or tuple of Modules) assigned to an
    attribute becomes children (a lone Module takes the attribute's name, tuple members keep their
    own, e.g. from ``Layer.renamed("layer0")``); plain ``def``s become orchestration methods
    (``forward``, ``init_caches``, ...). Anything else is refused.
    """

    def deco(klass: type) -> Module:
        if "__call__" in klass.__dict__:
            raise ModuleDefinitionError(
                f"@module {klass.__name__}: the class body defines __call__, which has no effect: calling a Module "
                "(or its reading, or its twin) runs its forward; define forward(self, ...) instead"
            )
        functions: dict[str, Function] = {}
        children: list[Module] = []
        methods: dict[str, Callable[..., Any]] = {}
        for attr, value in klass.__dict__.items():
            if attr.startswith("__") and attr.endswith("__"):
                continue
            if isinstance(value, (Converter, Variant)):
                continue  # registered on the function they convert for / specialise
            if isinstance(value, Function):
                value.name = attr
                functions[attr] = value
            elif isinstance(value, Module):
                children.append(value.renamed(attr))
            elif isinstance(value, tuple):
                if not value:
                    raise ModuleDefinitionError(f"@module {klass.__name__}: member {attr!r} is an empty tuple; "
                                                f"a tuple member holds child Modules")
                for i, item in enumerate(value):
                    if not isinstance(item, Module):
                        raise ModuleDefinitionError(
                            f"@module {klass.__name__}: {attr}[{i}] is {type(item).__name__}, not a Module; "
                            "a tuple member holds child Modules only"
                        )
                children.extend(value)
            elif isinstance(value, pytypes.FunctionType):
                methods[attr] = value
            else:
                raise ModuleDefinitionError(
                    f"@module {klass.__name__}: member {attr!r} is a {type(value).__name__}; a member must be "
                    f"{_ALLOWED}"
                )
        mod = Module(
            klass.__name__, functions, children, methods, entry=entry,
            target=resolve_target(target) if target is not None else None, topologies=topologies,
        )
        mod.__doc__ = klass.__doc__
        mod._trace_all()
        return mod

    if cls is not None:
        return deco(cls)
    return deco

"""Errors raised while building and typing HIR."""

from __future__ import annotations

from collections.abc import Sequence

from ..types.tensor_type import TensorType
from .source import SourceLoc


class OpTypeError(Exception):
    """Raised by an op's type rule; ``emit`` turns it into an :class:`IRTypeError` with context."""


class IRTypeError(TypeError):
    """A type error in authored code: names the op, its operand types and the source line."""

    def __init__(self, op: str, operands: Sequence[TensorType], reason: str, loc: SourceLoc | None) -> None:
        self.op = op
        self.operands = tuple(operands)
        self.reason = reason
        self.loc = loc
        types = ", ".join(str(t) for t in operands) or "no tensor operands"
        where = f"\n  at {loc}" if loc is not None else ""
        super().__init__(f"{op}: {reason}\n  operand types: {types}{where}")


class IRIndexError(IRTypeError, IndexError):
    """An index out of a static axis's bounds (or too many indices): an IndexError, as Python's own."""


class ModuleDefinitionError(TypeError):
    """A ``@module`` or ``@func`` definition that cannot be accepted as written."""


class EntryNotFoundError(ModuleDefinitionError, ValueError):
    """``@module(entry=...)`` names no function of the Module: a ModuleDefinitionError, and a ValueError (what the
    reference implementation raises there), so either ``except`` clause catches it."""


class MissingWeightError(KeyError):
    """A reading (LoadedModule, twin) lacks a weight a call needs; the message names the module path and weight."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""

"""Refusals of the lowering: an op, a placement or a target the compiler cannot honour."""

from __future__ import annotations

from ..ir.core.source import SourceLoc


class LoweringError(NotImplementedError):
    """An op (or its placement) that cannot be compiled: names the op, the function and the source line.

    Attributes:
        op: the HIR op refused.
        function: the ``@func`` it belongs to.
        loc: where the op was written, when known.
    """

    def __init__(self, op: str, function: str, reason: str, loc: SourceLoc | None) -> None:
        self.op = op
        self.function = function
        self.loc = loc
        self.reason = reason
        where = f"\n  at {loc}" if loc is not None else ""
        super().__init__(f"cannot compile {op} in {function}: {reason}{where}")

"""Binding tensors to their declared types: the one rule for call arguments and for weights alike.

A :class:`Binder` checks tensors one by one against declared :class:`TensorType` s and binds the
DimVars their axes name, consistently across every tensor it sees:

* the dtype and the rank must equal the declaration's;
* a static axis must equal its extent (the first axis of a positional table, ``tables.py``, may hold fewer rows,
  at least one: ``bind(..., table=True)``);
* a plain DimVar axis binds the DimVar (inside its half-open range ``[lo, hi)``); every later axis naming
  it must agree;
* an axis that is a dim expression (``2*seq``) is checked by :meth:`Binder.finish`, once every plain
  DimVar axis has bound what it can, so the order of the tensors never matters. An expression whose
  DimVars nothing bound is refused when the binder was told the set is complete (a call: every
  parameter is there), and left for later otherwise (a weight: the activations bind it at the call).

A disagreement raises :class:`Mismatch`, whose ``kind`` says what disagreed and whose text names the
tensor, the declaration and the axis; callers put it into their own exception (TypeError / ValueError
for a call, WeightMismatchError for a weight).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from ..types.dim import Dim, DimVar
from ..types.tensor_type import TensorType

__all__ = ["Binder", "Mismatch"]

# Kinds of Mismatch. The first three say the tensor is of the wrong kind (a TypeError for a call); the
# rest say an extent is wrong (a ValueError).
NOT_TENSOR, DTYPE, RANK = "not_tensor", "dtype", "rank"
EXTENT, RANGE, CONFLICT, EXPRESSION, UNBOUND = "extent", "range", "conflict", "expression", "unbound"
TYPE_KINDS = frozenset({NOT_TENSOR, DTYPE, RANK})


class Mismatch(Exception):
    """The tensor called ``name`` disagrees with its declaration; ``kind`` is one of this module's kind names."""

    def __init__(self, kind: str, name: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.name = name

    @property
    def is_type_error(self) -> bool:
        """True when the tensor is of the wrong kind (not a tensor, dtype, rank) rather than the wrong size."""
        return self.kind in TYPE_KINDS


@dataclass(frozen=True)
class _Deferred:
    """A dim-expression axis waiting for :meth:`Binder.finish`."""

    name: str
    axis: int
    dim: Dim
    extent: int


class Binder:
    """Binds DimVars of declared types to the extents of actual tensors (see the module docstring).

    Args:
        noun: what the tensors are called in messages (``"argument"``, ``"weight"``).
        bindings: the DimVar name -> extent mapping to fill (a fresh dict when None); shared with the caller.
    """

    def __init__(self, noun: str, bindings: dict[str, int] | None = None) -> None:
        self.noun = noun
        self.bindings: dict[str, int] = {} if bindings is None else bindings
        self._bound_by: dict[str, str] = {}
        self._deferred: list[_Deferred] = []

    def bind(self, name: str, value: object, declared: TensorType, table: bool = False) -> torch.Tensor:
        """Check ``value`` (called ``name``) against ``declared``, binding its DimVar axes; return it. ``table``: a
        positional table (``tables.py``), whose first axis may hold fewer rows than a static extent declares."""
        what = f"{self.noun} {name}"
        if not isinstance(value, torch.Tensor):
            raise Mismatch(NOT_TENSOR, name, f"{what} must be a torch.Tensor ({declared}), got {type(value).__name__}")
        if value.dtype != declared.dtype.torch_dtype:
            raise Mismatch(DTYPE, name, f"{what} has dtype {value.dtype}, declared {declared}")
        if value.dim() != declared.rank:
            raise Mismatch(RANK, name,
                           f"{what} has rank {value.dim()} (shape {tuple(value.shape)}), declared {declared}")
        for axis, (d, n) in enumerate(zip(declared.shape, value.shape)):
            n = int(n)
            if isinstance(d, int):
                if table and axis == 0 and 1 <= n < d:
                    continue  # a table read at positions: the rope refuses a position past the rows given
                if d != n:
                    raise Mismatch(EXTENT, name, f"{what} has shape {tuple(value.shape)}, declared {declared} "
                                                 f"(axis {axis}: {n} != {d})")
            elif isinstance(d, DimVar):
                self._bind_var(name, declared, d, n)
            else:
                self._deferred.append(_Deferred(name, axis, d, n))
        return value

    def _bind_var(self, name: str, declared: TensorType, d: DimVar, n: int) -> None:
        if not d.contains(n):
            raise Mismatch(RANGE, name, f"{self.noun} {name} ({declared}): DimVar {d.name} = {n} is outside its "
                                        f"range [{d.lo}, {d.hi})")
        if d.name in self.bindings and self.bindings[d.name] != n:
            source = self._bound_by.get(d.name)
            where = f" from {self.noun} {source}" if source is not None else ""
            raise Mismatch(CONFLICT, name, f"DimVar {d.name} is {self.bindings[d.name]}{where} but {n} in {name} "
                                           f"({declared})")
        self.bindings[d.name] = n
        self._bound_by.setdefault(d.name, name)

    def finish(self, *, complete: bool) -> Mapping[str, int]:
        """Check the dim-expression axes against the bindings; return the bindings.

        ``complete`` says every tensor that could bind a DimVar has been seen: an expression whose DimVars
        are still unbound is then refused; otherwise it stays unchecked, for a later binding to check.
        """
        pending = []
        for item in self._deferred:
            try:
                value = item.dim.evaluate(self.bindings)  # type: ignore[union-attr]
            except KeyError:
                if complete:
                    raise Mismatch(UNBOUND, item.name, f"{self.noun} {item.name} axis {item.axis} is {item.dim}, "
                                                       "whose DimVars no plain DimVar axis binds") from None
                pending.append(item)
                continue
            if value != item.extent:
                raise Mismatch(EXPRESSION, item.name, f"{self.noun} {item.name} axis {item.axis} is {item.extent}, "
                                                      f"but {item.dim} = {value} from the other {self.noun}s")
        self._deferred = pending
        return self.bindings

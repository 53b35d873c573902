"""The :class:`Predicate` base class (one comparison and its bound) and :class:`PredicateResult`."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

import torch

from .dtypes import dtype_name, is_discrete_dtype
from .text import value_text

__all__ = ["Predicate", "PredicateResult"]


class Predicate:
    """One numerical comparison of a candidate output (against a reference output) and its bound.

    A concrete predicate is a subclass naming itself and its bound fields in class variables; an
    instance carries one value per bound as an attribute, given by keyword at construction
    (``allclose(atol=1e-5, rtol=1e-3)`` has ``.atol`` and ``.rtol``). Instances are immutable, compare
    equal when name, bounds and ``equal_nan`` agree, and print in the text form :meth:`parse` reads back
    (``str(rel_l2(max=0.01)) == "rel_l2:max=0.01"``,
    ``str(allclose(atol=0.001, rtol=0.001, equal_nan=True)) == "allclose:atol=0.001,rtol=0.001,equal_nan"``).

    NaN and Inf: a comparison predicate fails on a NaN on either side unless it is given ``equal_nan=True``,
    which counts NaNs at the same positions on both sides as equal; an infinity of the same sign at the same
    position on both sides counts as equal, any other Inf fails (as ``torch.testing.assert_close``). The
    ``equal_nan`` flag is taken by every predicate that compares against a reference; ``nan_inf``, which
    asserts finiteness alone, refuses it.

    Class variables:
        name: how the predicate is named (in ``PREDICATES``, reports and the text form).
        bounds: the bound fields it takes, in order.
        needs_reference: False when it judges the candidate alone (usable with ``reference=None``).
        discrete: True when it is meaningful on integer and boolean outputs.
        takes_equal_nan: True when it accepts the ``equal_nan`` flag (every comparison predicate).

    A subclass implements :meth:`measure` (tensors -> measured values and an optional note) and
    :meth:`judge` (measured values -> verdict against the bounds). The verdict of a
    :class:`PredicateResult` is always ``judge(values)``, so it cannot disagree with the values printed.
    """

    name: ClassVar[str]
    bounds: ClassVar[tuple[str, ...]]
    needs_reference: ClassVar[bool]
    discrete: ClassVar[bool]
    takes_equal_nan: ClassVar[bool] = True

    equal_nan: bool = False
    _frozen: bool = False

    def __init__(self, *args: Any, equal_nan: bool = False, **bounds: Any) -> None:
        cls = type(self)
        if not hasattr(cls, "name"):
            raise TypeError(
                f"{cls.__name__} is not a concrete predicate; construct one of its subclasses, "
                "e.g. allclose(atol=..., rtol=...) (see PREDICATES)"
            )
        if args:
            raise TypeError(f"{cls.name} takes its bounds by keyword: {cls.signature()}")
        missing = [b for b in cls.bounds if b not in bounds]
        unknown = sorted(b for b in bounds if b not in cls.bounds)
        if missing or unknown:
            problems = []
            if missing:
                problems.append("missing bound " + ", ".join(missing))
            if unknown:
                problems.append("unknown bound " + ", ".join(unknown))
            taken = ", ".join(cls.bounds) if cls.bounds else "no bounds"
            raise TypeError(f"{cls.name}: {'; '.join(problems)}; it takes {taken}: {cls.signature()}")
        for bound in cls.bounds:
            raw = bounds[bound]
            if isinstance(raw, bool) or not isinstance(raw, numbers.Real):
                raise TypeError(f"{cls.name}: bound {bound} must be a real number, got {type(raw).__name__} {raw!r}")
            value = float(raw)
            if not math.isfinite(value):
                raise ValueError(f"{cls.name}: bound {bound} must be finite, got {value}")
            problem = cls._bound_problem(bound, value)
            if problem is not None:
                raise ValueError(f"{cls.name}: bound {bound}={value!r} {problem}")
            object.__setattr__(self, bound, value)
        if not isinstance(equal_nan, bool):
            raise TypeError(f"{cls.name}: equal_nan must be True or False, got {type(equal_nan).__name__} "
                            f"{equal_nan!r}")
        if equal_nan and not cls.takes_equal_nan:
            raise TypeError(
                f"{cls.name} takes no equal_nan: it judges finiteness alone (a NaN always fails it); "
                "equal_nan belongs to the predicates that compare against a reference"
            )
        object.__setattr__(self, "equal_nan", equal_nan)
        object.__setattr__(self, "_frozen", True)

    # -- description -------------------------------------------------------------------------------

    @classmethod
    def signature(cls) -> str:
        """How to construct this predicate, e.g. ``"allclose(atol=..., rtol=...)"``."""
        return f"{cls.name}(" + ", ".join(f"{b}=..." for b in cls.bounds) + ")"

    @property
    def bound_text(self) -> str:
        """The bounds as a report prints them (``"atol=0.001 rtol=0.001 equal_nan"``), or ``"-"``."""
        parts = [f"{k}={value_text(v)}" for k, v in self.bound_values.items()]
        if self.equal_nan:
            parts.append("equal_nan")
        return " ".join(parts) or "-"

    @classmethod
    def _bound_problem(cls, bound: str, value: float) -> str | None:
        """What is wrong with ``value`` for ``bound`` (None when it is acceptable).

        The default accepts any finite value >= 0; subclasses with other ranges override it.
        """
        if value < 0:
            return "must be >= 0"
        return None

    @property
    def bound_values(self) -> dict[str, float]:
        """The bound values this instance carries, by bound name, in declaration order."""
        return {b: getattr(self, b) for b in self.bounds}

    def __setattr__(self, key: str, value: Any) -> None:
        if self._frozen:
            raise AttributeError(f"{self.name} is immutable; build a new one with the bounds you want")
        object.__setattr__(self, key, value)

    def __repr__(self) -> str:
        inner = [f"{b}={v!r}" for b, v in self.bound_values.items()]
        if self.equal_nan:
            inner.append("equal_nan=True")
        return f"{self.name}({', '.join(inner)})"

    def __str__(self) -> str:
        parts = [f"{b}={v!r}" for b, v in self.bound_values.items()]
        if self.equal_nan:
            parts.append("equal_nan")
        return self.name + (":" + ",".join(parts) if parts else "")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Predicate):
            return NotImplemented
        return (type(self) is type(other) and self.bound_values == other.bound_values
                and self.equal_nan == other.equal_nan)

    def __hash__(self) -> int:
        return hash((type(self), tuple(self.bound_values.items()), self.equal_nan))

    @classmethod
    def parse(cls, text: str) -> Predicate:
        """Build a predicate from its text form, e.g. ``"rel_l2:max=1e-2"``; see :func:`parse_predicate`.

        Called on a concrete subclass, the text must name that subclass.
        """
        from .parse import parse_predicate

        predicate = parse_predicate(text)
        if not isinstance(predicate, cls):
            raise ValueError(f"{text!r} names {predicate.name}, not {cls.__name__}")
        return predicate

    # -- applying it -------------------------------------------------------------------------------

    def refusal(self, dtype: torch.dtype) -> str | None:
        """Why this predicate cannot judge an output of ``dtype`` (None when it can).

        The base rule: a predicate that is not ``discrete`` is refused on integer and boolean outputs
        (exact comparison, ``equal()``, is the way out), and on complex ones.
        """
        if is_discrete_dtype(dtype) and not self.discrete:
            return (
                f"{self.name} measures a continuous distance, which has no meaning on an output of "
                f"dtype {dtype_name(dtype)}; compare it exactly with equal() instead"
            )
        if dtype.is_complex and not self.discrete:
            return (
                f"{self.name} is not defined on complex outputs; compare torch.view_as_real(...) of "
                "both sides, or use equal()"
            )
        return None

    def measure(self, candidate: torch.Tensor, reference: torch.Tensor | None) -> tuple[dict[str, float], str | None]:
        """Measure ``candidate`` (against ``reference``): the measured values and an optional note.

        The note is set when the measure changed meaning (it says what was measured instead).
        ``reference`` is None only for predicates whose ``needs_reference`` is False.
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement measure")

    def judge(self, values: Mapping[str, float]) -> bool:
        """The verdict on measured ``values`` against this instance's bounds."""
        raise NotImplementedError(f"{type(self).__name__} does not implement judge")

    def evaluate(self, candidate: torch.Tensor, reference: torch.Tensor | None) -> PredicateResult:
        """Measure and wrap the measurement in a :class:`PredicateResult`."""
        if reference is None and self.needs_reference:
            raise ValueError(f"{self.name} compares against a reference, and none was given")
        if reference is not None and (candidate.shape != reference.shape or candidate.dtype != reference.dtype):
            raise ValueError(
                f"{self.name} compares tensors of one shape and dtype, got candidate "
                f"{tuple(candidate.shape)} {dtype_name(candidate.dtype)} and reference "
                f"{tuple(reference.shape)} {dtype_name(reference.dtype)}"
            )
        problem = self.refusal(candidate.dtype)
        if problem is not None:
            raise TypeError(problem)
        values, note = self.measure(candidate, reference)
        return PredicateResult(self, values, note)


# Names the reference implementation's check records use, readable on every result (``values["mismatched"]``) but
# not listed with the values (reports, JSON): an alias of a value measured under this project's name, or, for
# ``elements`` and ``max_violation``, a value a predicate measures for that name alone.
REFERENCE_ALIASES = {"mismatched": "mismatches", "absolute_l2": "abs_l2"}
REFERENCE_ONLY = frozenset({"elements", "max_violation"})


class MeasuredValues(Mapping[str, float]):
    """A result's measured values, read-only; also answers the reference implementation's key names."""

    def __init__(self, listed: Mapping[str, float], hidden: Mapping[str, float]) -> None:
        self._listed = MappingProxyType(dict(listed))
        self._hidden = MappingProxyType(dict(hidden))

    def __getitem__(self, key: str) -> float:
        if key in self._listed:
            return self._listed[key]
        if key in self._hidden:
            return self._hidden[key]
        alias = REFERENCE_ALIASES.get(key)
        if alias is not None and alias in self._listed:
            return self._listed[alias]
        raise KeyError(key)

    def __iter__(self) -> Any:
        return iter(self._listed)

    def __len__(self) -> int:
        return len(self._listed)

    def __repr__(self) -> str:
        return repr(dict(self._listed))


def _readonly_values(values: Mapping[str, float]) -> Mapping[str, float]:
    checked: dict[str, float] = {}
    for key, value in values.items():
        if not isinstance(key, str):
            raise TypeError(f"measured value names must be str, got {key!r}")
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"measured value {key} must be a real number, got {value!r}")
        checked[key] = float(value)
    listed = {k: v for k, v in checked.items() if k not in REFERENCE_ONLY and k not in REFERENCE_ALIASES}
    hidden = {k: v for k, v in checked.items() if k in REFERENCE_ONLY}
    return MeasuredValues(listed, hidden)


@dataclass(frozen=True)
class PredicateResult:
    """What one predicate measured on one output, and its verdict.

    Attributes:
        predicate: the predicate applied (it carries its bounds).
        values: what it measured, by name (e.g. ``{"rel_l2": 3.2e-07}``); read-only.
        note: set when the measure changed meaning at the values given (e.g. a relative distance
            against an all-zero reference), saying what was measured instead; None otherwise.
        passed: derived, ``predicate.judge(values)``; it cannot be set independently.
    """

    predicate: Predicate
    values: Mapping[str, float] = field(default_factory=dict)
    note: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.predicate, Predicate):
            raise TypeError(f"predicate must be a Predicate instance, got {self.predicate!r}")
        object.__setattr__(self, "values", _readonly_values(self.values))

    @property
    def passed(self) -> bool:
        """Whether the measured values meet the predicate's bounds."""
        return bool(self.predicate.judge(self.values))

"""Building a predicate from its text form, as a command line states it."""

from __future__ import annotations

from .predicate import Predicate
from .predicates import PREDICATES

__all__ = ["parse_predicate"]


def parse_predicate(text: str) -> Predicate:
    """Build a predicate from ``"name"`` or ``"name:bound=value,bound=value"``.

    Examples: ``"equal"``, ``"nan_inf"``, ``"rel_l2:max=1e-2"``, ``"allclose:atol=1e-3,rtol=1e-3"``.
    Spaces around the parts are ignored. ``str(predicate)`` gives this form back.

    Raises:
        ValueError: the text is malformed, names an unknown predicate (the message lists the valid
            ones), misses or adds a bound (the message lists the bounds it takes), or a value is not a
            number or out of range.
    """
    if not isinstance(text, str):
        raise TypeError(f"a predicate's text form is a str, got {type(text).__name__}")
    name, sep, rest = text.strip().partition(":")
    name = name.strip()
    if not name:
        raise ValueError(f"empty predicate in {text!r}; expected NAME or NAME:bound=value,...")
    cls = PREDICATES.get(name)
    if cls is None:
        valid = ", ".join(c.signature() for c in PREDICATES.values())
        raise ValueError(f"unknown predicate {name!r} in {text!r}; valid predicates: {valid}")
    bounds: dict[str, float] = {}
    if sep and rest.strip():
        for item in rest.split(","):
            key, eq, raw = item.partition("=")
            key, raw = key.strip(), raw.strip()
            if not eq or not key or not raw:
                raise ValueError(
                    f"malformed bound {item.strip()!r} in {text!r}; expected bound=value, e.g. {_example(cls)}"
                )
            if key in bounds:
                raise ValueError(f"bound {key} given twice in {text!r}")
            try:
                bounds[key] = float(raw)
            except ValueError:
                raise ValueError(f"bound {key} of {name} in {text!r} is not a number: {raw!r}") from None
    try:
        return cls(**bounds)
    except TypeError as error:
        raise ValueError(f"{error} (in {text!r}; write it as {_example(cls)})") from error


def _example(cls: type[Predicate]) -> str:
    if not cls.bounds:
        return cls.name
    return cls.name + ":" + ",".join(f"{b}=..." for b in cls.bounds)

"""Building a predicate from its text form, as a command line states it."""

from __future__ import annotations

from .predicate import Predicate
from .predicates import PREDICATES

__all__ = ["parse_predicate"]


_TRUE = ("true", "1", "yes")
_FALSE = ("false", "0", "no")


def parse_predicate(text: str) -> Predicate:
    """Build a predicate from ``"name"`` or ``"name:bound=value,bound=value"``, optionally with ``equal_nan``.

    Examples: ``"equal"``, ``"nan_inf"``, ``"rel_l2:max=1e-2"``, ``"allclose:atol=1e-3,rtol=1e-3"``,
    ``"allclose:atol=1e-3,rtol=1e-3,equal_nan"`` (NaNs at the same positions count as equal; also
    ``equal_nan=true`` / ``equal_nan=false``), ``"equal:equal_nan"``. Spaces around the parts are ignored.
    ``str(predicate)`` gives this form back.

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
    flags: dict[str, bool] = {}
    if sep and rest.strip():
        for item in rest.split(","):
            key, eq, raw = item.partition("=")
            key, raw = key.strip(), raw.strip()
            if key == "equal_nan":
                if "equal_nan" in flags:
                    raise ValueError(f"equal_nan given twice in {text!r}")
                if not cls.takes_equal_nan:
                    raise ValueError(
                        f"{name} takes no equal_nan in {text!r}: it judges finiteness alone (a NaN always fails "
                        "it); equal_nan belongs to the predicates that compare against a reference"
                    )
                flags["equal_nan"] = _flag(text, raw) if eq else True
                continue
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
        return cls(**bounds, **flags)
    except TypeError as error:
        raise ValueError(f"{error} (in {text!r}; write it as {_example(cls)})") from error


def _flag(text: str, raw: str) -> bool:
    if raw.lower() in _TRUE:
        return True
    if raw.lower() in _FALSE:
        return False
    raise ValueError(f"equal_nan={raw!r} in {text!r} is not true or false; write equal_nan alone to set it")


def _example(cls: type[Predicate]) -> str:
    if not cls.bounds:
        return cls.name
    return cls.name + ":" + ",".join(f"{b}=..." for b in cls.bounds)

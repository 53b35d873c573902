"""How measured numbers are written in notes and report tables."""

from __future__ import annotations

import math

__all__ = ["value_text"]


def value_text(value: float) -> str:
    """A float as reports print it: integers without a fraction, otherwise six significant digits."""
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.6g}"

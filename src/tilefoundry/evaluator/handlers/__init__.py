"""Torch handlers, one file per op family (mirrors ir/ops)."""

from . import cache, creation, elementwise, nn, placement, reduction, shape  # noqa: F401

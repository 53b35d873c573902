"""The HIR op set: importing this package registers every op's type rule."""

from . import cache, creation, elementwise, nn, placement, reduction, shape  # noqa: F401

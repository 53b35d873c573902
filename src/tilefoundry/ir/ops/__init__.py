"""The HIR op set: importing this package registers every op's type rule."""

from ..core.op import attach_schemas
from . import cache, creation, elementwise, nn, placement, reduction, shape  # noqa: F401
from .schemas import SCHEMAS

attach_schemas(SCHEMAS)

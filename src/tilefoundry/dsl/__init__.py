"""The authoring DSL: annotations, placement scopes, decorators and the ``tf`` op namespace."""

from ..ir.types.dim import DimVar
from ..ir.types.shard import B, P, S, Topology
from . import tf
from .annotations import ConstTensor, Tensor
from .decorators import func, module
from .mesh import Mesh

__all__ = ["B", "ConstTensor", "DimVar", "Mesh", "P", "S", "Tensor", "Topology", "func", "module", "tf"]

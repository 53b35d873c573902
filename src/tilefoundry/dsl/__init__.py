"""The authoring DSL: annotations, placement scopes, decorators and the ``tf`` op namespace."""

from ..ir.core.dispatch import DimVarRangePat
from ..ir.ops.reduction import ReduceKind
from ..ir.types.dim import DimVar
from ..ir.types.shard import B, P, S, Topology
from . import tf
from .annotations import ConstTensor, Tensor
from .decorators import func, module
from .mesh import Mesh

__all__ = ["B", "ConstTensor", "DimVar", "DimVarRangePat", "Mesh", "P", "ReduceKind", "S", "Tensor", "Topology",
           "func", "module", "tf"]

"""IR types: element types, symbolic dims, tensor types, storage and placement vocabulary."""

from .dim import Dim, DimExpr, DimVar, FloorDiv, dims_equal, floordiv, product, total
from .dtype import (
    ALL_DTYPES,
    DType,
    bf16,
    bool_,
    dtype_of,
    f8e8m0,
    f16,
    f32,
    fp8e4m3,
    fp8e5m2,
    i8,
    i32,
    i64,
)
from .shard import B, Dynamic, MeshAxis, MeshSpec, P, S, ShardLayout, Split, Topology
from .storage import Storage, storage_of
from .tensor_type import TensorType

__all__ = [
    "ALL_DTYPES", "B", "DType", "Dim", "DimExpr", "DimVar", "Dynamic", "FloorDiv", "MeshAxis", "MeshSpec",
    "P", "S", "ShardLayout", "Split", "Storage", "TensorType", "Topology", "bf16", "bool_", "dims_equal",
    "dtype_of", "f16", "f32", "f8e8m0", "floordiv", "fp8e4m3", "fp8e5m2", "i8", "i32", "i64", "product",
    "storage_of", "total",
]

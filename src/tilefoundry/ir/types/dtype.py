"""Element types: one frozen descriptor per dtype, with its torch counterpart."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class DType:
    """An element type of the IR.

    Attributes:
        name: the canonical spelling used in annotations (``"bf16"``).
        torch_dtype: the torch dtype the evaluator computes with.
        bits: storage width in bits.
        kind: ``"float"``, ``"int"`` or ``"bool"``.
    """

    name: str
    torch_dtype: torch.dtype
    bits: int
    kind: str

    @property
    def is_float(self) -> bool:
        """True for floating-point types (including fp8 and the e8m0 scale type)."""
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        """True for signed integer types."""
        return self.kind == "int"

    @property
    def is_bool(self) -> bool:
        """True for the boolean type."""
        return self.kind == "bool"

    @classmethod
    def from_name(cls, name: str) -> DType:
        """The dtype spelled ``name`` (``"bf16"``, ``"f32"``, ``"bfloat16"``...).

        Raises:
            TypeError: the name spells no dtype; the message lists the valid names.
        """
        if not isinstance(name, str):
            raise TypeError(f"DType.from_name takes a dtype name (str), got {type(name).__name__} {name!r}")
        return dtype_of(name)

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"DType({self.name})"


f32 = DType("f32", torch.float32, 32, "float")
f16 = DType("f16", torch.float16, 16, "float")
bf16 = DType("bf16", torch.bfloat16, 16, "float")
fp8e4m3 = DType("fp8e4m3", torch.float8_e4m3fn, 8, "float")
fp8e5m2 = DType("fp8e5m2", torch.float8_e5m2, 8, "float")
f8e8m0 = DType("f8e8m0", torch.float8_e8m0fnu, 8, "float")
i8 = DType("i8", torch.int8, 8, "int")
i32 = DType("i32", torch.int32, 32, "int")
i64 = DType("i64", torch.int64, 64, "int")
bool_ = DType("bool", torch.bool, 8, "bool")

ALL_DTYPES: tuple[DType, ...] = (f32, f16, bf16, fp8e4m3, fp8e5m2, f8e8m0, i8, i32, i64, bool_)

_BY_NAME: dict[str, DType] = {d.name: d for d in ALL_DTYPES}
# Long spellings people type out of habit from torch / numpy.
_BY_NAME.update(
    {
        "float32": f32,
        "float16": f16,
        "bfloat16": bf16,
        "float8_e4m3fn": fp8e4m3,
        "float8_e5m2": fp8e5m2,
        "float8_e8m0fnu": f8e8m0,
        "int8": i8,
        "int32": i32,
        "int64": i64,
    }
)
_BY_TORCH: dict[torch.dtype, DType] = {d.torch_dtype: d for d in ALL_DTYPES}


def dtype_of(spec: str | DType | torch.dtype) -> DType:
    """Resolve a dtype spelling (``"bf16"``, ``DType``, ``torch.bfloat16``) to its descriptor.

    Raises:
        TypeError: the spelling names no dtype; the message lists the valid names.
    """
    if isinstance(spec, DType):
        return spec
    if isinstance(spec, torch.dtype):
        if spec in _BY_TORCH:
            return _BY_TORCH[spec]
        raise TypeError(f"torch dtype {spec} has no TileFoundry dtype; valid: {valid_dtype_names()}")
    if isinstance(spec, str) and spec in _BY_NAME:
        return _BY_NAME[spec]
    raise TypeError(f"unknown dtype name {spec!r}; valid names: {valid_dtype_names()}")


def valid_dtype_names() -> str:
    """The canonical dtype names, comma separated, for error messages."""
    return ", ".join(d.name for d in ALL_DTYPES)

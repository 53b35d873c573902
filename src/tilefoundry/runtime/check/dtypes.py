"""Short dtype spellings for reports, and the split between discrete and continuous element types."""

from __future__ import annotations

import torch

__all__ = ["dtype_name", "is_discrete_dtype"]

# The spellings match the IR's dtype names (``tilefoundry.ir.types.dtype``), plus f64 and the
# unsigned / 16-bit integers torch can also produce.
_NAMES: dict[torch.dtype, str] = {
    torch.float64: "f64",
    torch.float32: "f32",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.float8_e4m3fn: "fp8e4m3",
    torch.float8_e5m2: "fp8e5m2",
    torch.float8_e8m0fnu: "f8e8m0",
    torch.int8: "i8",
    torch.int16: "i16",
    torch.int32: "i32",
    torch.int64: "i64",
    torch.uint8: "u8",
    torch.bool: "bool",
}


def dtype_name(dtype: torch.dtype) -> str:
    """The short name of ``dtype`` as reports print it (``torch.bfloat16`` -> ``"bf16"``)."""
    name = _NAMES.get(dtype)
    if name is not None:
        return name
    return str(dtype).removeprefix("torch.")


def is_discrete_dtype(dtype: torch.dtype) -> bool:
    """True for integer and boolean element types, on which only exact comparison has meaning."""
    return not dtype.is_floating_point and not dtype.is_complex

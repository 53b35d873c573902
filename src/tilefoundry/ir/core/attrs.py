"""Op attribute schemas: each op's attribute names, types and defaults, checked when a node is made.

A schema turns the free-form attributes a ``tf.*`` call passes into typed ones: an unknown name, a
missing required attribute or a value of the wrong kind is refused (naming the op, the attribute and
what it takes), defaults are filled in, and spellings are normalised (a dtype name becomes its DType, a
``ReduceKind`` member its name). Some defaults derive from the operands' types, such as the compute
dtype of a normalisation (f32 for 16-bit inputs). Lowering and the canonical text read attributes in
schema order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from ..types.dim import DimExpr
from ..types.dtype import DType, dtype_of, f32
from ..types.tensor_type import TensorType
from .errors import OpTypeError


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()


@dataclass(frozen=True)
class Derived:
    """A default computed from the operand types (``doc`` says how, for messages and docs)."""

    fn: Callable[[tuple[TensorType, ...]], Any]
    doc: str


@dataclass(frozen=True)
class Attr:
    """One attribute: its name, the kind of value it takes (for messages), a check that validates and
    normalises a value (raising TypeError / ValueError), and its default (a value, REQUIRED or Derived)."""

    name: str
    kind: str
    check: Callable[[Any], Any]
    default: Any = REQUIRED


@dataclass(frozen=True)
class AttrSchema:
    """The attributes of one op, in the order they are printed."""

    attrs: tuple[Attr, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        """The attribute names, in schema order."""
        return tuple(a.name for a in self.attrs)

    def apply(self, op: str, attrs: dict[str, Any], types: tuple[TensorType, ...]) -> dict[str, Any]:
        """The checked attributes, defaults filled, in schema order; OpTypeError names what is wrong."""
        unknown = sorted(set(attrs) - set(self.names))
        if unknown:
            takes = ", ".join(f"{a.name} ({a.kind})" for a in self.attrs) or "no attributes"
            raise OpTypeError(f"unknown attribute{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                              f"{op} takes {takes}")
        out: dict[str, Any] = {}
        for a in self.attrs:
            if a.name in attrs:
                value = attrs[a.name]
            elif isinstance(a.default, Derived):
                out[a.name] = a.default.fn(types)
                continue
            elif a.default is REQUIRED:
                raise OpTypeError(f"attribute {a.name} ({a.kind}) is required")
            else:
                value = a.default
            try:
                out[a.name] = a.check(value)
            except (TypeError, ValueError) as e:
                raise OpTypeError(f"attribute {a.name} takes {a.kind}, got {value!r}: {e}") from None
        return out


# -- value checks -------------------------------------------------------------------------------------


def integer(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError("not an int")
    return v


def number(v: Any) -> int | float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError("not a number")
    return v


def scalar(v: Any) -> int | float | bool:
    if not isinstance(v, (bool, int, float)):
        raise TypeError("not a number or bool")
    return v


def boolean(v: Any) -> bool:
    if not isinstance(v, bool):
        raise TypeError("not a bool")
    return v


def optional(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``check``, or None."""
    return lambda v: None if v is None else check(v)


def choice(*values: str) -> Callable[[Any], str]:
    """One of the named strings (an Enum member stands for its value)."""

    def check(v: Any) -> str:
        if isinstance(v, Enum):
            v = v.value
        if v not in values:
            raise ValueError(f"valid: {', '.join(values)}")
        return v

    return check


def dtype(v: Any) -> DType:
    return dtype_of(v)


def anything(v: Any) -> Any:
    return v


def ints(v: Any) -> tuple[int, ...]:
    """A tuple of ints (an int alone stands for a one-element tuple)."""
    if isinstance(v, int) and not isinstance(v, bool):
        return (v,)
    if isinstance(v, (str, bytes)) or not isinstance(v, Sequence):
        raise TypeError("not a tuple of ints")
    return tuple(integer(x) for x in v)


def dims(v: Any) -> tuple[Any, ...]:
    """A tuple of extents (ints or DimVar expressions; -1 allowed where an op infers one)."""
    if isinstance(v, (str, bytes)) or not isinstance(v, Sequence):
        raise TypeError("not a tuple of extents")
    for d in v:
        if isinstance(d, bool) or not isinstance(d, (int, DimExpr)):
            raise TypeError(f"{d!r} is not an int or DimVar")
    return tuple(v)


def dim(v: Any) -> Any:
    if isinstance(v, bool) or not isinstance(v, (int, DimExpr)):
        raise TypeError("not an int or DimVar")
    return v


def wide_float(types: tuple[TensorType, ...]) -> DType:
    """f32 for floats narrower than 32 bits, else the first operand's own dtype."""
    dt = types[0].dtype
    return f32 if dt.is_float and dt.bits < 32 else dt


COMPUTE_DTYPE = Attr("compute_dtype", "a dtype", dtype, Derived(wide_float, "f32 for 16- and 8-bit floats"))
ACC_DTYPE = Attr("acc_dtype", "a dtype", dtype, Derived(wide_float, "f32 for 16- and 8-bit floats"))

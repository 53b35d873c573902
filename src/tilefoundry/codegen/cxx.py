"""C++ spellings shared by every target's emitter: identifiers, element types, literals, extents, layouts."""

from __future__ import annotations

import math
import re

import numpy as np

from ..ir.types.dim import Dim, DimExpr, DimVar, FloorDiv
from ..ir.types.dtype import DType
from ..tir.buffer import Literal
from ..tir.layout import TLayout

# C++ element type, DLPack type code and bits of each compiled dtype.
CXX_TYPES = {
    "f32": ("float", "kDLFloat", 32),
    "f16": ("cute::half_t", "kDLFloat", 16),
    "bf16": ("cute::bfloat16_t", "kDLBfloat", 16),
    "fp8e4m3": ("cute::float_e4m3_t", "kDLFloat8_e4m3fn", 8),
    "fp8e5m2": ("cute::float_e5m2_t", "kDLFloat8_e5m2", 8),
    "i8": ("int8_t", "kDLInt", 8),
    "i32": ("int32_t", "kDLInt", 32),
    "i64": ("int64_t", "kDLInt", 64),
    "bool": ("bool", "kDLBool", 8),
}

# The type arithmetic runs in (the runtime's compute_t): 16-bit and 8-bit floats compute in float.
COMPUTE_TYPES = {"f32": "float", "f16": "float", "bf16": "float", "fp8e4m3": "float", "fp8e5m2": "float",
                 "i8": "int8_t", "i32": "int32_t",
                 "i64": "int64_t", "bool": "bool"}

_KEYWORDS = frozenset("""
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char16_t char32_t char8_t class
compl concept const const_cast consteval constexpr constinit continue co_await co_return co_yield decltype
default delete do double dynamic_cast else enum explicit export extern false float for friend goto if inline
int long mutable namespace new noexcept not not_eq nullptr operator or or_eq private protected public register
reinterpret_cast requires return short signed sizeof static static_assert static_cast struct switch template
this thread_local throw true try typedef typeid typename union unsigned using virtual void volatile wchar_t
while xor xor_eq int8_t int32_t int64_t cute tilefoundry ops shard host cpu std tvm Int
abs exp exp2 log log2 sqrt pow min max tanh erf floor ceil round fabs expf logf sqrtf powf tanhf
""".split())


def cxx_type(dtype: DType) -> str:
    """The C++ element type of ``dtype``."""
    return CXX_TYPES[dtype.name][0]


class Names:
    """C++ identifiers for one scope: valid, not keywords, and distinct."""

    def __init__(self, reserved: tuple[str, ...] = ()) -> None:
        self._taken: set[str] = set(reserved)
        self._by_key: dict[object, str] = {}

    def __call__(self, key: object, preferred: str) -> str:
        if key in self._by_key:
            return self._by_key[key]
        base = re.sub(r"\W", "_", preferred) or "v"
        if base[0].isdigit() or base in _KEYWORDS or base.startswith("__"):
            base = f"v_{base.lstrip('_')}"
        name, k = base, 1
        while name in self._taken:
            name = f"{base}_{k}"
            k += 1
        self._taken.add(name)
        self._by_key[key] = name
        return name


def literal(lit: Literal, *, compute: bool = False) -> str:
    """``lit`` in its dtype (or, with ``compute``, in the type its dtype computes in): no double anywhere."""
    name = lit.dtype.name
    ctype = COMPUTE_TYPES[name] if compute else CXX_TYPES[name][0]
    if lit.dtype.is_bool:
        return "true" if lit.value else "false"
    if lit.dtype.is_int:
        v = int(lit.value)
        info = np.iinfo(ctype.replace("_t", ""))
        if v == info.min:  # -2147483648 is the negation of a literal one past the type's range
            return f"{ctype.replace('_t', '').upper()}_MIN"
        return f"{ctype}({v})"
    text = _float_text(float(lit.value))
    return text if ctype == "float" else f"{ctype}({text})"


def _float_text(v: float) -> str:
    # INFINITY and NAN are constants on both compilers; std::numeric_limits' are host functions nvcc refuses in
    # a __global__ function.
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return f"{'-' if v < 0 else ''}INFINITY"
    text = str(np.float32(v))  # shortest text that reads back as this float
    if "e" not in text and "." not in text:
        text += ".0"
    return text + "f"


def dim_expr(d: Dim, names: dict[str, str]) -> str:
    """An int64 C++ expression of an extent; DimVars by their C++ names."""
    if isinstance(d, int):
        return str(d)
    if isinstance(d, DimVar):
        return names[d.name]
    if isinstance(d, FloorDiv):
        return f"({dim_expr(d.num.simplify(), names)}) / ({dim_expr(d.den.simplify(), names)})"
    terms = []
    for mono, coef in sorted(DimExpr.lift(d)._terms.items(), key=lambda mc: (-len(mc[0]), str(mc[0]))):
        factors = [_atom(a, names) for a in mono]
        if coef != 1 or not factors:
            factors.insert(0, str(coef))
        terms.append(" * ".join(factors))
    return " + ".join(terms).replace("+ -", "- ")


def _atom(a: object, names: dict[str, str]) -> str:
    text = dim_expr(a, names)  # type: ignore[arg-type]
    return f"({text})" if isinstance(a, FloorDiv) else text


def mode(d: Dim, names: dict[str, str]) -> str:
    """A CuTe extent or stride: ``Int<N>{}`` when static, an int computed at run time otherwise."""
    if isinstance(d, int):
        return f"Int<{d}>{{}}"
    return f"static_cast<int>({dim_expr(d, names)})"


def layout(layout: TLayout, names: dict[str, str]) -> str:
    """``cute::make_layout(shape, stride)`` of a TLayout (its mesh, if any, left out)."""
    shape = ", ".join(mode(d, names) for d in layout.shape)
    stride = ", ".join(mode(d, names) for d in layout.stride)
    return f"cute::make_layout(cute::make_shape({shape}), cute::make_stride({stride}))"


def shard_layout(layout: TLayout, mesh: str, names: dict[str, str]) -> str:
    """``make_shard_layout(layout, attrs, mesh)`` for a distributed TLayout (``, bound`` after the mesh where
    the layout is padded past its existing elements)."""
    shape = ", ".join(mode(d, names) for d in layout.shape)
    stride = ", ".join(mode(d, names) for d in layout.stride)
    attrs = ", ".join(shard_attr(a) for a in layout.attrs)
    bound = "" if layout.bound is None else f", {mode(layout.bound, names)}"
    return (f"make_shard_layout(cute::make_layout(cute::make_shape({shape}), cute::make_stride({stride})), "
            f"cute::make_tuple({attrs}), {mesh}{bound})")


def shard_attr(a: object) -> str:
    """``shard::S<k>{}``, ``shard::B{}`` or ``shard::P<op>{}``."""
    kind = a.kind  # type: ignore[attr-defined]
    if kind == "S":
        return f"shard::S<{a.mode}>{{}}"  # type: ignore[attr-defined]
    if kind == "P":
        return f"shard::P<ops::{a.reduction}_op>{{}}"  # type: ignore[attr-defined]
    return "shard::B{}"


def mesh_layout(extents: tuple[int, ...], strides: tuple[int, ...]) -> str:
    """The CuTe layout of a mesh."""
    return (f"cute::make_layout(cute::make_shape({', '.join(f'Int<{e}>{{}}' for e in extents)}), "
            f"cute::make_stride({', '.join(f'Int<{s}>{{}}' for s in strides)}))")


def string(text: str) -> str:
    """A C++ string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'

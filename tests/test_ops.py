"""Every tf op on the evaluator equals a direct torch computation, on static and on DimVar shapes.

Each case below is one op (or one spelling / flavour of it). A case is run twice:

* static: the shape template is instantiated with the int ``STATIC`` and evaluated once;
* dimvar: the template is instantiated with ``DimVar("seq", 1, 64)``; the same ``@func`` is then
  evaluated with ``seq`` bound to each of ``EXTENTS``.

Both times the result types recorded in the graph are compared with the expected types (symbolic in
the DimVar run: ``seq + 4``, ``2*seq``...), the op must appear in the graph, the inputs must be left
untouched, and the evaluated values are compared with the case's torch reference:

* ``EXACT``: same dtype and ``torch.equal`` (bit equality for 8-bit floats). Used for integer/bool
  results and for f32 wherever the reference performs the same torch computation (CPU torch is
  deterministic for one op sequence); 8-bit float results are compared exactly against the f32
  computation rounded once to the 8-bit type, which is the evaluator's stated semantics for them.
* ``LN_F32``: ``|out - ref| <= 1e-5 + 1e-5*|ref|``, for layer_norm, whose reference is
  ``torch.nn.functional.layer_norm`` (a different variance algorithm than mean-of-squares).
* ``POW_F32``: ``|out - ref| <= 2**-22*|ref|`` (two f32 ulps) for ``x ** 2.0``: the scalar becomes a
  rank-0 f32 tensor, and torch's pow with a tensor exponent does not take the exact ``x*x`` path.
* ``BF16``: bf16 results against an f64 reference computed from the same bf16 inputs:
  ``|out - ref| <= 1e-5 + 2**-7*|ref|``, i.e. at most one bf16 ulp (bf16 has 8 significant bits).
* ``BF16_MM``: bf16 matmul, one bf16 ulp plus ``2**-7 * (|a| @ |b|)`` for the rounding of the
  products/partial sums.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from tilefoundry import func
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, tf
from tilefoundry.ir.types import TensorType, floordiv

SEQ = DimVar("seq", 1, 64)
STATIC = 5
EXTENTS = (3, 6)

EXACT = "exact"


@dataclass(frozen=True)
class Tol:
    """``|out - ref| <= atol + rtol * |ref|`` in f64; ``mm`` adds ``rtol * (|a| @ |b|)`` (matmul)."""

    rtol: float
    atol: float
    mm: bool = False


LN_F32 = Tol(rtol=1e-5, atol=1e-5)
POW_F32 = Tol(rtol=2**-22, atol=0.0)
BF16 = Tol(rtol=2**-7, atol=1e-5)
BF16_MM = Tol(rtol=2**-7, atol=1e-5, mm=True)


# -- input generators: (concrete shape, torch dtype, generator) -> tensor ----------------------------------


def _default(shape: tuple[int, ...], dt: torch.dtype, g: torch.Generator) -> torch.Tensor:
    if dt == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dt.is_floating_point:
        return torch.randn(shape, generator=g).to(dt)
    return torch.randint(-9, 10, shape, generator=g).to(dt)


def positive(shape: tuple[int, ...], dt: torch.dtype, g: torch.Generator) -> torch.Tensor:
    """Values in [0.25, 2.25): log, sqrt, rsqrt, pow bases, divisors."""
    return (torch.rand(shape, generator=g) * 2 + 0.25).to(dt)


def small_ints(shape: tuple[int, ...], dt: torch.dtype, g: torch.Generator) -> torch.Tensor:
    """Values in {-2..2}: comparisons then see ties as well as strict orders."""
    return torch.randint(-2, 3, shape, generator=g).to(dt)


def nonzero(shape: tuple[int, ...], dt: torch.dtype, g: torch.Generator) -> torch.Tensor:
    """Integers in [-9, -1] u [1, 9]: integer divisors."""
    mag = torch.randint(1, 10, shape, generator=g)
    sign = torch.randint(0, 2, shape, generator=g) * 2 - 1
    return (mag * sign).to(dt)


def below(n: int) -> Callable[..., torch.Tensor]:
    """Indices in [0, n)."""
    return lambda shape, dt, g: torch.randint(0, n, shape, generator=g).to(dt)


def scalar(v: int) -> Callable[..., torch.Tensor]:
    """A rank-0 tensor holding ``v``."""
    return lambda shape, dt, g: torch.tensor(v, dtype=dt)


@dataclass(frozen=True)
class A:
    """One parameter: shape template, dtype name, value generator, weight or activation."""

    shape: tuple
    dtype: str = "f32"
    gen: Callable[..., torch.Tensor] = _default
    const: bool = False


def T(shape: tuple, dtype: str = "f32", storage: str = "gmem") -> TensorType:  # noqa: N802 - reads as a type
    return TensorType(shape, dtype, storage=storage)


@dataclass(frozen=True)
class Case:
    op: str  # the HIR op the body must record
    label: str
    ins: Callable[[Any], list[A]]  # S -> parameters
    body: Callable[..., Any]  # traced with tf
    ref: Callable[..., Any]  # plain torch on the concrete inputs
    out: Callable[[Any], Any]  # S -> expected TensorType (or tuple of them)
    cmp: Any = EXACT
    spelling: str | None = None  # the tf name the body calls, when it records another op (maximum -> max)

    @property
    def id(self) -> str:
        return f"{self.op}-{self.label}" if self.label else self.op


CASES: list[Case] = []


def case(op: str, label: str, ins, body, ref, out, cmp: Any = EXACT, spelling: str | None = None) -> None:  # noqa: ANN001
    CASES.append(Case(op, label, ins, body, ref, out, cmp, spelling))


def f64(t: torch.Tensor) -> torch.Tensor:
    return t.double()


bf = torch.bfloat16

# -- elementwise binary --------------------------------------------------------------------------------------

case("add", "bcast_row", lambda S: [A((S, 8)), A((8,))], lambda x, y: tf.add(x, y),
     lambda x, y: x + y, lambda S: T((S, 8)))
case("sub", "bcast_both", lambda S: [A((S, 1, 8)), A((4, 1))], lambda x, y: tf.sub(x, y),
     lambda x, y: x - y, lambda S: T((S, 4, 8)))
case("mul", "", lambda S: [A((S, 8)), A((S, 8))], lambda x, y: tf.mul(x, y),
     lambda x, y: x * y, lambda S: T((S, 8)))
case("div", "f32", lambda S: [A((S, 8)), A((S, 8), gen=positive)], lambda x, y: tf.div(x, y),
     lambda x, y: x / y, lambda S: T((S, 8)))
case("div", "i32_trunc", lambda S: [A((S, 8), "i32"), A((S, 8), "i32", nonzero)], lambda x, y: tf.div(x, y),
     lambda x, y: torch.trunc(f64(x) / f64(y)).to(torch.int32), lambda S: T((S, 8), "i32"))
case("div", "i64_trunc_bcast", lambda S: [A((S, 8), "i64"), A((8,), "i64", nonzero)], lambda x, y: tf.div(x, y),
     lambda x, y: torch.trunc(f64(x) / f64(y)).to(torch.int64), lambda S: T((S, 8), "i64"))
case("max", "", lambda S: [A((S, 8)), A((S, 8))], lambda x, y: tf.max(x, y),
     lambda x, y: torch.maximum(x, y), lambda S: T((S, 8)))
case("max", "i32", lambda S: [A((S, 8), "i32"), A((1, 8), "i32")], lambda x, y: tf.max(x, y),
     lambda x, y: torch.maximum(x, y), lambda S: T((S, 8), "i32"))
case("min", "", lambda S: [A((S, 8)), A((S, 8))], lambda x, y: tf.min(x, y),
     lambda x, y: torch.minimum(x, y), lambda S: T((S, 8)))
case("min", "i64", lambda S: [A((S, 8), "i64"), A((S, 8), "i64")], lambda x, y: tf.min(x, y),
     lambda x, y: torch.minimum(x, y), lambda S: T((S, 8), "i64"))
case("pow", "", lambda S: [A((S, 8), gen=positive), A((S, 8))], lambda x, y: tf.pow(x, y),
     lambda x, y: torch.pow(x, y), lambda S: T((S, 8)))
case("add", "i32", lambda S: [A((S, 8), "i32"), A((S, 8), "i32")], lambda x, y: tf.add(x, y),
     lambda x, y: x + y, lambda S: T((S, 8), "i32"))
case("mul", "bf16", lambda S: [A((S, 8), "bf16"), A((S, 8), "bf16")], lambda x, y: tf.mul(x, y),
     lambda x, y: f64(x) * f64(y), lambda S: T((S, 8), "bf16"), BF16)
case("add", "bf16", lambda S: [A((S, 8), "bf16"), A((8,), "bf16")], lambda x, y: tf.add(x, y),
     lambda x, y: f64(x) + f64(y), lambda S: T((S, 8), "bf16"), BF16)

for _op, _ref in (("lt", torch.lt), ("le", torch.le), ("gt", torch.gt), ("ge", torch.ge), ("eq", torch.eq),
                  ("ne", torch.ne)):
    case(_op, "f32", lambda S: [A((S, 8), gen=small_ints), A((S, 8), gen=small_ints)],
         lambda x, y, _op=_op: getattr(tf, _op)(x, y), lambda x, y, _ref=_ref: _ref(x, y),
         lambda S: T((S, 8), "bool"))
    case(_op, "i32_bcast", lambda S: [A((S, 8), "i32", small_ints), A((8,), "i32", small_ints)],
         lambda x, y, _op=_op: getattr(tf, _op)(x, y), lambda x, y, _ref=_ref: _ref(x, y),
         lambda S: T((S, 8), "bool"))

# -- Python operators ------------------------------------------------------------------------------------------

_XY = lambda S: [A((S, 8), gen=small_ints), A((S, 8), gen=positive)]  # noqa: E731
case("add", "op+", _XY, lambda x, y: x + y, lambda x, y: x + y, lambda S: T((S, 8)))
case("sub", "op-", _XY, lambda x, y: x - y, lambda x, y: x - y, lambda S: T((S, 8)))
case("mul", "op*", _XY, lambda x, y: x * y, lambda x, y: x * y, lambda S: T((S, 8)))
case("div", "op/", _XY, lambda x, y: x / y, lambda x, y: x / y, lambda S: T((S, 8)))
case("pow", "op**", lambda S: [A((S, 8), gen=positive), A((S, 8))], lambda x, y: x**y,
     lambda x, y: torch.pow(x, y), lambda S: T((S, 8)))
case("matmul", "op@", lambda S: [A((S, 8)), A((8, 3), const=True)], lambda x, w: x @ w,
     lambda x, w: torch.matmul(x, w), lambda S: T((S, 3)))
case("neg", "op-unary", lambda S: [A((S, 8))], lambda x: -x, lambda x: torch.neg(x), lambda S: T((S, 8)))
for _sym, _op, _pyop in (("<", "lt", lambda x, y: x < y), ("<=", "le", lambda x, y: x <= y),
                         (">", "gt", lambda x, y: x > y), (">=", "ge", lambda x, y: x >= y),
                         ("==", "eq", lambda x, y: x == y), ("!=", "ne", lambda x, y: x != y)):
    case(_op, f"op{_sym}", lambda S: [A((S, 8), gen=small_ints), A((S, 8), gen=small_ints)], _pyop, _pyop,
         lambda S: T((S, 8), "bool"))

# -- Python scalar operands: a float adopts the tensor's float dtype, an int the tensor's dtype ------------------


def _bf(v: float) -> torch.Tensor:
    return torch.tensor(v).to(bf)


case("add", "scalar_right", lambda S: [A((S, 8))], lambda x: x + 1.5, lambda x: x + 1.5, lambda S: T((S, 8)))
case("sub", "scalar_left", lambda S: [A((S, 8))], lambda x: 1.5 - x, lambda x: 1.5 - x, lambda S: T((S, 8)))
case("mul", "scalar_left", lambda S: [A((S, 8))], lambda x: 2.0 * x, lambda x: 2.0 * x, lambda S: T((S, 8)))
case("div", "scalar_left", lambda S: [A((S, 8), gen=positive)], lambda x: 1.0 / x, lambda x: 1.0 / x,
     lambda S: T((S, 8)))
case("div", "scalar_right", lambda S: [A((S, 8))], lambda x: x / 3.0, lambda x: x / 3.0, lambda S: T((S, 8)))
case("pow", "scalar_exponent", lambda S: [A((S, 8))], lambda x: x**2.0, lambda x: x * x, lambda S: T((S, 8)),
     POW_F32)
case("lt", "scalar", lambda S: [A((S, 8))], lambda x: x < 0.0, lambda x: x < 0, lambda S: T((S, 8), "bool"))
case("max", "scalar", lambda S: [A((S, 8))], lambda x: tf.max(x, 0.25), lambda x: torch.clamp_min(x, 0.25),
     lambda S: T((S, 8)))
case("min", "scalar_left", lambda S: [A((S, 8))], lambda x: tf.min(-0.5, x), lambda x: torch.clamp_max(x, -0.5),
     lambda S: T((S, 8)))
case("mul", "int_scalar_i32", lambda S: [A((S, 8), "i32")], lambda x: x * 3, lambda x: x * 3,
     lambda S: T((S, 8), "i32"))
case("sub", "int_scalar_left_i64", lambda S: [A((S, 8), "i64")], lambda x: 2 - x, lambda x: 2 - x,
     lambda S: T((S, 8), "i64"))
case("div", "int_scalar_trunc", lambda S: [A((S, 8), "i32")], lambda x: x / 4,
     lambda x: torch.trunc(f64(x) / 4).to(torch.int32), lambda S: T((S, 8), "i32"))
case("div", "int_scalar_left_trunc", lambda S: [A((S, 8), "i64", nonzero)], lambda x: 7 / x,
     lambda x: torch.trunc(7 / f64(x)).to(torch.int64), lambda S: T((S, 8), "i64"))
case("pow", "int_scalar", lambda S: [A((S, 8), "i32")], lambda x: x**2, lambda x: x * x,
     lambda S: T((S, 8), "i32"))
case("eq", "int_scalar", lambda S: [A((S, 8), "i32", small_ints)], lambda x: x == 1, lambda x: x == 1,
     lambda S: T((S, 8), "bool"))
# 0.1 is rounded to bf16 first, then multiplied in bf16 (no promotion of the tensor to f32 / f64).
case("mul", "scalar_adopts_bf16", lambda S: [A((S, 8), "bf16")], lambda x: x * 0.1, lambda x: x * _bf(0.1),
     lambda S: T((S, 8), "bf16"))
case("add", "scalar_adopts_f16", lambda S: [A((S, 8), "f16")], lambda x: x + 0.1,
     lambda x: x + torch.tensor(0.1).half(), lambda S: T((S, 8), "f16"))

# -- unary ----------------------------------------------------------------------------------------------------

for _op, _gen, _ref in (
    ("neg", _default, lambda x: -x),
    ("abs", _default, torch.abs),
    ("exp", _default, torch.exp),
    ("log", positive, torch.log),
    ("rsqrt", positive, torch.rsqrt),
    ("sqrt", positive, torch.sqrt),
    ("square", _default, lambda x: x * x),
    ("sigmoid", _default, torch.sigmoid),
    ("tanh", _default, torch.tanh),
    ("silu", _default, F.silu),
    ("relu", _default, lambda x: torch.where(x > 0, x, torch.zeros_like(x))),
):
    case(_op, "", lambda S, _gen=_gen: [A((S, 3, 4), gen=_gen)], lambda x, _op=_op: getattr(tf, _op)(x), _ref,
         lambda S: T((S, 3, 4)))
for _op, _ref in (("neg", lambda x: -x), ("abs", torch.abs), ("square", lambda x: x * x),
                  ("relu", lambda x: torch.clamp_min(x, 0))):
    case(_op, "i32", lambda S: [A((S, 8), "i32")], lambda x, _op=_op: getattr(tf, _op)(x), _ref,
         lambda S: T((S, 8), "i32"))
for _op, _ref in (("exp", torch.exp), ("silu", lambda x: x / (1 + torch.exp(-x))), ("tanh", torch.tanh)):
    case(_op, "bf16", lambda S: [A((S, 8), "bf16")], lambda x, _op=_op: getattr(tf, _op)(x),
         lambda x, _ref=_ref: _ref(f64(x)), lambda S: T((S, 8), "bf16"), BF16)

case("gelu", "none", lambda S: [A((S, 8))], lambda x: tf.gelu(x), lambda x: F.gelu(x),
     lambda S: T((S, 8)))
case("gelu", "tanh", lambda S: [A((S, 8))], lambda x: tf.gelu(x, approximate="tanh"),
     lambda x: F.gelu(x, approximate="tanh"), lambda S: T((S, 8)))
case("gelu", "none_bf16", lambda S: [A((S, 8), "bf16")], lambda x: tf.gelu(x, "none"),
     lambda x: 0.5 * f64(x) * (1 + torch.erf(f64(x) / math.sqrt(2))), lambda S: T((S, 8), "bf16"), BF16)
case("gelu", "tanh_bf16", lambda S: [A((S, 8), "bf16")], lambda x: tf.gelu(x, approximate="tanh"),
     lambda x: 0.5 * f64(x) * (1 + torch.tanh(math.sqrt(2 / math.pi) * (f64(x) + 0.044715 * f64(x) ** 3))),
     lambda S: T((S, 8), "bf16"), BF16)

# -- cast, clamp, where --------------------------------------------------------------------------------------

case("cast", "f32_bf16", lambda S: [A((S, 8))], lambda x: tf.cast(x, "bf16"), lambda x: x.to(bf),
     lambda S: T((S, 8), "bf16"))
case("cast", "bf16_f32_default", lambda S: [A((S, 8), "bf16")], lambda x: tf.cast(x),
     lambda x: x.to(torch.float32), lambda S: T((S, 8), "f32"))
case("cast", "f32_i32_truncates", lambda S: [A((S, 8))], lambda x: tf.cast(x * 4.0, dtype="i32"),
     lambda x: torch.trunc(x * 4).to(torch.int32), lambda S: T((S, 8), "i32"))
case("cast", "i64_f16", lambda S: [A((S, 8), "i64")], lambda x: tf.cast(x, "f16"), lambda x: x.to(torch.float16),
     lambda S: T((S, 8), "f16"))
case("cast", "bool_f32", lambda S: [A((S, 8), "bool")], lambda x: tf.cast(x, "f32"),
     lambda x: torch.where(x, 1.0, 0.0), lambda S: T((S, 8), "f32"))
case("cast", "torch_spelling", lambda S: [A((S, 8))], lambda x: tf.cast(x, "float16"),
     lambda x: x.to(torch.float16), lambda S: T((S, 8), "f16"))
case("clamp", "both", lambda S: [A((S, 8))], lambda x: tf.clamp(x, -0.5, 0.75),
     lambda x: torch.minimum(torch.maximum(x, torch.tensor(-0.5)), torch.tensor(0.75)), lambda S: T((S, 8)))
case("clamp", "min_only", lambda S: [A((S, 8))], lambda x: tf.clamp(x, min_val=0.0),
     lambda x: torch.maximum(x, torch.tensor(0.0)), lambda S: T((S, 8)))
case("clamp", "max_only", lambda S: [A((S, 8))], lambda x: tf.clamp(x, max_val=0.0),
     lambda x: torch.minimum(x, torch.tensor(0.0)), lambda S: T((S, 8)))
case("clamp", "i32", lambda S: [A((S, 8), "i32")], lambda x: tf.clamp(x, -3, 4),
     lambda x: torch.minimum(torch.maximum(x, torch.tensor(-3)), torch.tensor(4)).to(torch.int32),
     lambda S: T((S, 8), "i32"))
case("where", "bool_param_bcast", lambda S: [A((S, 1), "bool"), A((S, 8)), A((8,))],
     lambda c, x, y: tf.where(c, x, y), lambda c, x, y: torch.where(c, x, y), lambda S: T((S, 8)))
case("where", "traced_condition", lambda S: [A((S, 8)), A((S, 8))], lambda x, y: tf.where(x > y, x, y),
     lambda x, y: torch.maximum(x, y), lambda S: T((S, 8)))
case("where", "scalar_other", lambda S: [A((S, 8))], lambda x: tf.where(x < 0.0, 0.0, x),
     lambda x: torch.clamp_min(x, 0.0), lambda S: T((S, 8)))
case("where", "i32_scalars", lambda S: [A((S, 8), "bool"), A((S, 8), "i32")], lambda c, x: tf.where(c, x, -1),
     lambda c, x: torch.where(c, x, torch.tensor(-1, dtype=torch.int32)), lambda S: T((S, 8), "i32"))

# -- reductions ---------------------------------------------------------------------------------------------

_REDUCE_REFS = {
    "sum": lambda x, ax, k: torch.sum(x, dim=ax, keepdim=k),
    "mean": lambda x, ax, k: torch.mean(x, dim=ax, keepdim=k),
    "max": lambda x, ax, k: torch.amax(x, dim=ax, keepdim=k),
    "min": lambda x, ax, k: torch.amin(x, dim=ax, keepdim=k),
    "abs_max": lambda x, ax, k: torch.amax(x.abs(), dim=ax, keepdim=k),
}
for _kind, _r in _REDUCE_REFS.items():
    for _keep in (True, False):
        case("reduce", f"{_kind}_last_keep{_keep}", lambda S: [A((S, 4, 6))],
             lambda x, _kind=_kind, _keep=_keep: tf.reduce(x, axes=(-1,), keepdim=_keep, kind=_kind),
             lambda x, _r=_r, _keep=_keep: _r(x, (-1,), _keep),
             lambda S, _keep=_keep: T((S, 4, 1) if _keep else (S, 4)))
        case("reduce", f"{_kind}_axes02_keep{_keep}", lambda S: [A((S, 4, 6))],
             lambda x, _kind=_kind, _keep=_keep: tf.reduce(x, axes=(2, 0), keepdim=_keep, kind=_kind),
             lambda x, _r=_r, _keep=_keep: _r(x, (0, 2), _keep),
             lambda S, _keep=_keep: T((1, 4, 1) if _keep else (4,)))
case("reduce", "defaults_sum_last_keep", lambda S: [A((S, 6))], lambda x: tf.reduce(x),
     lambda x: x.sum(-1, keepdim=True), lambda S: T((S, 1)))
case("reduce", "int_axis", lambda S: [A((S, 4, 6))], lambda x: tf.reduce(x, axes=1, keepdim=False, kind="max"),
     lambda x: x.amax(1), lambda S: T((S, 6)))
case("reduce", "sum_i32_stays_i32", lambda S: [A((S, 6), "i32")], lambda x: tf.reduce(x, axes=(0,), kind="sum"),
     lambda x: x.sum(0, keepdim=True).to(torch.int32), lambda S: T((1, 6), "i32"))
case("reduce", "abs_max_i64", lambda S: [A((S, 6), "i64")], lambda x: tf.reduce(x, kind="abs_max", keepdim=False),
     lambda x: x.abs().amax(-1), lambda S: T((S,), "i64"))
case("reduce", "sum_bf16", lambda S: [A((S, 16), "bf16")], lambda x: tf.reduce(x, axes=(-1,), kind="sum"),
     lambda x: f64(x).sum(-1, keepdim=True), lambda S: T((S, 1), "bf16"), BF16)
case("reduce", "mean_bf16", lambda S: [A((S, 16), "bf16")], lambda x: tf.reduce(x, (0, 1), False, "mean"),
     lambda x: f64(x).mean(), lambda S: T((), "bf16"), BF16)

case("softmax", "last", lambda S: [A((S, 8))], lambda x: tf.softmax(x), lambda x: torch.softmax(x, -1),
     lambda S: T((S, 8)))
case("softmax", "axis0", lambda S: [A((S, 8))], lambda x: tf.softmax(x, axis=0), lambda x: torch.softmax(x, 0),
     lambda S: T((S, 8)))
case("softmax", "bf16", lambda S: [A((2, S, 8), "bf16")], lambda x: tf.softmax(x, -1),
     lambda x: torch.exp(f64(x)) / torch.exp(f64(x)).sum(-1, keepdim=True), lambda S: T((2, S, 8), "bf16"), BF16)

case("argmax", "last", lambda S: [A((S, 8))], lambda x: tf.argmax(x), lambda x: torch.argmax(x, -1),
     lambda S: T((S,), "i64"))
case("argmax", "axis0_i32", lambda S: [A((S, 8), "i32", lambda s, d, g: torch.randperm(math.prod(s), generator=g)
                                         .reshape(s).to(d))],
     lambda x: tf.argmax(x, axis=0), lambda x: torch.argmax(x, 0), lambda S: T((8,), "i64"))
case("topk", "largest", lambda S: [A((S, 8))], lambda x: tf.topk(x, 3), lambda x: torch.topk(x, 3, -1),
     lambda S: (T((S, 3)), T((S, 3), "i64")))
case("topk", "smallest_axis0", lambda S: [A((S, 8))], lambda x: tf.topk(x, 2, axis=0, largest=False),
     lambda x: torch.topk(x, 2, 0, largest=False), lambda S: (T((2, 8)), T((2, 8), "i64")))
case("topk", "values_only_bf16", lambda S: [A((S, 8), "bf16")], lambda x: tf.topk(x, 4)[0],
     lambda x: x.sort(-1, descending=True).values[:, :4], lambda S: T((S, 4), "bf16"))

# -- nn ------------------------------------------------------------------------------------------------------

case("matmul", "2d", lambda S: [A((S, 8)), A((8, 5))], lambda a, b: tf.matmul(a, b),
     lambda a, b: torch.matmul(a, b), lambda S: T((S, 5)))
case("matmul", "bcast_batch", lambda S: [A((2, 1, S, 8)), A((3, 8, 5))], lambda a, b: tf.matmul(a, b),
     lambda a, b: torch.matmul(a, b), lambda S: T((2, 3, S, 5)))
case("matmul", "contract_dimvar", lambda S: [A((4, S)), A((S, 5))], lambda a, b: tf.matmul(a, b),
     lambda a, b: torch.matmul(a, b), lambda S: T((4, 5)))
case("matmul", "vector_right", lambda S: [A((5, S)), A((S,))], lambda w, x: w @ x,
     lambda w, x: torch.matmul(w, x), lambda S: T((5,)))
case("matmul", "vector_left_batched", lambda S: [A((S,)), A((3, S, 4))], lambda x, w: tf.matmul(x, w),
     lambda x, w: torch.matmul(x, w), lambda S: T((3, 4)))
case("matmul", "vector_dot", lambda S: [A((S,)), A((S,))], lambda x, y: tf.matmul(x, y),
     lambda x, y: torch.matmul(x, y), lambda S: T(()))
case("matmul", "batched_kv", lambda S: [A((2, 4, S, 8)), A((2, 4, 8, S))], lambda q, k: tf.matmul(q, k),
     lambda q, k: torch.matmul(q, k), lambda S: T((2, 4, S, S)))
case("matmul", "bf16", lambda S: [A((2, S, 16), "bf16"), A((16, 8), "bf16", const=True)],
     lambda a, b: tf.matmul(a, b), lambda a, b: torch.matmul(f64(a), f64(b)), lambda S: T((2, S, 8), "bf16"),
     BF16_MM)


def _rms_ref(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


case("rms_norm", "f32", lambda S: [A((S, 8)), A((8,), const=True)], lambda x, w: tf.rms_norm(x, w, 1e-6),
     lambda x, w: _rms_ref(x, w, 1e-6), lambda S: T((S, 8)))
case("rms_norm", "bf16", lambda S: [A((2, S, 16), "bf16"), A((16,), "bf16", const=True)],
     lambda x, w: tf.rms_norm(x, w, eps=1e-5),
     lambda x, w: f64(x) / torch.sqrt(f64(x).square().mean(-1, keepdim=True) + 1e-5) * f64(w),
     lambda S: T((2, S, 16), "bf16"), BF16)
case("layer_norm", "last", lambda S: [A((S, 8)), A((8,), const=True), A((8,), const=True)],
     lambda x, w, b: tf.layer_norm(x, w, b, -1, 1e-5), lambda x, w, b: F.layer_norm(x, (8,), w, b, 1e-5),
     lambda S: T((S, 8)), LN_F32)
case("layer_norm", "axis0", lambda S: [A((8, S)), A((8,), const=True), A((8,), const=True)],
     lambda x, w, b: tf.layer_norm(x, w, b, axis=0),
     lambda x, w, b: F.layer_norm(x.T, (8,), w, b, 1e-5).T, lambda S: T((8, S)), LN_F32)
case("layer_norm", "bf16", lambda S: [A((S, 16), "bf16"), A((16,), "bf16"), A((16,), "bf16")],
     lambda x, w, b: tf.layer_norm(x, w, b, eps=1e-6),
     lambda x, w, b: F.layer_norm(f64(x), (16,), f64(w), f64(b), 1e-6), lambda S: T((S, 16), "bf16"), BF16)

MAX_POS = 16


def _rope_ref(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, pos: torch.Tensor,
              wide: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate halves written out per half: [x1*c - x2*s, x2*c + x1*s] (c, s: the rows at pos).

    q, k are (..., seq, heads, d): the (seq, d) rows broadcast over heads as (seq, 1, d).
    """
    c, s = cos.to(wide)[pos.long()][:, None], sin.to(wide)[pos.long()][:, None]
    h = q.shape[-1] // 2

    def rot(x: torch.Tensor) -> torch.Tensor:
        x = x.to(wide)
        x1, x2 = x[..., :h], x[..., h:]
        return torch.cat([x1 * c[..., :h] - x2 * s[..., :h], x2 * c[..., h:] + x1 * s[..., h:]], -1)

    return rot(q), rot(k)


_CS = (A((MAX_POS, 8), const=True), A((MAX_POS, 8), const=True))
case("rope", "seq_heads_dim", lambda S: [A((S, 4, 8)), A((S, 2, 8)), *_CS, A((S,), "i64", below(MAX_POS))],
     lambda q, k, c, s, p: tf.rope(q, k, c, s, p), lambda q, k, c, s, p: _rope_ref(q, k, c, s, p, torch.float32),
     lambda S: (T((S, 4, 8)), T((S, 2, 8))))
case("rope", "batch_seq_heads_dim",
     lambda S: [A((2, S, 4, 8)), A((2, S, 1, 8)), *_CS, A((S,), "i32", below(MAX_POS))],
     lambda q, k, c, s, p: tf.rope(q, k, c, s, p), lambda q, k, c, s, p: _rope_ref(q, k, c, s, p, torch.float32),
     lambda S: (T((2, S, 4, 8)), T((2, S, 1, 8))))
case("rope", "bf16_qk_f32_caches",
     lambda S: [A((2, S, 4, 8), "bf16"), A((2, S, 2, 8), "bf16"), *_CS, A((S,), "i64", below(MAX_POS))],
     lambda q, k, c, s, p: tf.rope(q, k, c, s, p), lambda q, k, c, s, p: _rope_ref(q, k, c, s, p, torch.float64),
     lambda S: (T((2, S, 4, 8), "bf16"), T((2, S, 2, 8), "bf16")), BF16)

# -- shape ops -----------------------------------------------------------------------------------------------

case("reshape", "split_last", lambda S: [A((S, 8))], lambda x: tf.reshape(x, (x.shape[0], 2, 4)),
     lambda x: x.reshape(x.shape[0], 2, 4), lambda S: T((S, 2, 4)))
case("reshape", "infer_leading", lambda S: [A((S, 8))], lambda x: tf.reshape(x, new_shape=(-1, 4)),
     lambda x: x.reshape(-1, 4), lambda S: T((2 * S, 4)))
case("reshape", "flatten", lambda S: [A((S, 2, 4))], lambda x: tf.reshape(x, (-1,)), lambda x: x.flatten(),
     lambda S: T((8 * S,)))
case("reshape", "infer_trailing", lambda S: [A((S, 2, 4))], lambda x: tf.reshape(x, (x.shape[0], -1)),
     lambda x: x.reshape(x.shape[0], 8), lambda S: T((S, 8)))
case("reshape", "infer_middle", lambda S: [A((2, S, 4))], lambda x: tf.reshape(x, (4, -1, x.shape[1])),
     lambda x: x.reshape(4, 2, -1), lambda S: T((4, 2, S)))
case("transpose", "3d", lambda S: [A((S, 4, 8))], lambda x: tf.transpose(x, perm=(2, 0, 1)),
     lambda x: x.permute(2, 0, 1), lambda S: T((8, S, 4)))
case("transpose", "negative_perm", lambda S: [A((2, S, 8))], lambda x: tf.transpose(x, (0, -1, -2)),
     lambda x: x.transpose(1, 2), lambda S: T((2, 8, S)))
case("slice", "cols_strided", lambda S: [A((S, 8))], lambda x: tf.slice(x, (0, 1), (x.shape[0], 3), (1, 2)),
     lambda x: x[:, 1:7:2], lambda S: T((S, 3)))
case("slice", "drop_first_row", lambda S: [A((S, 8))], lambda x: tf.slice(x, (1, 0), (x.shape[0] - 1, 8)),
     lambda x: x[1:], lambda S: T((S - 1, 8)))
case("slice", "strided_dimvar_rows", lambda S: [A((S, 8))],
     lambda x: tf.slice(x, (0, 0), (floordiv(x.shape[0] + 1, 2), 4), strides=(2, 2)),
     lambda x: x[::2, ::2], lambda S: T((floordiv(S + 1, 2), 4)))
case("concat", "dimvar_plus_4", lambda S: [A((S, 8)), A((4, 8))], lambda x, y: tf.concat((x, y), axis=0),
     lambda x, y: torch.cat([x, y], 0), lambda S: T((S + 4, 8)))
case("concat", "last_three", lambda S: [A((S, 8)), A((S, 3)), A((S, 1))], lambda x, y, z: tf.concat([x, y, z], -1),
     lambda x, y, z: torch.cat([x, y, z], -1), lambda S: T((S, 12)))
case("concat", "variadic_default_last", lambda S: [A((S, 8)), A((S, 3)), A((S, 1))],
     lambda x, y, z: tf.concat(x, y, z), lambda x, y, z: torch.cat([x, y, z], -1), lambda S: T((S, 12)))
case("concat", "variadic_axis0", lambda S: [A((S, 2)), A((3, 2))], lambda x, y: tf.concat(x, y, axis=0),
     lambda x, y: torch.cat([x, y], 0), lambda S: T((S + 3, 2)))
case("concat", "list_default_last", lambda S: [A((S, 2)), A((S, 5))], lambda x, y: tf.concat([x, y]),
     lambda x, y: torch.cat([x, y], -1), lambda S: T((S, 7)))
case("concat", "dimvar_twice", lambda S: [A((S, 2)), A((S, 2))], lambda x, y: tf.concat([x, y], 0),
     lambda x, y: torch.cat([x, y]), lambda S: T((2 * S, 2)))
case("stack", "middle", lambda S: [A((S, 8)), A((S, 8))], lambda x, y: tf.stack([x, y], axis=1),
     lambda x, y: torch.stack([x, y], 1), lambda S: T((S, 2, 8)))
case("stack", "front_i32", lambda S: [A((S, 8), "i32")] * 3, lambda x, y, z: tf.stack((x, y, z), 0),
     lambda x, y, z: torch.stack([x, y, z]), lambda S: T((3, S, 8), "i32"))
case("stack", "new_last", lambda S: [A((S, 8)), A((S, 8))], lambda x, y: tf.stack([x, y], -1),
     lambda x, y: torch.stack([x, y], -1), lambda S: T((S, 8, 2)))
case("split", "halves", lambda S: [A((S, 8))], lambda x: tf.split(x, 1, 2), lambda x: (x[:, :4], x[:, 4:]),
     lambda S: (T((S, 4)), T((S, 4))))
case("split", "quarters_neg_axis", lambda S: [A((S, 8))], lambda x: tf.split(x, axis=-1, num_splits=4),
     lambda x: tuple(x[:, 2 * i:2 * i + 2] for i in range(4)), lambda S: tuple(T((S, 2)) for _ in range(4)))
case("split", "dimvar_axis_even", lambda S: [A((S, 3)), A((S, 3))], lambda x, y: tf.split(tf.concat([x, y], 0), 0, 2),
     lambda x, y: (x, y), lambda S: (T((S, 3)), T((S, 3))))
case("index_select", "embedding_rows", lambda S: [A((8, 4), const=True), A((S,), "i64", below(8))],
     lambda t, i: tf.index_select(t, i), lambda t, i: t[i], lambda S: T((S, 4)))
case("index_select", "dim1_i32", lambda S: [A((S, 8)), A((3,), "i32", below(8))],
     lambda x, i: tf.index_select(x, i, dim=1), lambda x, i: x[:, i.long()], lambda S: T((S, 3)))
case("index_select", "torch_order", lambda S: [A((S, 8)), A((3,), "i64", below(8))],
     lambda x, i: tf.index_select(x, 1, i), lambda x, i: torch.index_select(x, 1, i), lambda S: T((S, 3)))
case("repeat_interleave", "axis1", lambda S: [A((S, 2, 4))], lambda x: tf.repeat_interleave(x, 3, axis=1),
     lambda x: x[:, [0, 0, 0, 1, 1, 1]], lambda S: T((S, 6, 4)))
case("repeat_interleave", "axis0", lambda S: [A((S, 2), "i64")], lambda x: tf.repeat_interleave(x, 2, 0),
     lambda x: x.unsqueeze(1).expand(-1, 2, -1).reshape(-1, 2), lambda S: T((2 * S, 2), "i64"))

# -- creation ------------------------------------------------------------------------------------------------

case("arange", "dimvar_end", lambda S: [A((S, 8))], lambda x: tf.arange(x.shape[0]),
     lambda x: torch.tensor(list(range(x.shape[0])), dtype=torch.int64), lambda S: T((S,), "i64"))
case("arange", "start_step_i32", lambda S: [A((S, 8))], lambda x: tf.arange(2, x.shape[0] + 2, 2, "i32"),
     lambda x: torch.tensor(list(range(2, x.shape[0] + 2, 2)), dtype=torch.int32),
     lambda S: T((floordiv(S + 1, 2),), "i32"))
case("arange", "f32", lambda S: [A((S, 8))], lambda x: tf.arange(x.shape[0], dtype="f32") * 0.5,
     lambda x: torch.tensor([i * 0.5 for i in range(x.shape[0])]), lambda S: T((S,)))
case("arange", "static", lambda S: [A((S, 8))], lambda x: tf.arange(1, 7, 3),
     lambda x: torch.tensor([1, 4]), lambda S: T((2,), "i64"))
case("zeros", "dimvar_bf16", lambda S: [A((S, 8))], lambda x: tf.zeros((x.shape[0], 3), "bf16"),
     lambda x: torch.tensor(0.0, dtype=bf).expand(x.shape[0], 3), lambda S: T((S, 3), "bf16"))
case("zeros", "default_f32", lambda S: [A((S, 8))], lambda x: tf.zeros(shape=(1, 8)) + x, lambda x: x + 0.0,
     lambda S: T((S, 8)))
case("full_like", "f32", lambda S: [A((S, 8))], lambda x: tf.full_like(x, 0.5),
     lambda x: torch.tensor(0.5).expand(x.shape).contiguous(), lambda S: T((S, 8)))
case("full_like", "i32", lambda S: [A((S, 8), "i32")], lambda x: tf.full_like(x, -7),
     lambda x: torch.tensor(-7, dtype=torch.int32).expand(x.shape).contiguous(), lambda S: T((S, 8), "i32"))
case("full_like", "bool", lambda S: [A((S, 8), "bool")], lambda x: tf.full_like(x, True),
     lambda x: torch.ones(x.shape, dtype=torch.bool), lambda S: T((S, 8), "bool"))
case("full_like", "int_on_float", lambda S: [A((S, 8), "bf16")], lambda x: tf.full_like(x, 3),
     lambda x: torch.tensor(3.0, dtype=bf).expand(x.shape).contiguous(), lambda S: T((S, 8), "bf16"))

# -- state and placement -------------------------------------------------------------------------------------


def _cache_ref(cache: torch.Tensor, pos: torch.Tensor, s: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
    out = cache.clone()
    for j in range(int(s)):
        out[:, int(pos) + j] = new[:, j]
    return out


case("cache_update", "write_2_at_3",
     lambda S: [A((2, 16, 4)), A((), "i64", scalar(3)), A((), "i64", scalar(2)), A((2, S, 4))],
     lambda c, p, s, n: tf.cache_update(c, p, s, n), _cache_ref, lambda S: T((2, 16, 4)))
case("cache_update", "write_3_at_0_i32_bf16",
     lambda S: [A((1, 12, 2, 4), "bf16"), A((), "i32", scalar(0)), A((), "i32", scalar(3)),
                A((1, S, 2, 4), "bf16")],
     lambda c, p, s, n: tf.cache_update(c, p, s, n), _cache_ref, lambda S: T((1, 12, 2, 4), "bf16"))
case("cache_update", "write_nothing",
     lambda S: [A((2, 16, 4)), A((), "i64", scalar(16)), A((), "i64", scalar(0)), A((2, S, 4))],
     lambda c, p, s, n: tf.cache_update(c, p, s, n), lambda c, p, s, n: c.clone(), lambda S: T((2, 16, 4)))
case("reshard", "to_smem", lambda S: [A((S, 8))], lambda x: tf.reshard(x, None, "smem"), lambda x: x.clone(),
     lambda S: T((S, 8), storage="smem"))
case("reshard", "same_shape_rmem", lambda S: [A((S, 8), "bf16")],
     lambda x: tf.reshard(x, x.shape, storage="rmem") * 2.0, lambda x: x * 2, lambda S: T((S, 8), "bf16", "rmem"))
case("reshard", "host", lambda S: [A((S, 8), "i32")], lambda x: tf.reshard(x, storage="host"),
     lambda x: x.clone(), lambda S: T((S, 8), "i32", storage="host"))
case("local", "", lambda S: [A((S, 8))], lambda x: tf.local(x), lambda x: x.clone(), lambda S: T((S, 8)))
case("local", "keeps_storage", lambda S: [A((S, 8))], lambda x: tf.local(tf.reshard(x, None, "smem")),
     lambda x: x.clone(), lambda S: T((S, 8), storage="smem"))


# -- 8-bit floats: torch has no CPU math on them; the evaluator computes in f32 and rounds once ----------------

E4, E5, E8 = torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e8m0fnu
FP8 = (E4, E5, E8)


def f32(t: torch.Tensor) -> torch.Tensor:
    return t.float()


case("cast", "f32_fp8e4m3", lambda S: [A((S, 8))], lambda x: tf.cast(x, "fp8e4m3"), lambda x: x.to(E4),
     lambda S: T((S, 8), "fp8e4m3"))
case("cast", "f32_fp8e5m2", lambda S: [A((S, 8))], lambda x: tf.cast(x, "float8_e5m2"), lambda x: x.to(E5),
     lambda S: T((S, 8), "fp8e5m2"))
case("cast", "f32_f8e8m0", lambda S: [A((S, 8), gen=positive)], lambda x: tf.cast(x, "f8e8m0"), lambda x: x.to(E8),
     lambda S: T((S, 8), "f8e8m0"))
case("cast", "fp8e4m3_f32", lambda S: [A((S, 8), "fp8e4m3")], lambda x: tf.cast(x), lambda x: x.float(),
     lambda S: T((S, 8)))
case("add", "fp8e4m3", lambda S: [A((S, 8), "fp8e4m3"), A((8,), "fp8e4m3")], lambda x, y: x + y,
     lambda x, y: (f32(x) + f32(y)).to(E4), lambda S: T((S, 8), "fp8e4m3"))
case("mul", "fp8e5m2_scalar", lambda S: [A((S, 8), "fp8e5m2")], lambda x: x * 0.3,
     lambda x: (f32(x) * f32(torch.tensor(0.3).to(E5))).to(E5), lambda S: T((S, 8), "fp8e5m2"))
case("mul", "f8e8m0", lambda S: [A((S, 8), "f8e8m0", positive), A((S, 8), "f8e8m0", positive)],
     lambda x, y: tf.mul(x, y), lambda x, y: (f32(x) * f32(y)).to(E8), lambda S: T((S, 8), "f8e8m0"))
case("div", "fp8e4m3", lambda S: [A((S, 8), "fp8e4m3"), A((S, 8), "fp8e4m3", positive)], lambda x, y: x / y,
     lambda x, y: (f32(x) / f32(y)).to(E4), lambda S: T((S, 8), "fp8e4m3"))
case("lt", "fp8e4m3", lambda S: [A((S, 8), "fp8e4m3"), A((S, 8), "fp8e4m3")], lambda x, y: x < y,
     lambda x, y: f32(x) < f32(y), lambda S: T((S, 8), "bool"))
case("exp", "fp8e4m3", lambda S: [A((S, 8), "fp8e4m3")], lambda x: tf.exp(x), lambda x: torch.exp(f32(x)).to(E4),
     lambda S: T((S, 8), "fp8e4m3"))
case("neg", "fp8e5m2", lambda S: [A((S, 8), "fp8e5m2")], lambda x: -x, lambda x: (-f32(x)).to(E5),
     lambda S: T((S, 8), "fp8e5m2"))
case("gelu", "tanh_fp8e5m2", lambda S: [A((S, 8), "fp8e5m2")], lambda x: tf.gelu(x, "tanh"),
     lambda x: F.gelu(f32(x), approximate="tanh").to(E5), lambda S: T((S, 8), "fp8e5m2"))
case("clamp", "fp8e4m3", lambda S: [A((S, 8), "fp8e4m3")], lambda x: tf.clamp(x, -0.5, 0.5),
     lambda x: f32(x).clamp(-0.5, 0.5).to(E4), lambda S: T((S, 8), "fp8e4m3"))
case("where", "fp8e4m3", lambda S: [A((S, 8), "fp8e4m3"), A((S, 8), "fp8e4m3")],
     lambda x, y: tf.where(x > y, x, y), lambda x, y: torch.maximum(f32(x), f32(y)).to(E4),
     lambda S: T((S, 8), "fp8e4m3"))
case("reduce", "sum_fp8e4m3", lambda S: [A((S, 8), "fp8e4m3")], lambda x: tf.reduce(x, kind="sum"),
     lambda x: f32(x).sum(-1, keepdim=True).to(E4), lambda S: T((S, 1), "fp8e4m3"))
case("reduce", "max_fp8e5m2", lambda S: [A((S, 8), "fp8e5m2")], lambda x: tf.reduce(x, 0, False, "max"),
     lambda x: f32(x).amax(0).to(E5), lambda S: T((8,), "fp8e5m2"))
case("argmax", "fp8e4m3", lambda S: [A((S, 8), "fp8e4m3")], lambda x: tf.argmax(x, -1),
     lambda x: f32(x).argmax(-1), lambda S: T((S,), "i64"))
case("topk", "fp8e4m3", lambda S: [A((S, 8), "fp8e4m3")], lambda x: tf.topk(x, 2),
     lambda x: (torch.topk(f32(x), 2).values.to(E4), torch.topk(f32(x), 2).indices),
     lambda S: (T((S, 2), "fp8e4m3"), T((S, 2), "i64")))
case("softmax", "fp8e4m3", lambda S: [A((S, 8), "fp8e4m3")], lambda x: tf.softmax(x),
     lambda x: torch.softmax(f32(x), -1).to(E4), lambda S: T((S, 8), "fp8e4m3"))
case("matmul", "fp8e4m3", lambda S: [A((S, 8), "fp8e4m3"), A((8, 4), "fp8e4m3", const=True)], lambda a, b: a @ b,
     lambda a, b: (f32(a) @ f32(b)).to(E4), lambda S: T((S, 4), "fp8e4m3"))
case("arange", "fp8e4m3", lambda S: [A((S, 8))], lambda x: tf.arange(x.shape[0], dtype="fp8e4m3"),
     lambda x: torch.arange(x.shape[0]).float().to(E4), lambda S: T((S,), "fp8e4m3"))


# -- ops model sources written for the reference implementation call: edge values in every dtype accepted ------
#
# Inputs cycle through NaN, +-inf, .5 ties, signed zeros, negative operands and values around softplus's
# threshold (20); the second operand of a binary op is the same cycle shifted, so signs and magnitudes pair up.
# The reference is torch's own op on the same inputs (for 8-bit floats, on their f32 values rounded back once,
# the evaluator's stated semantics for them); results are compared exactly, NaN matching NaN.

F_EDGES = (math.nan, math.inf, -math.inf, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.0, -0.0, 3.0, -7.25, 19.5, 20.0, 21.0,
           -21.0, 0.125, 100.0, -100.0, 1.0, -3.0, 6.0)
I_EDGES = (-7, -3, -2, -1, 0, 1, 2, 3, 7, 100, -100, 5, -5)
FLOAT_DTYPES = ("f32", "f16", "bf16", "fp8e4m3", "fp8e5m2", "f8e8m0")
INT_DTYPES = ("i8", "i32", "i64")


def edges(shift: int = 0, nonzero: bool = False) -> Callable[..., torch.Tensor]:
    """The edge values (float or int by dtype), cycled over the shape starting at ``shift``."""

    def gen(shape: tuple[int, ...], dt: torch.dtype, g: torch.Generator) -> torch.Tensor:
        values = F_EDGES if dt.is_floating_point else tuple(v for v in I_EDGES if v or not nonzero)
        n = math.prod(shape)
        flat = [values[(i + shift) % len(values)] for i in range(n)]
        if dt.is_floating_point:
            return torch.tensor(flat, dtype=torch.float32).reshape(shape).to(dt)
        return torch.tensor(flat, dtype=torch.int64).reshape(shape).to(dt)

    return gen


def _torch_dt(name: str) -> torch.dtype:
    return TensorType((), name).dtype.torch_dtype


def on_wide(fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """torch's ``fn`` on the operands; for 8-bit floats on their f32 values, the result rounded back once."""

    def ref(*xs: torch.Tensor) -> torch.Tensor:
        dt = xs[0].dtype
        if dt in FP8:
            out = fn(*(x.float() if x.dtype in FP8 else x for x in xs))
            return out.to(dt) if out.is_floating_point() else out
        return fn(*xs)

    return ref


for _dt in FLOAT_DTYPES:
    for _name, _fn in (("softplus", F.softplus), ("exp2", torch.exp2), ("log2", torch.log2)):
        case(_name, f"edges_{_dt}", lambda S, _dt=_dt: [A((S, 8), _dt, edges())],
             lambda x, _name=_name: getattr(tf, _name)(x), on_wide(_fn), lambda S, _dt=_dt: T((S, 8), _dt))
case("softplus", "beta_threshold", lambda S: [A((S, 8), "f32", edges())], lambda x: tf.softplus(x, 2.0, 10.0),
     lambda x: F.softplus(x, beta=2.0, threshold=10.0), lambda S: T((S, 8)))
for _dt in FLOAT_DTYPES + INT_DTYPES:
    for _name, _fn in (("ceil", torch.ceil), ("floor", torch.floor), ("round", torch.round)):
        case(_name, f"edges_{_dt}", lambda S, _dt=_dt: [A((S, 8), _dt, edges())],
             lambda x, _name=_name: getattr(tf, _name)(x), on_wide(_fn), lambda S, _dt=_dt: T((S, 8), _dt))
    for _name, _fn, _spell in (("floor_div", torch.floor_divide, None), ("mod", torch.remainder, None),
                               ("max", torch.maximum, "maximum"), ("min", torch.minimum, "minimum")):
        _tfname = _spell or _name
        case(_name, f"{_tfname}_edges_{_dt}",
             lambda S, _dt=_dt: [A((S, 8), _dt, edges()), A((S, 8), _dt, edges(shift=7, nonzero=True))],
             lambda x, y, _tfname=_tfname: getattr(tf, _tfname)(x, y), on_wide(_fn),
             lambda S, _dt=_dt: T((S, 8), _dt), spelling=_spell)
    case("index_add", f"edges_{_dt}",
         lambda S, _dt=_dt: [A((S, 8), _dt, edges()), A((3,), "i64", lambda sh, dt, g: torch.tensor([0, 2, 0])),
                             A((3, 8), _dt, edges(shift=5))],
         lambda x, i, src: tf.index_add(x, i, src),
         on_wide(lambda x, i, src: torch.index_add(x, 0, i, src)), lambda S, _dt=_dt: T((S, 8), _dt))
for _dt in FLOAT_DTYPES + INT_DTYPES + ("bool",):
    case("index_copy", f"edges_{_dt}",
         lambda S, _dt=_dt: [A((S, 8), _dt, edges() if _dt != "bool" else _default),
                             A((3,), "i64", lambda sh, dt, g: torch.tensor([2, 0, 1])),
                             A((3, 8), _dt, edges(shift=5) if _dt != "bool" else _default)],
         lambda x, i, src: tf.index_copy(x, i, src),
         lambda x, i, src: (torch.index_copy(x.view(torch.uint8), 0, i, src.view(torch.uint8)).view(x.dtype)
                            if x.dtype in FP8 else torch.index_copy(x, 0, i, src)),
         lambda S, _dt=_dt: T((S, 8), _dt))
case("index_add", "torch_order_dim1_alpha", lambda S: [A((S, 8)), A((4,), "i64", lambda sh, dt, g: torch.tensor(
     [7, 0, 3, 0])), A((S, 4))], lambda x, i, src: tf.index_add(x, 1, i, src, alpha=-2.0),
     lambda x, i, src: torch.index_add(x, 1, i, src, alpha=-2.0), lambda S: T((S, 8)))
case("index_copy", "dim_keyword", lambda S: [A((S, 8)), A((2,), "i32", lambda sh, dt, g: torch.tensor(
     [5, 1], dtype=torch.int32)), A((S, 2))], lambda x, i, src: tf.index_copy(x, i, src, dim=-1),
     lambda x, i, src: torch.index_copy(x, 1, i.long(), src), lambda S: T((S, 8)))
for _name, _fn in (("logical_and", torch.logical_and), ("logical_or", torch.logical_or)):
    case(_name, "bcast", lambda S: [A((S, 8), "bool"), A((8,), "bool")],
         lambda x, y, _name=_name: getattr(tf, _name)(x, y), _fn, lambda S: T((S, 8), "bool"))
case("logical_not", "", lambda S: [A((S, 8), "bool")], lambda x: tf.logical_not(x), torch.logical_not,
     lambda S: T((S, 8), "bool"))
case("logical_and", "op&", lambda S: [A((S, 8), "bool"), A((S, 8), "bool")], lambda x, y: x & y,
     lambda x, y: x & y, lambda S: T((S, 8), "bool"))
case("logical_or", "op|", lambda S: [A((S, 8), "bool"), A((S, 8), "bool")], lambda x, y: x | y,
     lambda x, y: x | y, lambda S: T((S, 8), "bool"))
case("logical_not", "op~", lambda S: [A((S, 8), "bool")], lambda x: ~x, lambda x: ~x, lambda S: T((S, 8), "bool"))
case("floor_div", "op//", lambda S: [A((S, 8), "i32", edges()), A((S, 8), "i32", edges(3, nonzero=True))],
     lambda x, y: x // y, torch.floor_divide, lambda S: T((S, 8), "i32"))
case("mod", "op%_scalar", lambda S: [A((S, 8), "f32", edges())], lambda x: x % -2.5,
     lambda x: torch.remainder(x, torch.tensor(-2.5)), lambda S: T((S, 8)))
case("mod", "op%_rscalar", lambda S: [A((S, 8), "i64", edges(nonzero=True))], lambda x: 7 % x,
     lambda x: torch.remainder(torch.tensor(7), x), lambda S: T((S, 8), "i64"))


# -- the runner ----------------------------------------------------------------------------------------------


def build(c: Case, S: Any):  # noqa: ANN201, N803 - returns a Function; S is the seq template dim
    """A ``@func`` whose parameters are ``c.ins(S)`` and whose body is ``c.body``."""
    args = c.ins(S)
    names = [f"p{i}" for i in range(len(args))]

    def kernel(*values: Any) -> Any:
        return c.body(*values)

    kernel.__name__ = kernel.__qualname__ = c.op
    kernel.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names])
    kernel.__annotations__ = {n: (ConstTensor if a.const else Tensor)[a.shape, a.dtype] for n, a in zip(names, args)}
    return func(kernel)


def make_inputs(c: Case, n: int, seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for a in c.ins(n):
        dt = TensorType(a.shape, a.dtype).dtype.torch_dtype
        out.append(a.gen(tuple(a.shape), dt, g))
    return out


def assert_types(actual: Any, expected: Any) -> None:
    if isinstance(expected, tuple):
        assert isinstance(actual, tuple) and len(actual) == len(expected), (actual, expected)
        for a, e in zip(actual, expected):
            assert_types(a, e)
        return
    assert isinstance(actual, TensorType), actual
    assert actual.same_as(expected), f"typed {actual}, expected {expected}"
    assert str(actual) == str(expected)
    assert actual.storage == expected.storage


def identical(a: torch.Tensor, b: torch.Tensor) -> bool:
    """torch.equal, NaN matching NaN; 8-bit floats (no torch.equal kernel) compare bit for bit."""
    if a.dtype in FP8 and b.dtype == a.dtype:
        return torch.equal(a.view(torch.uint8), b.view(torch.uint8))
    if a.is_floating_point() and a.shape == b.shape and a.dtype == b.dtype:
        return bool(((a == b) | (a.isnan() & b.isnan())).all())
    return torch.equal(a, b)


def assert_close(out: torch.Tensor, ref: torch.Tensor, cmp: Any, inputs: list[torch.Tensor], what: str) -> None:
    assert isinstance(out, torch.Tensor), what
    assert tuple(out.shape) == tuple(ref.shape), f"{what}: shape {tuple(out.shape)} vs {tuple(ref.shape)}"
    if cmp == EXACT:
        assert out.dtype == ref.dtype, f"{what}: dtype {out.dtype} vs {ref.dtype}"
        assert identical(out, ref), f"{what}: max diff {(out.double() - ref.double()).abs().max()}"
        return
    o, r = out.double(), ref.double()
    bound = cmp.atol + cmp.rtol * r.abs()
    if cmp.mm:
        bound = bound + cmp.rtol * torch.matmul(inputs[0].double().abs(), inputs[1].double().abs())
    err = (o - r).abs()
    assert torch.isfinite(o).all(), what
    assert (err <= bound).all(), f"{what}: worst excess {(err - bound).max().item()} (max err {err.max().item()})"


def run_and_compare(c: Case, fn: Any, n: int) -> None:
    inputs = make_inputs(c, n, seed=1000 * n + len(c.id))
    before = [t.clone() for t in inputs]
    out = fn(*inputs)
    ref = c.ref(*[t.clone() for t in inputs])
    for t, b in zip(inputs, before):
        assert identical(t, b), "the evaluator modified an input"
    if isinstance(ref, (tuple, list)):
        assert isinstance(out, tuple) and len(out) == len(ref), f"{c.id}: result structure {type(out)}"
        for i, (o, r) in enumerate(zip(out, ref)):
            assert_close(o, r, c.cmp, inputs, f"{c.id}[{i}] at seq={n}")
    else:
        assert_close(out, ref, c.cmp, inputs, f"{c.id} at seq={n}")


def check_graph(c: Case, fn: Any, S: Any) -> None:  # noqa: N803
    ops = [node.op for node in fn.graph.nodes]
    assert c.op in ops, f"{c.id}: expected a {c.op} node, the graph has {ops}"
    assert_types(fn.output_types, c.out(S))
    for node in fn.graph.nodes:
        for v in node.outputs:
            assert isinstance(v.type, TensorType)


_IDS = [c.id for c in CASES]


def test_case_ids_are_unique() -> None:
    assert len(set(_IDS)) == len(_IDS), sorted({i for i in _IDS if _IDS.count(i) > 1})


def test_every_tf_op_has_a_case() -> None:
    import tilefoundry.dsl.tf as tf_module

    covered = {c.spelling or c.op for c in CASES}
    assert set(tf_module.__all__) <= covered, sorted(set(tf_module.__all__) - covered)


@pytest.mark.parametrize("c", CASES, ids=_IDS)
def test_op_static(c: Case) -> None:
    fn = build(c, STATIC)
    check_graph(c, fn, STATIC)
    run_and_compare(c, fn, STATIC)


@pytest.mark.parametrize("c", CASES, ids=_IDS)
def test_op_dimvar(c: Case) -> None:
    fn = build(c, SEQ)
    check_graph(c, fn, SEQ)
    for n in EXTENTS:
        run_and_compare(c, fn, n)


def test_dimvar_types_keep_names() -> None:
    """Reshape keeps ``seq``; concat gives ``seq + 4``; the strings show it."""
    reshape = build(CASES[_IDS.index("reshape-split_last")], SEQ)
    assert reshape.output_types.shape[0] == SEQ
    assert str(reshape.output_types) == "Tensor[(seq, 2, 4), f32]"
    concat = build(CASES[_IDS.index("concat-dimvar_plus_4")], SEQ)
    assert str(concat.output_types) == "Tensor[(seq + 4, 8), f32]"
    flat = build(CASES[_IDS.index("reshape-flatten")], SEQ)
    assert str(flat.output_types) == "Tensor[(8*seq,), f32]"


def test_scalar_operand_records_a_constant_of_the_tensor_dtype() -> None:
    fn = build(CASES[_IDS.index("mul-scalar_adopts_bf16")], SEQ)
    consts = [n for n in fn.graph.nodes if n.op == "constant"]
    assert len(consts) == 1
    assert str(consts[0].outputs[0].type) == "Tensor[(), bf16]"
    assert consts[0].attrs["value"] == 0.1

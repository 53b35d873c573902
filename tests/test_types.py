"""IR types: DType descriptors, DimVar, symbolic dim arithmetic, storage kinds and TensorType."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from tilefoundry.ir.types import (
    ALL_DTYPES,
    DimVar,
    DType,
    FloorDiv,
    Storage,
    TensorType,
    bf16,
    bool_,
    dims_equal,
    dtype_of,
    f8e8m0,
    f16,
    f32,
    floordiv,
    fp8e4m3,
    fp8e5m2,
    i8,
    i32,
    i64,
    product,
    storage_of,
    total,
)
from tilefoundry.ir.types.dim import check_dim, evaluate_dim, substitute

VALID = "f32, f16, bf16, fp8e4m3, fp8e5m2, f8e8m0, i8, i32, i64, bool"

# -- DType ---------------------------------------------------------------------------------------------------

TABLE = [
    # descriptor, name, torch dtype, bits, kind
    (f32, "f32", torch.float32, 32, "float"),
    (f16, "f16", torch.float16, 16, "float"),
    (bf16, "bf16", torch.bfloat16, 16, "float"),
    (fp8e4m3, "fp8e4m3", torch.float8_e4m3fn, 8, "float"),
    (fp8e5m2, "fp8e5m2", torch.float8_e5m2, 8, "float"),
    (f8e8m0, "f8e8m0", torch.float8_e8m0fnu, 8, "float"),
    (i8, "i8", torch.int8, 8, "int"),
    (i32, "i32", torch.int32, 32, "int"),
    (i64, "i64", torch.int64, 64, "int"),
    (bool_, "bool", torch.bool, 8, "bool"),
]


def test_all_ten_dtypes_in_order() -> None:
    assert [d.name for d in ALL_DTYPES] == VALID.split(", ")
    assert list(ALL_DTYPES) == [row[0] for row in TABLE]


@pytest.mark.parametrize(("dt", "name", "tdt", "bits", "kind"), TABLE, ids=[r[1] for r in TABLE])
def test_dtype_descriptor(dt: DType, name: str, tdt: torch.dtype, bits: int, kind: str) -> None:
    assert dt.name == name and str(dt) == name and repr(dt) == f"DType({name})"
    assert dt.torch_dtype is tdt
    assert dt.bits == bits == torch.tensor([], dtype=tdt).element_size() * 8
    assert (dt.is_float, dt.is_int, dt.is_bool) == (kind == "float", kind == "int", kind == "bool")
    assert dtype_of(name) is dt
    assert dtype_of(tdt) is dt
    assert dtype_of(dt) is dt


@pytest.mark.parametrize(("spelling", "dt"), [
    ("float32", f32), ("float16", f16), ("bfloat16", bf16), ("float8_e4m3fn", fp8e4m3), ("float8_e5m2", fp8e5m2),
    ("float8_e8m0fnu", f8e8m0), ("int8", i8), ("int32", i32), ("int64", i64),
])
def test_dtype_long_spellings(spelling: str, dt: DType) -> None:
    assert dtype_of(spelling) is dt


def test_dtype_is_frozen_and_compares_by_value() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        f32.name = "f64"  # type: ignore[misc]
    assert DType("f32", torch.float32, 32, "float") == f32
    assert f32 != bf16
    assert len({dtype_of("f32"), dtype_of("float32"), dtype_of(torch.float32)}) == 1


@pytest.mark.parametrize("spec", ["f64", "float", "F32", "bf16 ", "", "fp8"])
def test_unknown_dtype_name_lists_valid_names(spec: str) -> None:
    with pytest.raises(TypeError) as ei:
        dtype_of(spec)
    assert str(ei.value) == f"unknown dtype name {spec!r}; valid names: {VALID}"


@pytest.mark.parametrize("spec", [torch.float64, torch.complex64, torch.uint8])
def test_torch_dtype_without_a_counterpart(spec: torch.dtype) -> None:
    with pytest.raises(TypeError, match=f"torch dtype {spec} has no TileFoundry dtype; valid: {VALID}"):
        dtype_of(spec)


@pytest.mark.parametrize("spec", [None, 32, float])
def test_dtype_of_non_spelling(spec: object) -> None:
    with pytest.raises(TypeError, match="valid names"):
        dtype_of(spec)  # type: ignore[arg-type]


# -- DimVar --------------------------------------------------------------------------------------------------


def test_dimvar_range_is_half_open() -> None:
    seq = DimVar("seq", 2, 8)
    assert (seq.name, seq.lo, seq.hi) == ("seq", 2, 8)
    assert [n for n in range(12) if seq.contains(n)] == [2, 3, 4, 5, 6, 7]
    assert str(seq) == "seq" and repr(seq) == "DimVar('seq', 2, 8)"


def test_dimvar_default_range() -> None:
    d = DimVar("n")
    assert (d.lo, d.hi) == (1, 2**31)
    assert not d.contains(0) and d.contains(1) and d.contains(2**31 - 1) and not d.contains(2**31)


def test_dimvar_equality_by_name_and_range() -> None:
    a = DimVar("a", 1, 8)
    assert a == DimVar("a", 1, 8)
    assert a != DimVar("a", 1, 9)
    assert a != DimVar("a", 0, 8)
    assert a != DimVar("b", 1, 8)
    assert a != 1 and a != 7
    assert not dims_equal(a, DimVar("a", 1, 9))


def test_dimvar_hash_matches_equality() -> None:
    a, a2, b = DimVar("a", 1, 8), DimVar("a", 1, 8), DimVar("b", 1, 8)
    assert hash(a) == hash(a2)
    assert len({a, a2, b, DimVar("a", 1, 9)}) == 3
    assert {a: "x"}[a2] == "x"


@pytest.mark.parametrize(("args", "fragment"), [
    (("seq", 5, 5), "0 <= lo < hi"),
    (("seq", 5, 4), "0 <= lo < hi"),
    (("seq", -1, 4), "0 <= lo < hi"),
    (("seq", 1.0, 4), "0 <= lo < hi"),
    (("2seq", 1, 4), "identifier"),
    (("", 1, 4), "identifier"),
    ((3, 1, 4), "identifier"),
])
def test_dimvar_bad_definition(args: tuple, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        DimVar(*args)


# -- dim arithmetic ------------------------------------------------------------------------------------------

A = DimVar("a", 1, 64)
B = DimVar("b", 1, 64)
C = DimVar("c", 1, 64)


def test_constant_folding_gives_plain_ints() -> None:
    for expr, value in [((A + 3) - A, 3), (A - A, 0), (A * 0, 0), (2 * A - A - A + 5, 5), (product([2, 3, 4]), 24),
                        (total([1, 2, 3]), 6), (floordiv(7, 2), 3), (product([]), 1), (total([]), 0)]:
        assert type(expr) is int and expr == value, (expr, value)


def test_lone_variable_comes_back_as_the_dimvar() -> None:
    for expr in [(A * B) // B, (A + 1) - 1, 2 * A - A, product([A, B]) // B, floordiv(A * 6, 6), total([A, 0])]:
        assert type(expr) is DimVar and expr == A, expr


def test_product_over_division() -> None:
    assert (A * B) // B == A
    assert (A * B) // A == B
    assert floordiv(A * B * C, A * C) == B
    assert floordiv(6 * A * B, 3 * B) == 2 * A
    assert floordiv(2 * A, A) == 2


def test_sums_and_products_have_one_canonical_form() -> None:
    assert A + A == 2 * A
    assert A * B == B * A
    assert A + B + 1 == 1 + B + A
    assert (A + 1) * (A - 1) == A * A - 1
    assert (A + B) * 2 == 2 * A + 2 * B
    assert product([A, 4, B]) == 4 * A * B
    assert total([A, 4, A, B]) == 2 * A + B + 4
    assert dims_equal(A * (B + C), A * B + A * C)
    assert not dims_equal(A + B, A * B)
    assert not dims_equal(A, B)
    assert hash(A + A) == hash(2 * A)
    assert hash(A * B) == hash(B * A)


def test_exact_integer_factor_division() -> None:
    assert floordiv(4 * A + 2, 2) == 2 * A + 1
    assert (8 * A) // 4 == 2 * A


def test_opaque_floordiv_evaluates_right() -> None:
    half = floordiv(A + 1, 2)
    assert isinstance(half, FloorDiv)
    for n in range(1, 10):
        assert half.evaluate({"a": n}) == (n + 1) // 2
    ratio = A // B
    assert isinstance(ratio, FloorDiv)
    assert ratio.evaluate({"a": 17, "b": 5}) == 3
    assert (6 // A).evaluate({"a": 4}) == 1
    assert floordiv(4 * A + 3, 2).evaluate({"a": 5}) == 11
    # an opaque division is one atom: it adds and multiplies like a variable
    assert half + half == 2 * half
    assert (2 * half + A).evaluate({"a": 6}) == 12
    assert half == floordiv(A + 1, 2) and half != floordiv(A + 1, 3)
    assert half.dimvars() == {A}
    assert ratio.dimvars() == {A, B}


def test_evaluate_under_bindings() -> None:
    expr = 3 * A * B - A + 7
    assert expr.evaluate({"a": 2, "b": 5}) == 3 * 2 * 5 - 2 + 7
    assert evaluate_dim(expr, {"a": 1, "b": 1}) == 9
    assert evaluate_dim(12, {}) == 12
    with pytest.raises(KeyError, match="DimVar 'b' is not bound"):
        expr.evaluate({"a": 2})


def test_substitution() -> None:
    assert substitute(A * B + 1, {A: 3}) == 3 * B + 1
    assert substitute(A * B + 1, {A: 3, B: 2}) == 7
    assert type(substitute(A + 1, {A: 4})) is int
    assert substitute(2 * A, {A: B + C}) == 2 * B + 2 * C
    assert substitute(A + B, {A: B}) == 2 * B
    assert substitute(A, {B: 5}) == A  # unmapped variables stay
    assert substitute(9, {A: 1}) == 9
    # substitution reaches into opaque divisions and re-simplifies them
    assert substitute(floordiv(A, 2), {A: 2 * C}) == C
    assert substitute(floordiv(A + 1, 2), {A: 9}) == 5
    assert substitute(A // B, {A: B * C}) == C


def test_dim_strings() -> None:
    assert str(A + 4) == "a + 4"
    assert str(2 * A) == "2*a"
    assert str(A * B + 1) == "a*b + 1"
    assert str(A - 1) == "a - 1"
    assert str(3 - A) == "-a + 3"
    assert str(A * B - 2 * A) == "a*b - 2*a"
    assert str(floordiv(A, 2)) == "(a)//(2)"


@pytest.mark.parametrize(("d", "exc"), [(-1, ValueError), (True, TypeError), (2.0, TypeError), ("a", TypeError),
                                        (None, TypeError)])
def test_check_dim_refuses(d: object, exc: type) -> None:
    with pytest.raises(exc, match="shape"):
        check_dim(d, "shape")


def test_bool_is_not_a_dimension() -> None:
    with pytest.raises(TypeError):
        A + True  # noqa: B018 - the expression is what is tested


# -- storage -------------------------------------------------------------------------------------------------


def test_storage_kinds() -> None:
    assert [s.value for s in Storage] == ["host", "gmem", "smem", "rmem"]
    for s in Storage:
        assert storage_of(s.value) is s and storage_of(s) is s and str(s) == s.value


@pytest.mark.parametrize("spec", ["shared", "GMEM", "", "global"])
def test_bad_storage_lists_valid_kinds(spec: str) -> None:
    with pytest.raises(ValueError) as ei:
        storage_of(spec)
    assert str(ei.value) == f"unknown storage {spec!r}; valid: host, gmem, smem, rmem"


# -- TensorType ----------------------------------------------------------------------------------------------


def test_tensor_type_fields_and_defaults() -> None:
    t = TensorType((4, A), "bf16")
    assert t.shape == (4, A) and t.dtype is bf16 and t.layout is None and t.storage is Storage.gmem
    assert t.rank == 2
    assert t.dimvars() == {A}
    assert t.concrete_shape({"a": 9}) == (4, 9)
    assert TensorType([2, 3], torch.int32).dtype is i32
    assert TensorType((), i64).rank == 0


def test_tensor_type_canonicalises_dims() -> None:
    t = TensorType((A + A, (A * B) // B), "f32")
    assert type(t.shape[1]) is DimVar
    assert str(t) == "Tensor[(2*a, a), f32]"


@pytest.mark.parametrize(("t", "text"), [
    (TensorType((4, 8), "f32"), "Tensor[(4, 8), f32]"),
    (TensorType((8,), "bf16"), "Tensor[(8,), bf16]"),
    (TensorType((), "i64"), "Tensor[(), i64]"),
    (TensorType((A, 8), "f32"), "Tensor[(a, 8), f32]"),
    (TensorType((A + 4, 2 * B), "fp8e4m3"), "Tensor[(a + 4, 2*b), fp8e4m3]"),
    (TensorType((4,), "f32", storage="smem"), "Tensor[(4,), f32, smem]"),
    (TensorType((4, 2), "bool", storage="host"), "Tensor[(4, 2), bool, host]"),
    (TensorType((4, 2), "i8", storage="gmem"), "Tensor[(4, 2), i8]"),
    (TensorType((1,), "f16", storage="rmem"), "Tensor[(1,), f16, rmem]"),
], ids=lambda x: x if isinstance(x, str) else "")
def test_tensor_type_str(t: TensorType, text: str) -> None:
    assert str(t) == text


def test_same_as_compares_canonical_shape_and_dtype() -> None:
    t = TensorType((2 * A, 8), "f32")
    assert t.same_as(TensorType((A + A, 8), "f32"))
    assert t.same_as(TensorType((2 * A, 8), f32, layout="row_major", storage="smem"))  # placement ignored
    assert not t.same_as(TensorType((2 * A, 8), "bf16"))
    assert not t.same_as(TensorType((2 * B, 8), "f32"))
    assert not t.same_as(TensorType((2 * A, 8, 1), "f32"))
    assert not t.same_as(TensorType((2 * A,), "f32"))
    assert not t.same_as(TensorType((2 * DimVar("a", 1, 32), 8), "f32"))


def test_equality_includes_storage() -> None:
    t = TensorType((A, 8), "f32")
    assert t == TensorType((A, 8), "float32")
    assert t != TensorType((A, 8), "f32", storage="smem")
    assert t.with_(storage="rmem").storage is Storage.rmem
    assert t.with_(dtype="bf16").same_as(TensorType((A, 8), "bf16"))


def test_bad_storage_in_tensor_type() -> None:
    with pytest.raises(ValueError, match="unknown storage 'vram'; valid: host, gmem, smem, rmem"):
        TensorType((4,), "f32", storage="vram")


@pytest.mark.parametrize(("shape", "exc", "fragment"), [
    (4, TypeError, "shape must be a tuple of dims"),
    ("48", TypeError, "shape must be a tuple of dims"),
    ((4, -1), ValueError, "must be >= 0"),
    ((4, 2.0), TypeError, "int or DimVar"),
    ((True,), TypeError, "int or DimVar"),
])
def test_bad_shape_in_tensor_type(shape: object, exc: type, fragment: str) -> None:
    with pytest.raises(exc, match=fragment):
        TensorType(shape, "f32")  # type: ignore[arg-type]


def test_unknown_dtype_in_tensor_type() -> None:
    with pytest.raises(TypeError, match=f"unknown dtype name 'f33'; valid names: {VALID}"):
        TensorType((4,), "f33")

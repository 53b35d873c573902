"""Each predicate of tilefoundry.runtime.check on hand-made values: measured values, notes and verdicts."""

from __future__ import annotations

import math

import pytest
import torch

from tilefoundry.runtime.check import (
    PREDICATES,
    Predicate,
    PredicateResult,
    allclose,
    cosine,
    equal,
    max_abs,
    max_rel,
    nan_inf,
    ordered_bits,
    rel_l2,
    ulp,
)

NAN = float("nan")
INF = float("inf")
F32_TINY = 2.0**-149  # smallest f32 subnormal
F16_TINY = 2.0**-24  # smallest f16 subnormal
BF16_TINY = 2.0**-133  # smallest bf16 subnormal


def t(values: list[float] | list[int] | list[bool], dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.tensor(values, dtype=dtype)


def run(predicate: Predicate, candidate: torch.Tensor, reference: torch.Tensor | None) -> PredicateResult:
    return predicate.evaluate(candidate, reference)


# -- the table -------------------------------------------------------------------------------------------


def test_predicates_table_names_and_class_variables() -> None:
    names = {"allclose", "rel_l2", "cosine", "equal", "ulp", "max_abs", "max_rel", "nan_inf"}
    assert set(PREDICATES) == names
    for name, cls in PREDICATES.items():
        assert cls.name == name
        assert issubclass(cls, Predicate)
    assert {n for n, c in PREDICATES.items() if not c.needs_reference} == {"nan_inf"}
    assert {n for n, c in PREDICATES.items() if c.discrete} == {"equal", "nan_inf"}
    assert PREDICATES["allclose"].bounds == ("atol", "rtol")
    assert PREDICATES["cosine"].bounds == ("min",)
    for name in ("rel_l2", "ulp", "max_abs", "max_rel"):
        assert PREDICATES[name].bounds == ("max",)
    assert equal.bounds == () and nan_inf.bounds == ()
    with pytest.raises(TypeError):
        PREDICATES["foo"] = allclose  # type: ignore[index]


def test_instances_carry_their_bounds() -> None:
    p = allclose(atol=1e-5, rtol=1e-3)
    assert (p.atol, p.rtol) == (1e-5, 1e-3)
    assert p.bound_values == {"atol": 1e-5, "rtol": 1e-3}
    assert rel_l2(max=1e-2).max == 1e-2
    assert cosine(min=0.999).min == 0.999
    assert ulp(max=2).max == 2.0
    assert max_abs(max=0.5).max == 0.5 and max_rel(max=0.25).max == 0.25
    assert equal().bound_values == {} and nan_inf().bound_values == {}


# -- allclose ---------------------------------------------------------------------------------------------


def test_allclose_counts_violations_and_reports_max_abs() -> None:
    r = t([1.0, 2.0, 0.0], torch.float64)
    c = t([1.0, 2.002, 1e-4], torch.float64)
    result = run(allclose(atol=1e-3, rtol=0.0), c, r)
    assert result.values["violations"] == 1  # only 2.002 is off by more than 1e-3
    assert result.values["max_abs"] == pytest.approx(0.002, rel=1e-9)
    assert not result.passed and result.note is None
    # the relative part scales with |reference| (2e-3 at r=2), so the same pair passes with rtol
    result = run(allclose(atol=1e-4, rtol=1e-3), c, r)
    assert result.values["violations"] == 0 and result.passed


def test_allclose_bound_is_inclusive_and_zeros_pass() -> None:
    assert run(allclose(atol=0.5, rtol=0.0), t([1.5]), t([1.0])).passed
    assert not run(allclose(atol=0.5, rtol=0.0), t([1.5000001]), t([1.0])).passed
    zeros = run(allclose(atol=0.0, rtol=0.0), torch.zeros(4), torch.zeros(4))
    assert zeros.values == {"violations": 0.0, "max_abs": 0.0} and zeros.passed


def test_allclose_negative_zero_equals_zero() -> None:
    result = run(allclose(atol=0.0, rtol=0.0), t([-0.0, 0.0]), t([0.0, -0.0]))
    assert result.values == {"violations": 0.0, "max_abs": 0.0} and result.passed


def test_allclose_nan_in_candidate_where_reference_finite_fails() -> None:
    result = run(allclose(atol=1.0, rtol=1.0), t([1.0, NAN, 3.0]), t([1.0, 0.5, 3.0]))
    assert result.values == {"violations": 0.0, "max_abs": 0.0, "nonfinite_mismatches": 1.0}
    assert not result.passed
    assert result.note is not None
    assert "[1]: candidate nan, reference 0.5" in result.note
    assert "over the 2 elements finite on both sides" in result.note


def test_allclose_same_infinities_count_as_equal_and_nan_needs_equal_nan() -> None:
    c = t([NAN, -INF, INF, 2.0])
    r = t([NAN, -INF, INF, 2.0])
    strict = run(allclose(atol=0.0, rtol=0.0), c, r)
    assert not strict.passed
    assert strict.values == {"violations": 0.0, "max_abs": 0.0, "nonfinite_mismatches": 1.0}
    assert strict.note is not None
    assert "non-finite elements: 3 of 4 in the candidate, 3 in the reference" in strict.note
    assert "2 pairs count as equal (same-sign Inf" in strict.note
    assert "1 pair fails" in strict.note and "equal_nan" in strict.note and "first at [0]" in strict.note
    lenient = run(allclose(atol=0.0, rtol=0.0, equal_nan=True), c, r)
    assert lenient.passed and lenient.values == {"violations": 0.0, "max_abs": 0.0}
    assert lenient.note is not None and "3 pairs count as equal" in lenient.note
    infs_only = run(allclose(atol=0.0, rtol=0.0), t([-INF, INF, 2.0]), t([-INF, INF, 2.0]))
    assert infs_only.passed


def test_allclose_opposite_infinities_and_inf_against_finite_fail() -> None:
    result = run(allclose(atol=1.0, rtol=1.0), t([[INF, 1.0], [2.0, 3.0]]), t([[-INF, 1.0], [2.0, INF]]))
    assert result.values["nonfinite_mismatches"] == 2
    assert not result.passed
    assert result.note is not None and "first at [0, 0]: candidate inf, reference -inf" in result.note


def test_allclose_on_subnormals() -> None:
    result = run(allclose(atol=0.0, rtol=0.0), t([F32_TINY, 0.0]), t([0.0, 0.0]))
    assert result.values == {"violations": 1.0, "max_abs": F32_TINY}
    assert run(allclose(atol=F32_TINY, rtol=0.0), t([F32_TINY]), t([0.0])).passed


def test_allclose_bf16_and_f16_are_measured_exactly_in_float64() -> None:
    bf = run(allclose(atol=0.0, rtol=0.0), t([1.0078125], torch.bfloat16), t([1.0], torch.bfloat16))
    assert bf.values == {"violations": 1.0, "max_abs": 2.0**-7}
    f16 = run(allclose(atol=2.0**-10, rtol=0.0), t([1.0 + 2.0**-10], torch.float16), t([1.0], torch.float16))
    assert f16.values == {"violations": 0.0, "max_abs": 2.0**-10} and f16.passed


# -- max_abs ----------------------------------------------------------------------------------------------


def test_max_abs_measures_and_bound_is_inclusive() -> None:
    result = run(max_abs(max=0.25), t([1.0, -2.25, 3.0]), t([1.0, -2.0, 3.125]))
    assert result.values == {"max_abs": 0.25} and result.passed
    assert not run(max_abs(max=0.2), t([1.0, -2.25]), t([1.0, -2.0])).passed


def test_max_abs_nan_inf_zero_and_negative_zero() -> None:
    nan = run(max_abs(max=100.0), t([NAN, 0.0]), t([1.0, 0.0]))
    assert nan.values == {"max_abs": 0.0, "nonfinite_mismatches": 1.0} and not nan.passed
    inf = run(max_abs(max=100.0), t([1.0, 0.0]), t([INF, 0.0]))
    assert inf.values["nonfinite_mismatches"] == 1 and not inf.passed
    assert run(max_abs(max=0.0), t([-0.0, 0.0]), t([0.0, 0.0])).values == {"max_abs": 0.0}


def test_max_abs_f16_subnormal_and_bf16() -> None:
    f16 = run(max_abs(max=0.0), t([F16_TINY], torch.float16), t([0.0], torch.float16))
    assert f16.values == {"max_abs": F16_TINY} and not f16.passed
    bf = run(max_abs(max=1.0), t([BF16_TINY, 3.0], torch.bfloat16), t([0.0, 3.5], torch.bfloat16))
    assert bf.values == {"max_abs": 0.5} and bf.passed


def test_max_abs_when_nothing_is_finite_or_empty() -> None:
    all_nan = run(max_abs(max=0.0), t([NAN, NAN]), t([NAN, NAN]))
    assert all_nan.values == {"nonfinite_mismatches": 2.0} and not all_nan.passed
    assert all_nan.note is not None and "max_abs was not measured" in all_nan.note
    all_nan_equal = run(max_abs(max=0.0, equal_nan=True), t([NAN, NAN]), t([NAN, NAN]))
    assert all_nan_equal.values == {} and all_nan_equal.passed
    empty = run(max_abs(max=0.0), torch.zeros(0, 3), torch.zeros(0, 3))
    assert empty.values == {} and empty.passed
    assert empty.note is not None and "empty output" in empty.note


# -- max_rel ----------------------------------------------------------------------------------------------


def test_max_rel_measures_relative_error() -> None:
    result = run(max_rel(max=0.2), t([2.2, -4.0, 8.0], torch.float64), t([2.0, -4.0, 10.0], torch.float64))
    assert result.values == {"max_rel": pytest.approx(0.2)}
    assert result.note is None


def test_max_rel_measures_absolute_error_where_reference_is_zero() -> None:
    c = t([2.2, 0.5, -0.25], torch.float64)
    r = t([2.0, 0.0, -0.0], torch.float64)  # -0.0 is a zero reference too
    result = run(max_rel(max=0.2), c, r)
    assert result.values == {"max_rel": pytest.approx(0.1), "max_abs_at_zero_ref": 0.5}
    assert not result.passed  # 0.5 absolute error at a zero reference exceeds the same bound
    assert result.note is not None
    assert "2 of 3" in result.note and "absolute error |c - r| there instead" in result.note
    assert run(max_rel(max=0.5), c, r).passed


def test_max_rel_all_zero_reference_reports_no_relative_value() -> None:
    result = run(max_rel(max=1e-3), t([0.0, 1e-4]), t([0.0, 0.0]))
    assert "max_rel" not in result.values
    assert result.values["max_abs_at_zero_ref"] == pytest.approx(1e-4)
    assert result.passed and result.note is not None and "zero" in result.note


def test_max_rel_subnormal_reference_is_divided_honestly() -> None:
    result = run(max_rel(max=0.5), t([2 * F32_TINY]), t([F32_TINY]))
    assert result.values == {"max_rel": 1.0} and not result.passed


def test_max_rel_nan_and_half_precision() -> None:
    assert not run(max_rel(max=10.0), t([NAN, 1.0]), t([1.0, 1.0])).passed
    f16 = run(max_rel(max=1e-3), t([1.0 + 2.0**-10], torch.float16), t([1.0], torch.float16))
    assert f16.values == {"max_rel": 2.0**-10} and f16.passed
    bf = run(max_rel(max=1e-3), t([1.0078125], torch.bfloat16), t([1.0], torch.bfloat16))
    assert bf.values == {"max_rel": 2.0**-7} and not bf.passed


# -- rel_l2 -----------------------------------------------------------------------------------------------


def test_rel_l2_measures_relative_distance() -> None:
    result = run(rel_l2(max=0.1), t([3.0, 4.5]), t([3.0, 4.0]))
    assert result.values == {"rel_l2": pytest.approx(0.1, rel=1e-12)}  # 0.5 / 5
    assert result.passed and result.note is None
    assert not run(rel_l2(max=0.09), t([3.0, 4.5]), t([3.0, 4.0])).passed


def test_rel_l2_zero_reference_measures_absolute_distance_instead() -> None:
    result = run(rel_l2(max=1e-2), t([0.0, 3e-3, -4e-3], torch.float64), torch.zeros(3, dtype=torch.float64))
    assert "rel_l2" not in result.values
    assert result.values["abs_l2"] == pytest.approx(5e-3)
    assert result.passed
    assert result.note is not None
    assert "reference is all zeros" in result.note and "absolute L2 distance" in result.note
    assert not run(rel_l2(max=1e-3), t([0.0, 3e-3, -4e-3]), torch.zeros(3)).passed


def test_rel_l2_both_zero_and_negative_zero() -> None:
    result = run(rel_l2(max=0.0), t([-0.0, 0.0]), t([0.0, -0.0]))
    assert result.values == {"abs_l2": 0.0} and result.passed


def test_rel_l2_nan_in_candidate_fails_and_subnormal_reference() -> None:
    result = run(rel_l2(max=1.0), t([NAN, 4.0]), t([3.0, 4.0]))
    assert result.values == {"rel_l2": 0.0, "nonfinite_mismatches": 1.0} and not result.passed
    tiny = run(rel_l2(max=0.5), t([0.0]), t([F32_TINY]))
    assert tiny.values == {"rel_l2": 1.0} and not tiny.passed


def test_rel_l2_bf16_and_f16() -> None:
    bf = run(rel_l2(max=1e-2), t([1.0078125, 0.0], torch.bfloat16), t([1.0, 0.0], torch.bfloat16))
    assert bf.values == {"rel_l2": 2.0**-7} and bf.passed
    f16 = run(rel_l2(max=1e-4), t([1.0 + 2.0**-10], torch.float16), t([1.0], torch.float16))
    assert f16.values == {"rel_l2": 2.0**-10} and not f16.passed


# -- cosine -----------------------------------------------------------------------------------------------


def test_cosine_measures_direction() -> None:
    orthogonal = run(cosine(min=0.5), t([1.0, 0.0]), t([0.0, 1.0]))
    assert orthogonal.values == {"cosine": 0.0} and not orthogonal.passed
    scaled = run(cosine(min=0.999999), t([2.0, 4.0, -6.0]), t([1.0, 2.0, -3.0]))
    assert scaled.values["cosine"] == pytest.approx(1.0, abs=1e-15) and scaled.passed
    opposite = run(cosine(min=-1.0), t([-1.0, -2.0]), t([1.0, 2.0]))
    assert opposite.values["cosine"] == pytest.approx(-1.0, abs=1e-15)
    diagonal = run(cosine(min=0.7), t([[1.0, 1.0]]), t([[1.0, 0.0]]))
    assert diagonal.values["cosine"] == pytest.approx(math.sqrt(0.5)) and diagonal.passed


def test_cosine_between_two_zero_vectors_measures_norms_instead() -> None:
    result = run(cosine(min=0.999), t([0.0, -0.0]), t([-0.0, 0.0]))
    assert result.values == {"cand_l2": 0.0, "ref_l2": 0.0}
    assert result.passed
    assert result.note is not None and "both all zeros" in result.note and "L2 norms" in result.note


def test_cosine_one_zero_side_fails_with_a_note() -> None:
    result = run(cosine(min=0.0), t([0.0, 0.0]), t([3.0, 4.0]))
    assert result.values == {"cand_l2": 0.0, "ref_l2": 5.0}
    assert not result.passed
    assert result.note is not None and result.note.startswith("candidate is all zeros")
    other = run(cosine(min=0.0), t([3.0, 4.0]), t([0.0, 0.0]))
    assert other.values == {"cand_l2": 5.0, "ref_l2": 0.0} and not other.passed
    assert other.note is not None and other.note.startswith("reference is all zeros")


def test_cosine_nan_and_subnormals_and_half_precision() -> None:
    nan = run(cosine(min=0.0), t([NAN, 1.0]), t([1.0, 1.0]))
    assert nan.values == {"cosine": 1.0, "nonfinite_mismatches": 1.0} and not nan.passed
    # subnormal vectors still have a direction: normalising first avoids underflow to 0
    tiny = run(cosine(min=0.999), t([F32_TINY, 0.0]), t([2 * F32_TINY, 0.0]))
    assert tiny.values == {"cosine": 1.0} and tiny.passed
    bf = run(cosine(min=0.9), t([1.0, 1.0], torch.bfloat16), t([1.0, 0.0], torch.bfloat16))
    assert bf.values["cosine"] == pytest.approx(math.sqrt(0.5)) and not bf.passed
    f16 = run(cosine(min=0.9), t([F16_TINY, 1.0], torch.float16), t([0.0, 1.0], torch.float16))
    assert f16.values["cosine"] == pytest.approx(1.0) and f16.passed


def test_cosine_bound_must_lie_in_minus_one_to_one() -> None:
    with pytest.raises(ValueError, match=r"cosine: bound min=1.5 must lie in \[-1, 1\]"):
        cosine(min=1.5)
    assert cosine(min=-1.0).min == -1.0


# -- ulp --------------------------------------------------------------------------------------------------


def test_ordered_bits_are_ordered_like_values() -> None:
    values = t([-INF, -1.0, -F32_TINY, -0.0, 0.0, F32_TINY, 1.0, INF])
    keys = ordered_bits(values).tolist()
    assert keys[3] == keys[4] == 0
    assert keys == sorted(keys)
    assert keys[5] == 1 and keys[2] == -1


def test_ulp_f32_neighbours_zeros_and_subnormals() -> None:
    one = torch.tensor([1.0])
    assert run(ulp(max=1), torch.nextafter(one, torch.tensor([2.0])), one).values == {"max_ulp": 1.0}
    assert run(ulp(max=0), t([-0.0]), t([0.0])).values == {"max_ulp": 0.0}
    assert run(ulp(max=0), t([F32_TINY]), t([0.0])).values == {"max_ulp": 1.0}
    assert run(ulp(max=0), t([-F32_TINY]), t([F32_TINY])).values == {"max_ulp": 2.0}
    largest_subnormal = torch.tensor([0x007FFFFF], dtype=torch.int32).view(torch.float32)
    smallest_normal = torch.tensor([torch.finfo(torch.float32).tiny])
    assert run(ulp(max=1), largest_subnormal, smallest_normal).values == {"max_ulp": 1.0}
    result = run(ulp(max=2), t([1.0, 2.0]), t([1.0, 2.0]) + t([0.0, 3 * 2.0**-22]))
    assert result.values == {"max_ulp": 3.0} and not result.passed


def test_ulp_counts_in_f16_and_bf16() -> None:
    f16 = run(ulp(max=3), t([1.0 + 3 * 2.0**-10, F16_TINY], torch.float16), t([1.0, 0.0], torch.float16))
    assert f16.values == {"max_ulp": 3.0} and f16.passed
    bf = run(ulp(max=1), t([1.0078125], torch.bfloat16), t([1.0], torch.bfloat16))
    assert bf.values == {"max_ulp": 1.0} and bf.passed
    across_zero = run(ulp(max=1), t([-1.0], torch.bfloat16), t([1.0], torch.bfloat16))
    assert across_zero.values == {"max_ulp": 2.0 * 0x3F80}
    assert run(ulp(max=0), t([BF16_TINY], torch.bfloat16), t([-0.0], torch.bfloat16)).values == {"max_ulp": 1.0}


def test_ulp_f64_including_distances_beyond_int64() -> None:
    one = torch.tensor([1.0], dtype=torch.float64)
    up = torch.nextafter(one, torch.tensor([2.0], dtype=torch.float64))
    assert run(ulp(max=1), up, one).values == {"max_ulp": 1.0}
    big = torch.finfo(torch.float64).max
    far = run(ulp(max=1), t([-big], torch.float64), t([big], torch.float64))
    assert far.values == {"max_ulp": 2.0 * 0x7FEFFFFFFFFFFFFF}  # beyond int64: summed in float64
    assert not far.passed


def test_ulp_fp8() -> None:
    e4m3 = run(ulp(max=1), t([1.125]).to(torch.float8_e4m3fn), t([1.0]).to(torch.float8_e4m3fn))
    assert e4m3.values == {"max_ulp": 1.0}


def test_ulp_nonfinite_rule() -> None:
    big = torch.finfo(torch.float32).max
    inf_vs_max = run(ulp(max=10), t([INF]), t([big]))
    assert inf_vs_max.values == {"nonfinite_mismatches": 1.0} and not inf_vs_max.passed
    both_nan = run(ulp(max=0), t([NAN, 1.0]), t([NAN, 1.0]))
    assert both_nan.values == {"max_ulp": 0.0, "nonfinite_mismatches": 1.0} and not both_nan.passed
    both_nan_equal = run(ulp(max=0, equal_nan=True), t([NAN, 1.0]), t([NAN, 1.0]))
    assert both_nan_equal.values == {"max_ulp": 0.0} and both_nan_equal.passed
    assert both_nan_equal.note is not None and "1 pair counts as equal" in both_nan_equal.note


def test_ulp_refuses_integers_and_unknown_float_formats() -> None:
    assert "equal()" in (ulp(max=1).refusal(torch.int32) or "")
    assert ulp(max=1).refusal(torch.float32) is None
    with pytest.raises(TypeError, match="compare it exactly with equal"):
        ulp(max=1).evaluate(t([1], torch.int32), t([1], torch.int32))


# -- equal ------------------------------------------------------------------------------------------------


def test_equal_is_exact_on_integers_without_float_rounding() -> None:
    big = 2**53
    result = run(equal(), t([big, 7], torch.int64), t([big + 1, 7], torch.int64))
    assert result.values == {"mismatches": 1.0} and not result.passed
    assert run(equal(), t([big + 1], torch.int64), t([big + 1], torch.int64)).passed


def test_equal_on_bools_and_floats() -> None:
    bools = run(equal(), t([True, False], torch.bool), t([True, True], torch.bool))
    assert bools.values == {"mismatches": 1.0} and not bools.passed
    result = run(equal(), t([NAN, -0.0, INF, 1.0]), t([NAN, 0.0, INF, 1.0]))
    assert result.values == {"mismatches": 1.0} and not result.passed
    assert result.note is not None and "non-finite elements: 2 of 4 in the candidate" in result.note
    result = run(equal(equal_nan=True), t([NAN, -0.0, INF, 1.0]), t([NAN, 0.0, INF, 1.0]))
    assert result.values == {"mismatches": 0.0} and result.passed
    nan_vs_number = run(equal(), t([NAN, -INF]), t([1.0, INF]))
    assert nan_vs_number.values == {"mismatches": 2.0} and not nan_vs_number.passed


def test_equal_subnormals_bf16_f16() -> None:
    assert run(equal(), t([F32_TINY]), t([0.0])).values == {"mismatches": 1.0}
    assert run(equal(), t([F16_TINY], torch.float16), t([F16_TINY], torch.float16)).passed
    assert not run(equal(), t([1.0078125], torch.bfloat16), t([1.0], torch.bfloat16)).passed


# -- nan_inf ----------------------------------------------------------------------------------------------


def test_nan_inf_counts_without_a_reference() -> None:
    result = run(nan_inf(), t([1.0, NAN, INF, -INF, -0.0]), None)
    assert result.values == {"nan": 1.0, "inf": 2.0} and not result.passed
    clean = run(nan_inf(), t([0.0, -0.0, F32_TINY, 3.0]), None)
    assert clean.values == {"nan": 0.0, "inf": 0.0} and clean.passed


def test_nan_inf_on_half_precision_and_integers() -> None:
    assert run(nan_inf(), t([NAN, 1.0], torch.bfloat16), None).values == {"nan": 1.0, "inf": 0.0}
    assert run(nan_inf(), t([INF, F16_TINY], torch.float16), None).values == {"nan": 0.0, "inf": 1.0}
    ints = run(nan_inf(), t([1, 2], torch.int64), None)
    assert ints.values == {"nan": 0.0, "inf": 0.0} and ints.passed
    # with a reference given it still judges the candidate alone
    assert not run(nan_inf(), t([NAN]), t([NAN])).passed


# -- results derive their verdict ------------------------------------------------------------------------


def test_predicate_result_verdict_is_derived_from_values() -> None:
    result = PredicateResult(max_abs(max=1.0), {"max_abs": 2.0})
    assert not result.passed
    assert PredicateResult(max_abs(max=1.0), {"max_abs": 1.0}).passed
    with pytest.raises(AttributeError):
        result.passed = True  # type: ignore[misc]
    with pytest.raises(TypeError):
        result.values["max_abs"] = 0.0  # type: ignore[index]
    with pytest.raises(TypeError, match="Predicate instance"):
        PredicateResult("max_abs", {})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="real number"):
        PredicateResult(max_abs(max=1.0), {"max_abs": "small"})  # type: ignore[dict-item]


def test_evaluate_refuses_mismatched_tensors_and_missing_reference() -> None:
    with pytest.raises(ValueError, match=r"candidate \(2,\) f32 and reference \(3,\) f32"):
        equal().evaluate(torch.zeros(2), torch.zeros(3))
    with pytest.raises(ValueError, match="bf16"):
        max_abs(max=1.0).evaluate(torch.zeros(2), torch.zeros(2, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="compares against a reference"):
        rel_l2(max=1.0).evaluate(torch.zeros(2), None)

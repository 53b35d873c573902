"""check never passes what failed: the NaN / Inf rule of every comparison predicate, and ``equal_nan``."""

from __future__ import annotations

import pytest
import torch

from tilefoundry.runtime.check import (
    PREDICATES,
    allclose,
    check,
    cosine,
    equal,
    max_abs,
    max_rel,
    nan_inf,
    parse_predicate,
    rel_l2,
    ulp,
)

NAN = float("nan")
INF = float("inf")

# The seven comparison predicates, each at its tightest bound, in text and as constructed.
COMPARISONS = {
    "allclose:atol=0,rtol=0": allclose(atol=0, rtol=0),
    "rel_l2:max=0": rel_l2(max=0),
    "cosine:min=1": cosine(min=1),
    "ulp:max=0": ulp(max=0),
    "max_abs:max=0": max_abs(max=0),
    "max_rel:max=0": max_rel(max=0),
    "equal": equal(),
}


def test_the_seven_comparison_predicates_are_all_but_nan_inf() -> None:
    assert {p.name for p in COMPARISONS.values()} == set(PREDICATES) - {"nan_inf"}


@pytest.mark.parametrize("text", list(COMPARISONS))
def test_all_nan_on_both_sides_fails_and_passes_with_equal_nan(text: str) -> None:
    nans = torch.full((2, 3), NAN)
    strict = COMPARISONS[text]
    report = check(lambda: nans.clone(), lambda: nans.clone(), (), expect={"output": [strict]})
    assert not report.passed
    result = report.outputs[0].results[0]
    assert result.note is not None and "non-finite elements: 6 of 6 in the candidate, 6 in the reference" in result.note
    lenient = parse_predicate(f"{text}{',' if ':' in text else ':'}equal_nan")
    assert lenient.equal_nan and lenient == type(strict)(**strict.bound_values, equal_nan=True)
    report = check(lambda: nans.clone(), lambda: nans.clone(), (), expect={"output": [lenient]})
    assert report.passed
    assert "6 pairs count as equal" in (report.outputs[0].results[0].note or "")


@pytest.mark.parametrize("text", list(COMPARISONS))
def test_a_nan_at_one_position_fails_even_with_equal_nan_when_the_other_side_is_finite(text: str) -> None:
    lenient = parse_predicate(f"{text}{',' if ':' in text else ':'}equal_nan")
    result = lenient.evaluate(torch.tensor([1.0, NAN]), torch.tensor([1.0, 2.0]))
    assert not result.passed
    assert "first at [1]: candidate nan, reference 2" in (result.note or "")


@pytest.mark.parametrize("text", list(COMPARISONS))
def test_same_sign_infinities_count_as_equal_other_infinities_fail(text: str) -> None:
    predicate = parse_predicate(text)
    assert predicate.evaluate(torch.tensor([INF, -INF, 1.0]), torch.tensor([INF, -INF, 1.0])).passed
    assert not predicate.evaluate(torch.tensor([INF, 1.0]), torch.tensor([-INF, 1.0])).passed
    assert not predicate.evaluate(torch.tensor([INF, 1.0]), torch.tensor([3.0e38, 1.0])).passed
    assert not predicate.evaluate(torch.tensor([1.0, 1.0]), torch.tensor([-INF, 1.0])).passed


def test_nan_facing_an_infinity_fails_even_with_equal_nan() -> None:
    result = max_abs(max=1.0, equal_nan=True).evaluate(torch.tensor([NAN]), torch.tensor([INF]))
    assert result.values == {"nonfinite_mismatches": 1.0} and not result.passed


def test_equal_counts_complex_nans_by_the_same_rule() -> None:
    c = torch.tensor([complex(NAN, 0.0), complex(1.0, 2.0)])
    assert not equal().evaluate(c, c.clone()).passed
    assert equal(equal_nan=True).evaluate(c, c.clone()).passed


def test_equal_nan_on_integers_changes_nothing() -> None:
    ints = torch.tensor([1, 2, 3])
    assert equal(equal_nan=True).evaluate(ints, ints.clone()).passed
    assert not equal(equal_nan=True).evaluate(ints, torch.tensor([1, 2, 4])).passed


def test_text_form_round_trips_with_equal_nan() -> None:
    p = allclose(atol=1e-3, rtol=1e-3, equal_nan=True)
    assert str(p) == "allclose:atol=0.001,rtol=0.001,equal_nan"
    assert repr(p) == "allclose(atol=0.001, rtol=0.001, equal_nan=True)"
    assert parse_predicate(str(p)) == p
    assert parse_predicate("allclose:atol=1e-3,rtol=1e-3,equal_nan") == p
    assert parse_predicate("allclose: equal_nan , atol=1e-3, rtol=1e-3") == p
    assert parse_predicate("allclose:atol=1e-3,rtol=1e-3,equal_nan=true") == p
    assert parse_predicate("allclose:atol=1e-3,rtol=1e-3,equal_nan=false") == allclose(atol=1e-3, rtol=1e-3)
    assert str(equal(equal_nan=True)) == "equal:equal_nan" and parse_predicate("equal:equal_nan") == equal(
        equal_nan=True)
    assert p != allclose(atol=1e-3, rtol=1e-3) and hash(p) != hash(allclose(atol=1e-3, rtol=1e-3))
    assert p.bound_text == "atol=0.001 rtol=0.001 equal_nan"


def test_equal_nan_refusals() -> None:
    with pytest.raises(TypeError, match="nan_inf takes no equal_nan: it judges finiteness alone"):
        nan_inf(equal_nan=True)
    with pytest.raises(ValueError, match="nan_inf takes no equal_nan"):
        parse_predicate("nan_inf:equal_nan")
    with pytest.raises(TypeError, match="rel_l2: equal_nan must be True or False, got str 'yes'"):
        rel_l2(max=1.0, equal_nan="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="equal_nan='maybe' in .* is not true or false"):
        parse_predicate("rel_l2:max=1,equal_nan=maybe")
    with pytest.raises(ValueError, match="equal_nan given twice"):
        parse_predicate("rel_l2:max=1,equal_nan,equal_nan")


def test_nan_inf_still_asserts_finiteness_alone() -> None:
    assert not nan_inf().evaluate(torch.tensor([NAN]), None).passed
    assert not nan_inf().evaluate(torch.tensor([INF]), None).passed
    assert nan_inf().evaluate(torch.tensor([1.0]), None).passed


def test_the_report_shows_equal_nan_in_the_bound_column_and_json() -> None:
    nans = torch.full((2,), NAN)
    report = check(lambda: nans.clone(), lambda: nans.clone(), (), expect={"output": [rel_l2(max=0, equal_nan=True)]})
    assert "max=0 equal_nan" in report.table()
    result = report.to_dict()["outputs"][0]["results"][0]
    assert result["equal_nan"] is True and result["spec"] == "rel_l2:max=0.0,equal_nan"

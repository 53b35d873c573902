"""Constructing predicates (bounds validated) and building them from their text form."""

from __future__ import annotations

import pytest

from tilefoundry.runtime.check import (
    PREDICATES,
    Predicate,
    allclose,
    cosine,
    equal,
    max_abs,
    max_rel,
    nan_inf,
    parse_predicate,
    rel_l2,
    ulp,
)

EXAMPLES: list[Predicate] = [
    allclose(atol=1e-5, rtol=1e-3),
    rel_l2(max=1e-2),
    cosine(min=0.999),
    ulp(max=2),
    max_abs(max=0.125),
    max_rel(max=3e-4),
    equal(),
    nan_inf(),
]


def test_missing_bound_names_predicate_and_its_bounds() -> None:
    with pytest.raises(TypeError, match=r"allclose: missing bound rtol; it takes atol, rtol"):
        allclose(atol=1e-3)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"rel_l2: missing bound max; it takes max: rel_l2\(max=\.\.\.\)"):
        rel_l2()


def test_unknown_bound_names_predicate_and_its_bounds() -> None:
    with pytest.raises(TypeError, match=r"cosine: missing bound min; unknown bound max; it takes min"):
        cosine(max=0.9)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"equal: unknown bound atol; it takes no bounds: equal\(\)"):
        equal(atol=0.0)  # type: ignore[call-arg]


def test_bounds_are_keyword_only() -> None:
    with pytest.raises(TypeError, match=r"allclose takes its bounds by keyword: allclose\(atol=\.\.\., rtol"):
        allclose(1e-3, 1e-3)  # type: ignore[misc]


def test_bound_values_must_be_finite_real_numbers_in_range() -> None:
    with pytest.raises(TypeError, match="max_abs: bound max must be a real number, got str"):
        max_abs(max="0.1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="got bool"):
        ulp(max=True)
    with pytest.raises(ValueError, match="rel_l2: bound max must be finite, got nan"):
        rel_l2(max=float("nan"))
    with pytest.raises(ValueError, match="must be finite, got inf"):
        max_rel(max=float("inf"))
    with pytest.raises(ValueError, match=r"allclose: bound atol=-1e-05 must be >= 0"):
        allclose(atol=-1e-5, rtol=0.0)


def test_the_base_class_is_not_a_predicate() -> None:
    with pytest.raises(TypeError, match="Predicate is not a concrete predicate"):
        Predicate()


def test_predicates_are_immutable_and_compare_by_bounds() -> None:
    p = rel_l2(max=1e-2)
    with pytest.raises(AttributeError, match="immutable"):
        p.max = 1.0  # type: ignore[misc]
    assert p == rel_l2(max=0.01) and hash(p) == hash(rel_l2(max=0.01))
    assert p != rel_l2(max=0.02) and p != max_abs(max=1e-2)
    assert repr(allclose(atol=1e-5, rtol=1e-3)) == "allclose(atol=1e-05, rtol=0.001)"
    assert repr(equal()) == "equal()"


@pytest.mark.parametrize("predicate", EXAMPLES, ids=lambda p: p.name)
def test_text_form_round_trips(predicate: Predicate) -> None:
    text = str(predicate)
    assert parse_predicate(text) == predicate
    assert Predicate.parse(text) == predicate
    assert type(predicate).parse(text) == predicate


def test_parse_reads_bounds_and_tolerates_spaces() -> None:
    p = parse_predicate(" allclose : atol = 1e-3 , rtol=2e-3 ")
    assert isinstance(p, allclose) and (p.atol, p.rtol) == (1e-3, 2e-3)
    assert str(rel_l2(max=1e-2)) == "rel_l2:max=0.01"
    assert str(nan_inf()) == "nan_inf"
    assert parse_predicate("equal:") == equal()
    assert parse_predicate("ulp:max=2") == ulp(max=2)


def test_parse_unknown_predicate_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="unknown predicate 'rel_l3'") as info:
        parse_predicate("rel_l3:max=1")
    for name in PREDICATES:
        assert name in str(info.value)
    assert "allclose(atol=..., rtol=...)" in str(info.value)


def test_parse_unknown_or_missing_bound_is_a_value_error_naming_the_bounds() -> None:
    expected = r"rel_l2: missing bound max; unknown bound min; it takes max"
    with pytest.raises(ValueError, match=expected) as info:
        parse_predicate("rel_l2:min=1e-2")
    assert "rel_l2:max=..." in str(info.value)
    with pytest.raises(ValueError, match="allclose: missing bound rtol"):
        parse_predicate("allclose:atol=1e-3")
    with pytest.raises(ValueError, match="missing bound max"):
        parse_predicate("max_abs")


def test_parse_malformed_text() -> None:
    with pytest.raises(ValueError, match="malformed bound 'max' in 'rel_l2:max'; expected bound=value"):
        parse_predicate("rel_l2:max")
    with pytest.raises(ValueError, match="bound max of rel_l2 in 'rel_l2:max=small' is not a number"):
        parse_predicate("rel_l2:max=small")
    with pytest.raises(ValueError, match="bound max given twice"):
        parse_predicate("rel_l2:max=1,max=2")
    with pytest.raises(ValueError, match="empty predicate"):
        parse_predicate("  ")
    with pytest.raises(ValueError, match="must lie in"):
        parse_predicate("cosine:min=2")
    with pytest.raises(ValueError, match="must be finite"):
        parse_predicate("max_abs:max=inf")
    with pytest.raises(TypeError, match="a str"):
        parse_predicate(3)  # type: ignore[arg-type]


def test_parse_on_a_subclass_requires_that_subclass() -> None:
    with pytest.raises(ValueError, match="names rel_l2, not max_abs"):
        max_abs.parse("rel_l2:max=1")

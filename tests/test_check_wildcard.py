"""``check(..., expect={'*': [...]})``: the Python API takes the wildcard, as ``--expect '*=...'`` does."""

from __future__ import annotations

import pytest
import torch

from tilefoundry.runtime.check import CheckError, check, cosine, equal, max_abs, nan_inf, rel_l2


def _pair(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor]]:
    """A result with a float, an integer and a nested float output."""
    return x * 2.0, x.argmax(-1), (x + 1.0,)


def test_the_wildcard_covers_every_output_and_equal_on_integers() -> None:
    x = torch.randn(3, 5, generator=torch.Generator().manual_seed(0))
    report = check(_pair, _pair, (x,), expect={"*": [rel_l2(max=1e-6)]})
    assert report.passed
    assert [o.path for o in report.outputs] == ["output[0]", "output[1]", "output[2][0]"]
    assert [[r.predicate.name for r in o.results] for o in report.outputs] == [["rel_l2"], ["equal"], ["rel_l2"]]


def test_a_named_path_wins_over_the_wildcard() -> None:
    x = torch.randn(3, 5, generator=torch.Generator().manual_seed(1))
    report = check(_pair, _pair, (x,), expect={"output[0]": [max_abs(max=0.0), cosine(min=0.99)],
                                               "*": [rel_l2(max=1e-6)]})
    by_path = {o.path: [r.predicate.name for r in o.results] for o in report.outputs}
    assert by_path == {"output[0]": ["max_abs", "cosine"], "output[1]": ["equal"], "output[2][0]": ["rel_l2"]}


def test_the_wildcard_judges_like_a_named_path() -> None:
    x = torch.randn(4, generator=torch.Generator().manual_seed(2))
    report = check(lambda t: t + 0.5, lambda t: t, (x,), expect={"*": [rel_l2(max=1e-3)]})
    assert not report.passed and not report["output"].passed
    assert report["output"].results[0].values["rel_l2"] > 1e-3


def test_discrete_predicates_under_the_wildcard_stay_themselves() -> None:
    ids = torch.tensor([3, 1, 2])
    report = check(lambda t: t, lambda t: t, (ids,), expect={"*": [equal(), nan_inf()]})
    assert [r.predicate.name for r in report["output"].results] == ["equal", "nan_inf"]
    report = check(lambda t: t, lambda t: t, (ids,), expect={"*": [rel_l2(max=1e-3), cosine(min=0.9)]})
    assert [r.predicate.name for r in report["output"].results] == ["equal"], "equal once, for both"


def test_without_a_reference_the_wildcard_admits_one_sided_predicates_only() -> None:
    x = torch.ones(2)
    assert check(lambda t: t, None, (x,), expect={"*": [nan_inf()]}).passed
    with pytest.raises(CheckError, match=r"expect\['\*'\] asks for rel_l2, which compares against a reference"):
        check(lambda t: t, None, (x,), expect={"*": [rel_l2(max=1e-3)]})


def test_the_wildcard_is_validated_like_any_entry() -> None:
    x = torch.ones(2)
    with pytest.raises(CheckError, match=r"expect\['\*'\] is empty"):
        check(lambda t: t, lambda t: t, (x,), expect={"*": []})
    with pytest.raises(TypeError, match=r"expect\['\*'\] is a single predicate"):
        check(lambda t: t, lambda t: t, (x,), expect={"*": rel_l2(max=1e-3)})


def test_without_the_wildcard_an_unnamed_output_is_still_refused_naming_it() -> None:
    x = torch.randn(3, 5, generator=torch.Generator().manual_seed(3))
    with pytest.raises(CheckError, match=r"output\[1\], output\[2\]\[0\] have no predicates.*expect\['\*'\]"):
        check(_pair, _pair, (x,), expect={"output[0]": [rel_l2(max=1e-6)]})
    with pytest.raises(CheckError, match=r"expect names 'output\[7\]', which the result did not produce"):
        check(_pair, _pair, (x,), expect={"output[7]": [equal()], "*": [rel_l2(max=1e-6)]})

"""Report, OutputCheck: derived verdicts, the printed table and the JSON form."""

from __future__ import annotations

import json

import pytest
import torch

from tilefoundry.runtime.check import (
    OutputCheck,
    PredicateResult,
    Report,
    allclose,
    check,
    equal,
    max_abs,
    nan_inf,
    rel_l2,
)


def reference(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return a * 2, torch.zeros(3)


def candidate(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    out = a * 2
    out[0, 1] = float("nan")
    return out, torch.full((3,), 1e-3)


def mixed_report() -> Report:
    a = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    return check(
        candidate,
        reference,
        (a,),
        expect={
            "output[0]": [allclose(atol=1e-5, rtol=1e-3), nan_inf()],
            "output[1]": [rel_l2(max=1e-2)],
        },
    )


# -- derived verdicts -------------------------------------------------------------------------------------


def test_output_and_report_verdicts_are_all_of_their_parts() -> None:
    good = PredicateResult(max_abs(max=1.0), {"max_abs": 0.5})
    bad = PredicateResult(max_abs(max=1.0), {"max_abs": 1.5})
    ok_output = OutputCheck("output[0]", (2,), "f32", 1.0, (good, good))
    bad_output = OutputCheck("output[1]", (2,), "f32", 1.0, (good, bad))
    assert ok_output.passed and not bad_output.passed
    assert Report((ok_output,)).passed
    assert not Report((ok_output, bad_output)).passed
    with pytest.raises(AttributeError):
        bad_output.passed = True  # type: ignore[misc]
    with pytest.raises(TypeError):
        OutputCheck("output", (2,), "f32", 1.0, (good,), passed=True)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Report((ok_output,), passed=False)  # type: ignore[call-arg]


def test_empty_parts_cannot_pass_vacuously() -> None:
    with pytest.raises(ValueError, match="at least one predicate result"):
        OutputCheck("output", (2,), "f32", 1.0, ())
    with pytest.raises(ValueError, match="at least one output check"):
        Report(())
    one = OutputCheck("output", (2,), "f32", None, (PredicateResult(nan_inf(), {"nan": 0, "inf": 0}),))
    with pytest.raises(ValueError, match="appears twice"):
        Report((one, one))
    with pytest.raises(TypeError, match="PredicateResult"):
        OutputCheck("output", (2,), "f32", 1.0, ("pass",))  # type: ignore[arg-type]


def test_lookup_by_path() -> None:
    report = mixed_report()
    assert report["output[1]"].path == "output[1]"
    with pytest.raises(KeyError, match="no output 'output\\[7\\]'"):
        report["output[7]"]


# -- the table --------------------------------------------------------------------------------------------


def test_table_shows_every_part() -> None:
    report = mixed_report()
    text = str(report)
    assert text == report.table()
    lines = text.splitlines()
    assert lines[0].split() == ["path", "shape", "dtype", "ref_norm", "predicate", "bound", "measured", "verdict"]
    assert set(lines[1].replace(" ", "")) == {"-"}

    first = lines[2]
    assert first.split()[:4] == ["output[0]", "(2,", "3)", "f32"]
    assert "allclose" in first and "atol=1e-05 rtol=0.001" in first
    assert "violations=0 max_abs=0 nonfinite_mismatches=1" in first
    assert first.rstrip().endswith("FAIL")
    ref_norm = report.outputs[0].ref_norm
    assert ref_norm is not None and f"{ref_norm:.6g}" in first

    nan_row = lines[3]
    assert nan_row.split()[:3] == ["nan_inf", "-", "nan=1"]  # continuation row: no path columns
    assert nan_row.rstrip().endswith("FAIL")

    note = lines[4]  # an output's notes follow all its rows
    assert note.startswith("    note (allclose): non-finite elements: 1 of 6 in the candidate, 0 in the reference; "
                           "1 pair fails (first at [0, 1]: candidate nan, reference 2): a NaN on either side")
    assert "[0, 1]: candidate nan, reference 2" in note

    rel = lines[5]
    assert rel.split()[:4] == ["output[1]", "(3,)", "f32", "0"]
    assert "rel_l2" in rel and "max=0.01" in rel and "abs_l2=0.00173205" in rel
    assert rel.rstrip().endswith("PASS")
    assert lines[6].startswith("    note (rel_l2): reference is all zeros")

    assert lines[-1] == "FAIL: 1 of 2 outputs failed (output[0])"


def test_table_of_a_passing_report_without_reference() -> None:
    report = check(
        lambda a: (a, a.long()), None, (torch.ones(2),), expect={"output[0]": [nan_inf()], "output[1]": [nan_inf()]}
    )
    lines = str(report).splitlines()
    assert lines[2].split() == ["output[0]", "(2,)", "f32", "-", "nan_inf", "-", "nan=0", "inf=0", "PASS"]
    assert lines[3].split() == ["output[1]", "(2,)", "i64", "-", "nan_inf", "-", "nan=0", "inf=0", "PASS"]
    assert lines[-1] == "PASS: all 2 outputs meet their predicates"


# -- JSON -------------------------------------------------------------------------------------------------


def test_json_round_trips_to_the_dict_form() -> None:
    report = mixed_report()
    data = json.loads(report.to_json())
    assert data == report.to_dict()
    assert json.loads(report.to_json(indent=None)) == data

    assert data["passed"] is False
    assert [o["path"] for o in data["outputs"]] == ["output[0]", "output[1]"]
    first, second = data["outputs"]
    assert first["shape"] == [2, 3] and first["dtype"] == "f32" and first["passed"] is False
    assert first["ref_norm"] == pytest.approx(float(torch.linalg.vector_norm(torch.arange(6.0) * 2)))
    allclose_result, nan_result = first["results"]
    assert allclose_result == {
        "predicate": "allclose",
        "spec": "allclose:atol=1e-05,rtol=0.001",
        "bounds": {"atol": 1e-05, "rtol": 0.001},
        "equal_nan": False,
        "values": {"violations": 0.0, "max_abs": 0.0, "nonfinite_mismatches": 1.0},
        "passed": False,
        "note": allclose_result["note"],
    }
    assert "a NaN on either side fails" in allclose_result["note"]
    assert nan_result["values"] == {"nan": 1.0, "inf": 0.0} and nan_result["note"] is None
    assert second["passed"] is True and second["ref_norm"] == 0.0
    assert second["results"][0]["values"]["abs_l2"] == pytest.approx(3**0.5 * 1e-3)


def test_json_is_strict_and_writes_non_finite_numbers_as_strings() -> None:
    result = PredicateResult(max_abs(max=1.0), {"max_abs": float("inf"), "other": float("nan")})
    report = Report((OutputCheck("output", (1,), "f64", float("-inf"), (result,)),))
    text = report.to_json()
    assert "NaN" not in text and "Infinity" not in text
    data = json.loads(text)
    assert data == report.to_dict()
    assert data["outputs"][0]["ref_norm"] == "-inf"
    assert data["outputs"][0]["results"][0]["values"] == {"max_abs": "inf", "other": "nan"}
    assert data["passed"] is False


def test_json_without_reference_has_null_ref_norm() -> None:
    report = check(lambda a: a, None, (torch.ones(2),), expect={"output": [nan_inf()]})
    assert json.loads(report.to_json())["outputs"][0]["ref_norm"] is None
    exact = check(lambda a: a, lambda a: a, (torch.ones(2),), expect={"output": [equal()]})
    assert json.loads(exact.to_json())["passed"] is True

"""What ``check`` returns: one :class:`OutputCheck` per output, gathered in a :class:`Report`.

Verdicts are derived, never stored: an output passes iff all its predicate results pass, and a report
passes iff all its outputs pass, so a verdict cannot disagree with the measurements beside it. Neither
can be empty (an empty one would be a vacuous pass).

A report prints as a table (``str(report)``) and converts to JSON (:meth:`Report.to_json`,
:meth:`Report.to_dict`). In the dict / JSON form non-finite floats are written as the strings ``"nan"``,
``"inf"`` and ``"-inf"``, so the JSON is strict (no bare NaN tokens) and
``json.loads(report.to_json()) == report.to_dict()``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from .predicate import PredicateResult
from .text import value_text

__all__ = ["COLUMNS", "OutputCheck", "Report", "render_table"]

COLUMNS = ("path", "shape", "dtype", "ref_norm", "predicate", "bound", "measured", "verdict")
"""The columns of a report table."""


def _json_float(value: float | None) -> float | str | None:
    if value is None:
        return None
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def _verdict(passed: bool) -> str:
    return "PASS" if passed else "FAIL"


def _result_dict(result: PredicateResult) -> dict[str, Any]:
    predicate = result.predicate
    return {
        "predicate": predicate.name,
        "spec": str(predicate),
        "bounds": {k: _json_float(v) for k, v in predicate.bound_values.items()},
        "equal_nan": predicate.equal_nan,
        "values": {k: _json_float(v) for k, v in result.values.items()},
        "passed": result.passed,
        "note": result.note,
    }


@dataclass(frozen=True)
class OutputCheck:
    """The predicates measured on one output tensor.

    Attributes:
        path: where the tensor sits in the result: ``"output"``, ``"output[0]"``, ``"output[1][0]"``...
        shape: its shape.
        dtype: its dtype's short name (``"bf16"``, ``"f32"``, ``"i64"``...).
        ref_norm: the L2 norm (float64) of the reference's finite elements; None without a reference.
        results: one result per predicate, in the order ``expect`` listed them (at least one).
        passed: derived: all results passed.
    """

    path: str
    shape: tuple[int, ...]
    dtype: str
    ref_norm: float | None
    results: tuple[PredicateResult, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        object.__setattr__(self, "results", tuple(self.results))
        if not self.results:
            raise ValueError(f"{self.path}: an output check needs at least one predicate result")
        for result in self.results:
            if not isinstance(result, PredicateResult):
                raise TypeError(f"{self.path}: results must be PredicateResult, got {result!r}")

    @property
    def passed(self) -> bool:
        """Whether every predicate on this output passed."""
        return all(result.passed for result in self.results)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of this output's check (see the module docstring for non-finite floats)."""
        return {
            "path": self.path,
            "shape": list(self.shape),
            "dtype": self.dtype,
            "ref_norm": _json_float(self.ref_norm),
            "passed": self.passed,
            "results": [_result_dict(r) for r in self.results],
        }


@dataclass(frozen=True)
class Report:
    """The outcome of ``check``: one :class:`OutputCheck` per output tensor, in result order.

    Attributes:
        outputs: the per-output checks (at least one; paths unique).
        passed: derived: every output passed.
    """

    outputs: tuple[OutputCheck, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "outputs", tuple(self.outputs))
        if not self.outputs:
            raise ValueError("a report needs at least one output check; an empty one would pass vacuously")
        seen: set[str] = set()
        for output in self.outputs:
            if not isinstance(output, OutputCheck):
                raise TypeError(f"outputs must be OutputCheck, got {output!r}")
            if output.path in seen:
                raise ValueError(f"output path {output.path} appears twice in one report")
            seen.add(output.path)

    @property
    def passed(self) -> bool:
        """Whether every output passed."""
        return all(output.passed for output in self.outputs)

    @property
    def failed(self) -> tuple[OutputCheck, ...]:
        """The outputs that failed, in result order."""
        return tuple(output for output in self.outputs if not output.passed)

    def __getitem__(self, path: str) -> OutputCheck:
        """The check of the output at ``path``."""
        for output in self.outputs:
            if output.path == path:
                return output
        raise KeyError(f"no output {path!r} in this report; it has {', '.join(o.path for o in self.outputs)}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: ``{"passed", "outputs": [{"path", "shape", "dtype", "ref_norm", "passed",
        "results": [{"predicate", "spec", "bounds", "equal_nan", "values", "passed", "note"}]}]}``."""
        return {"passed": self.passed, "outputs": [output.to_dict() for output in self.outputs]}

    def to_json(self, indent: int | None = 2) -> str:
        """The report as strict JSON text (``to_dict`` serialised)."""
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    def summary(self) -> str:
        """The overall verdict line, e.g. ``"FAIL: 1 of 3 outputs failed (output[1])"``."""
        n = len(self.outputs)
        outputs = f"{n} output{'s' if n != 1 else ''}"
        if self.passed:
            return f"PASS: all {outputs} meet their predicates"
        failed = self.failed
        return f"FAIL: {len(failed)} of {outputs} failed ({', '.join(o.path for o in failed)})"

    def rows(self) -> list[tuple[tuple[str, ...], list[str]]]:
        """The table's rows: per predicate result, its cells (:data:`COLUMNS`) and the notes printed under it.

        An output's notes follow its last row; a continuation row leaves the path columns empty.
        """
        rows: list[tuple[tuple[str, ...], list[str]]] = []
        for output in self.outputs:
            output_notes: list[str] = []
            for i, result in enumerate(output.results):
                predicate = result.predicate
                measured = " ".join(f"{k}={value_text(v)}" for k, v in result.values.items())
                head: tuple[str, ...] = ("",) * 4
                if i == 0:
                    ref_norm = "-" if output.ref_norm is None else value_text(output.ref_norm)
                    head = (output.path, str(output.shape), output.dtype, ref_norm)
                rows.append(((*head, predicate.name, predicate.bound_text, measured or "-", _verdict(result.passed)),
                             []))
                if result.note:
                    output_notes.append(f"note ({predicate.name}): {result.note}")
            rows[-1][1].extend(output_notes)
        return rows

    def table(self) -> str:
        """The report as an aligned text table, each output's notes under its rows, the verdict line last."""
        return render_table(self.rows(), self.summary())

    def __str__(self) -> str:
        return self.table()


def render_table(rows: list[tuple[tuple[str, ...], list[str]]], summary: str) -> str:
    """Rows of :data:`COLUMNS` cells (each with the notes printed under it) as an aligned table, ``summary`` last."""
    widths = [max([len(c), *(len(cells[k]) for cells, _ in rows)]) for k, c in enumerate(COLUMNS)]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(cell.ljust(w) for cell, w in zip(cells, widths, strict=True)).rstrip()

    lines = [line(COLUMNS), line(tuple("-" * w for w in widths))]
    for cells, notes in rows:
        lines.append(line(cells))
        lines.extend(f"    {text}" for text in notes)
    lines.append(summary)
    return "\n".join(lines)

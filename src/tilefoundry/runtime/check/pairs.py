"""Element pairs of a candidate and a reference output, in float64, with the non-finite bookkeeping.

Every comparison predicate follows one rule for NaN and Inf (the rule of ``torch.testing.assert_close``),
so it lives here:

* a NaN on either side fails, unless the predicate was given ``equal_nan``: then a NaN on both sides at the
  same position *agrees* (counts as equal);
* an infinity of the same sign at the same position on both sides *agrees*;
* any other non-finite pair (an Inf against a number, +Inf against -Inf, a NaN against anything without
  ``equal_nan``) is a *non-finite mismatch*: the predicate fails, whatever its measure says.

Agreeing pairs are left out of the measure (their distance is not a number); the measure itself is taken
over the pairs finite on both sides, converted exactly to float64. Whenever an output holds a non-finite
element, the predicate's note says how many there were, how many agreed, how many failed and where the first
failure is.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .text import value_text

__all__ = ["NonFinite", "Pairs", "compute_device", "index_text", "join_notes"]


def compute_device(tensor: torch.Tensor) -> torch.device:
    """Where comparisons on ``tensor`` run: its own device, or the CPU where float64 is unavailable."""
    if tensor.device.type == "mps":
        return torch.device("cpu")
    return tensor.device


def index_text(flat_index: int, shape: tuple[int, ...]) -> str:
    """The multi-index of element ``flat_index`` of a row-major tensor of ``shape``, as ``"[i, j]"``."""
    index: list[int] = []
    rest = flat_index
    for extent in reversed(shape):
        rest, i = divmod(rest, extent)
        index.append(i)
    return "[" + ", ".join(str(i) for i in reversed(index)) + "]"


@dataclass(frozen=True)
class NonFinite:
    """How the non-finite elements of a candidate and a reference output fared under the rule above.

    Attributes:
        total: number of elements in the output.
        candidate: non-finite elements of the candidate.
        reference: non-finite elements of the reference.
        agreed: pairs that count as equal (same-sign Inf; NaN on both sides with ``equal_nan``).
        mismatched: pairs that fail.
        first_mismatch: where the first failing pair is and what the two sides hold there, or None.
        equal_nan: whether NaNs at the same positions counted as equal.
    """

    total: int
    candidate: int
    reference: int
    agreed: int
    mismatched: int
    first_mismatch: str | None
    equal_nan: bool

    @classmethod
    def of(cls, c: torch.Tensor, r: torch.Tensor, shape: tuple[int, ...], equal_nan: bool) -> tuple[NonFinite,
                                                                                                  torch.Tensor]:
        """Classify the pairs of the flat tensors ``c`` and ``r``; also returns the mask of agreeing pairs."""
        if c.is_complex():
            c, r = torch.view_as_real(c).reshape(-1, 2), torch.view_as_real(r).reshape(-1, 2)
            c_nan, r_nan = torch.isnan(c).any(-1), torch.isnan(r).any(-1)
            c_bad, r_bad = ~torch.isfinite(c).all(-1), ~torch.isfinite(r).all(-1)
            same_inf = (c_bad & r_bad & ~c_nan & ~r_nan & (c == r).all(-1))
        elif c.is_floating_point():
            c_nan, r_nan = torch.isnan(c), torch.isnan(r)
            c_bad, r_bad = ~torch.isfinite(c), ~torch.isfinite(r)
            same_inf = torch.isinf(c) & torch.isinf(r) & (c == r)
        else:
            none = torch.zeros(c.shape[0], dtype=torch.bool, device=c.device)
            return cls(int(c.shape[0]), 0, 0, 0, 0, None, equal_nan), none
        agreed = same_inf | (c_nan & r_nan) if equal_nan else same_inf
        mismatch = (c_bad | r_bad) & ~agreed
        mismatched = int(mismatch.sum().item())
        first = None
        if mismatched:
            at = int(torch.nonzero(mismatch)[0, 0].item())
            first = f"{index_text(at, shape)}: candidate {_element_text(c[at])}, reference {_element_text(r[at])}"
        counts = cls(
            total=int(c_bad.shape[0]),
            candidate=int(c_bad.sum().item()),
            reference=int(r_bad.sum().item()),
            agreed=int(agreed.sum().item()),
            mismatched=mismatched,
            first_mismatch=first,
            equal_nan=equal_nan,
        )
        return counts, agreed

    def mismatch_values(self) -> dict[str, float]:
        """``{"nonfinite_mismatches": n}`` when there are mismatches, else an empty dict."""
        return {"nonfinite_mismatches": float(self.mismatched)} if self.mismatched else {}

    def note(self) -> str | None:
        """How many elements were non-finite and what became of them; None when every element is finite."""
        if not self.candidate and not self.reference:
            return None
        parts = [
            f"non-finite elements: {self.candidate} of {self.total} in the candidate, {self.reference} in the "
            "reference"
        ]
        if self.agreed:
            why = "same-sign Inf, or NaN with equal_nan" if self.equal_nan else "same-sign Inf"
            parts.append(f"{_pairs(self.agreed)} {'counts' if self.agreed == 1 else 'count'} as equal ({why}, at "
                         "the same position on both sides)")
        if self.mismatched:
            nan_rule = ("a NaN facing a number or an Inf fails" if self.equal_nan
                        else "a NaN on either side fails unless the predicate is given equal_nan (then NaNs at the "
                             "same positions count as equal)")
            parts.append(
                f"{_pairs(self.mismatched)} {'fails' if self.mismatched == 1 else 'fail'} (first at "
                f"{self.first_mismatch}): {nan_rule}, and so does an Inf facing a number or the other sign"
            )
        return "; ".join(parts)


def _pairs(n: int) -> str:
    return f"{n} pair" if n == 1 else f"{n} pairs"


def _element_text(value: torch.Tensor) -> str:
    if value.dim() == 0:
        return value_text(float(value.item()))
    re, im = (float(v) for v in value.tolist())
    return f"({value_text(re)}{'+' if not im < 0 else '-'}{value_text(abs(im))}j)"


@dataclass(frozen=True)
class Pairs:
    """Candidate and reference elements side by side, split by the non-finite rule above.

    Attributes:
        candidate: the candidate's elements finite on both sides, float64, 1-D.
        reference: the reference's elements at the same positions, float64, 1-D.
        finite: mask (over the flattened output) of the pairs finite on both sides.
        nonfinite: the non-finite bookkeeping (:class:`NonFinite`).
    """

    candidate: torch.Tensor
    reference: torch.Tensor
    finite: torch.Tensor
    nonfinite: NonFinite

    @classmethod
    def of(cls, candidate: torch.Tensor, reference: torch.Tensor, *, equal_nan: bool = False) -> Pairs:
        """Pair ``candidate`` with ``reference`` (same shape) on the reference's compute device."""
        device = compute_device(reference)
        shape = tuple(reference.shape)
        c = candidate.detach().to(device=device, dtype=torch.float64).reshape(-1)
        r = reference.detach().to(device=device, dtype=torch.float64).reshape(-1)
        finite = torch.isfinite(c) & torch.isfinite(r)
        nonfinite, _ = NonFinite.of(c, r, shape, equal_nan)
        return cls(candidate=c[finite], reference=r[finite], finite=finite, nonfinite=nonfinite)

    @property
    def count(self) -> int:
        """Number of pairs finite on both sides (the ones measured)."""
        return int(self.candidate.numel())

    @property
    def total(self) -> int:
        """Number of elements in the output."""
        return self.nonfinite.total

    def mismatch_values(self) -> dict[str, float]:
        """``{"nonfinite_mismatches": n}`` when there are mismatches, else an empty dict."""
        return self.nonfinite.mismatch_values()

    def note(self, measure: str) -> str | None:
        """The non-finite elements and what was left out of ``measure``; None when every pair was measured."""
        if self.total == 0:
            return "empty output: no elements, nothing measured"
        counts = self.nonfinite.note()
        if counts is None:
            return None
        if self.count:
            coverage = f"{measure} is measured over the {self.count} elements finite on both sides"
        else:
            coverage = f"no element is finite on both sides, so {measure} was not measured"
        return f"{counts}; {coverage}"


def join_notes(*notes: str | None) -> str | None:
    """The non-empty notes joined with ``"; "``, or None when there are none."""
    kept = [n for n in notes if n]
    return "; ".join(kept) if kept else None

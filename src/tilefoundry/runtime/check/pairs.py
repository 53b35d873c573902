"""Element pairs of a candidate and a reference output, in float64, with the non-finite bookkeeping.

Every continuous predicate follows one rule for NaN and Inf, so it lives here:

* a pair where both sides are NaN, or both are the same infinity, *agrees*: the candidate reproduces the
  reference there. It is left out of the measure (its distance is not a number) and counts as equal.
* a pair where only one side is non-finite, or the two are different non-finite values (+Inf against
  -Inf, NaN against Inf), is a *non-finite mismatch*: the predicate fails, whatever its measure says.
* the measure itself is taken over the pairs finite on both sides, converted exactly to float64.

Whenever pairs were left out, the predicate's note says how many, where the first mismatch is, and that
the measure covers only the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .text import value_text

__all__ = ["Pairs", "compute_device", "index_text", "join_notes"]


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
class Pairs:
    """Candidate and reference elements side by side, split by the non-finite rule above.

    Attributes:
        candidate: the candidate's elements finite on both sides, float64, 1-D.
        reference: the reference's elements at the same positions, float64, 1-D.
        finite: mask (over the flattened output) of the pairs finite on both sides.
        total: number of elements in the output.
        agreed: pairs that are the same NaN/Inf on both sides.
        mismatched: pairs that are non-finite on one side only, or different non-finite values.
        first_mismatch: where the first mismatch is and what the two sides hold there, or None.
    """

    candidate: torch.Tensor
    reference: torch.Tensor
    finite: torch.Tensor
    total: int
    agreed: int
    mismatched: int
    first_mismatch: str | None

    @classmethod
    def of(cls, candidate: torch.Tensor, reference: torch.Tensor) -> Pairs:
        """Pair ``candidate`` with ``reference`` (same shape) on the reference's compute device."""
        device = compute_device(reference)
        shape = tuple(reference.shape)
        c = candidate.detach().to(device=device, dtype=torch.float64).reshape(-1)
        r = reference.detach().to(device=device, dtype=torch.float64).reshape(-1)
        c_finite = torch.isfinite(c)
        r_finite = torch.isfinite(r)
        finite = c_finite & r_finite
        both_nan = torch.isnan(c) & torch.isnan(r)
        same_inf = torch.isinf(c) & torch.isinf(r) & (c == r)
        agreed = both_nan | same_inf
        mismatch = ~finite & ~agreed
        mismatched = int(mismatch.sum().item())
        first = None
        if mismatched:
            at = int(torch.nonzero(mismatch)[0, 0].item())
            first = (
                f"{index_text(at, shape)}: candidate {value_text(float(c[at].item()))}, "
                f"reference {value_text(float(r[at].item()))}"
            )
        return cls(
            candidate=c[finite],
            reference=r[finite],
            finite=finite,
            total=c.numel(),
            agreed=int(agreed.sum().item()),
            mismatched=mismatched,
            first_mismatch=first,
        )

    @property
    def count(self) -> int:
        """Number of pairs finite on both sides (the ones measured)."""
        return int(self.candidate.numel())

    def mismatch_values(self) -> dict[str, float]:
        """``{"nonfinite_mismatches": n}`` when there are mismatches, else an empty dict."""
        return {"nonfinite_mismatches": float(self.mismatched)} if self.mismatched else {}

    def note(self, measure: str) -> str | None:
        """What was left out of ``measure`` and why; None when every pair was measured."""
        if self.total == 0:
            return "empty output: no elements, nothing measured"
        if not self.mismatched and not self.agreed:
            return None
        parts = []
        if self.mismatched:
            parts.append(
                f"{self.mismatched} of {self.total} elements are NaN/Inf on one side only or differ in "
                f"kind (first at {self.first_mismatch}), which fails"
            )
        if self.agreed:
            parts.append(
                f"{self.agreed} of {self.total} elements are the same NaN/Inf on both sides and count as equal"
            )
        if self.count:
            parts.append(f"{measure} is measured over the {self.count} elements finite on both sides")
        else:
            parts.append(f"no element is finite on both sides, so {measure} was not measured")
        return "; ".join(parts)


def join_notes(*notes: str | None) -> str | None:
    """The non-empty notes joined with ``"; "``, or None when there are none."""
    kept = [n for n in notes if n]
    return "; ".join(kept) if kept else None

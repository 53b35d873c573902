"""The eight predicates and the ``PREDICATES`` table.

Shared semantics (see :mod:`.pairs` for the non-finite rule):

* continuous predicates (``allclose``, ``rel_l2``, ``cosine``, ``ulp``, ``max_abs``, ``max_rel``) compare
  the candidate with the reference elementwise over the flattened output, in float64 (every float dtype
  converts to float64 exactly). They are refused on integer, boolean and complex outputs.
* NaN and Inf, for all seven comparison predicates (the six above and ``equal``): a NaN on either side
  fails, unless the predicate is given ``equal_nan``, which counts NaNs at the same positions on both sides
  as equal; an Inf of the same sign at the same position on both sides counts as equal; any other Inf
  fails. A pair that counts as equal is left out of the measure; a failing pair is counted in the value
  ``nonfinite_mismatches`` (``mismatches`` for ``equal``), and the note says how many non-finite elements
  each side held. ``nan_inf`` asserts finiteness of the candidate alone and takes no ``equal_nan``.
* bounds are inclusive: ``max=`` passes at a measured value equal to it, ``min=`` likewise.
* ``equal`` and ``nan_inf`` are ``discrete``: they apply to every dtype.
* values that are counts are floats holding whole numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import torch

from .dtypes import dtype_name
from .pairs import NonFinite, Pairs, compute_device, join_notes
from .predicate import Predicate
from .text import value_text

__all__ = [
    "PREDICATES",
    "allclose",
    "cosine",
    "equal",
    "max_abs",
    "max_rel",
    "nan_inf",
    "rel_l2",
    "ulp",
]


_Measured = tuple[dict[str, float], str | None]
"""What a measure gives: the measured values by name, and a note when the measure changed meaning."""


def _mismatch_free(values: Mapping[str, float]) -> bool:
    return values.get("nonfinite_mismatches", 0.0) == 0.0


class _Continuous(Predicate):
    """A continuous predicate: measured over the finite pairs, with the shared non-finite rule.

    :meth:`measure` pairs the two outputs (:class:`.Pairs`), lets :meth:`measure_pairs` take the
    predicate's own measure over the finite pairs, then adds ``nonfinite_mismatches`` and the note on
    what was left out, ahead of any note of the measure's own.
    """

    needs_reference = True
    discrete = False

    def measure(self, candidate: torch.Tensor, reference: torch.Tensor | None) -> _Measured:
        """The predicate's measure over the finite pairs, the non-finite mismatches, and the notes."""
        assert reference is not None
        pairs = Pairs.of(candidate, reference, equal_nan=self.equal_nan)
        values, note = self.measure_pairs(pairs, candidate, reference)
        values.update(pairs.mismatch_values())
        return values, join_notes(pairs.note(self.name), note)

    def measure_pairs(self, pairs: Pairs, candidate: torch.Tensor, reference: torch.Tensor) -> _Measured:
        """The measured values over ``pairs`` and a note when the measure changed meaning."""
        raise NotImplementedError(f"{type(self).__name__} does not implement measure_pairs")


class allclose(_Continuous):
    """Every element within ``atol + rtol * |reference|`` of the reference.

    Element ``i`` passes when ``|c_i - r_i| <= atol + rtol * |r_i|`` (the tolerance scales with the
    reference only, as in ``torch.allclose``).

    Values: ``violations`` (finite pairs outside the tolerance), ``max_abs`` (largest ``|c - r|`` over
    the finite pairs; absent when there are none). Passes iff there are no violations and no non-finite
    mismatches.
    """

    name = "allclose"
    bounds = ("atol", "rtol")

    atol: float
    rtol: float

    def measure_pairs(self, pairs: Pairs, candidate: torch.Tensor, reference: torch.Tensor) -> _Measured:
        """Count elements outside the tolerance, the largest absolute error and the largest excess over the
        tolerance (``max_violation``)."""
        error = (pairs.candidate - pairs.reference).abs()
        tolerance = self.atol + self.rtol * pairs.reference.abs()
        values: dict[str, float] = {"violations": float((error > tolerance).sum().item())}
        if pairs.count:
            values["max_abs"] = float(error.max().item())
            # how far the worst element lies past its tolerance (<= 0 when none does), under the reference
            # implementation's name: read as values["max_violation"], not listed
            values["max_violation"] = float((error - tolerance).max().item())
        return values, None

    def judge(self, values: Mapping[str, float]) -> bool:
        """No element outside the tolerance, no non-finite mismatch."""
        return values.get("violations", 0.0) == 0.0 and _mismatch_free(values)


class max_abs(_Continuous):
    """The largest absolute error ``max |c - r|`` is at most ``max``.

    Values: ``max_abs`` over the finite pairs (absent when there are none).
    """

    name = "max_abs"
    bounds = ("max",)

    max: float

    def measure_pairs(self, pairs: Pairs, candidate: torch.Tensor, reference: torch.Tensor) -> _Measured:
        """The largest absolute error over the finite pairs."""
        values: dict[str, float] = {}
        if pairs.count:
            values["max_abs"] = float((pairs.candidate - pairs.reference).abs().max().item())
        return values, None

    def judge(self, values: Mapping[str, float]) -> bool:
        """``max_abs <= max`` and no non-finite mismatch."""
        return values.get("max_abs", 0.0) <= self.max and _mismatch_free(values)


class max_rel(_Continuous):
    """The largest relative error ``max |c - r| / |r|`` is at most ``max``.

    Relative error has no meaning where the reference element is zero (``0.0`` or ``-0.0``): there the
    absolute error ``|c - r|`` is measured instead, against the same bound, reported as
    ``max_abs_at_zero_ref``, and the note says so. A reference element that is tiny but not zero (a
    subnormal) is divided by honestly, and may give a huge relative error.

    Values: ``max_rel`` over finite pairs with a non-zero reference; ``max_abs_at_zero_ref`` over finite
    pairs with a zero reference; each absent when it has no pairs.
    """

    name = "max_rel"
    bounds = ("max",)

    max: float

    def measure_pairs(self, pairs: Pairs, candidate: torch.Tensor, reference: torch.Tensor) -> _Measured:
        """Relative error where the reference is non-zero, absolute error where it is zero."""
        error = (pairs.candidate - pairs.reference).abs()
        zero = pairs.reference == 0
        values: dict[str, float] = {}
        note = None
        if bool((~zero).any().item()):
            values["max_rel"] = float((error[~zero] / pairs.reference[~zero].abs()).max().item())
        zeros = int(zero.sum().item())
        if zeros:
            worst = float(error[zero].max().item())
            values["max_abs_at_zero_ref"] = worst
            note = (
                f"{zeros} of {pairs.count} measured reference elements are zero, where relative error "
                f"has no meaning: measured the absolute error |c - r| there instead (max "
                f"{value_text(worst)}), against the same bound"
            )
        return values, note

    def judge(self, values: Mapping[str, float]) -> bool:
        """Both measured errors ``<= max`` and no non-finite mismatch."""
        return (
            values.get("max_rel", 0.0) <= self.max
            and values.get("max_abs_at_zero_ref", 0.0) <= self.max
            and _mismatch_free(values)
        )


class rel_l2(_Continuous):
    """The relative L2 distance ``||c - r||_2 / ||r||_2`` is at most ``max``.

    Over an all-zero reference the relative distance has no meaning; the absolute distance
    ``||c - r||_2`` is measured instead, reported as ``abs_l2`` and held to the same bound, and the note
    says so.

    Values: ``rel_l2``, or ``abs_l2`` (also read as ``absolute_l2``) when the reference is all zeros; neither when
    no pair is finite.
    """

    name = "rel_l2"
    bounds = ("max",)

    max: float

    def measure_pairs(self, pairs: Pairs, candidate: torch.Tensor, reference: torch.Tensor) -> _Measured:
        """The L2 norm of the difference, relative to the reference's L2 norm when that is non-zero."""
        values: dict[str, float] = {}
        note = None
        if pairs.count:
            distance = float(torch.linalg.vector_norm(pairs.candidate - pairs.reference).item())
            ref_norm = float(torch.linalg.vector_norm(pairs.reference).item())
            if ref_norm == 0.0:
                values["abs_l2"] = distance
                note = (
                    "reference is all zeros, where a relative distance has no meaning: measured the "
                    f"absolute L2 distance ||c - r|| = {value_text(distance)} instead, against the same bound"
                )
            else:
                values["rel_l2"] = distance / ref_norm
        return values, note

    def judge(self, values: Mapping[str, float]) -> bool:
        """The measured distance ``<= max`` and no non-finite mismatch."""
        return (
            values.get("rel_l2", 0.0) <= self.max and values.get("abs_l2", 0.0) <= self.max and _mismatch_free(values)
        )


class cosine(_Continuous):
    """The cosine similarity of the flattened outputs, ``<c, r> / (||c|| ||r||)``, is at least ``min``.

    Computed on the unit vectors ``c / ||c||`` and ``r / ||r||`` (no overflow in the dot product), and not
    clamped: rounding may report a value a few ulps above 1.

    A direction between zero vectors has no meaning. When either side is all zeros, the two L2 norms are
    measured instead (``cand_l2``, ``ref_l2``) and the note says so: both zero means the two outputs are
    equal, which passes; only one zero means the direction was lost, which fails.

    Values: ``cosine``, or ``cand_l2`` and ``ref_l2``; nothing when no pair is finite.
    """

    name = "cosine"
    bounds = ("min",)

    min: float

    @classmethod
    def _bound_problem(cls, bound: str, value: float) -> str | None:
        if not -1.0 <= value <= 1.0:
            return "must lie in [-1, 1]"
        return None

    def measure_pairs(self, pairs: Pairs, candidate: torch.Tensor, reference: torch.Tensor) -> _Measured:
        """The cosine of the angle between the two flattened outputs, or their norms when one is zero."""
        values: dict[str, float] = {}
        note = None
        if pairs.count:
            c_norm = float(torch.linalg.vector_norm(pairs.candidate).item())
            r_norm = float(torch.linalg.vector_norm(pairs.reference).item())
            if c_norm == 0.0 or r_norm == 0.0:
                values["cand_l2"] = c_norm
                values["ref_l2"] = r_norm
                if c_norm == 0.0 and r_norm == 0.0:
                    note = (
                        "candidate and reference are both all zeros: a direction between zero vectors "
                        "has no meaning; measured their L2 norms instead, both 0, so they are equal"
                    )
                else:
                    zero_side = "candidate" if c_norm == 0.0 else "reference"
                    note = (
                        f"{zero_side} is all zeros and the other side is not: the cosine has no meaning; "
                        "measured the two L2 norms instead, which differ, so it fails"
                    )
            else:
                unit_c = pairs.candidate / c_norm
                unit_r = pairs.reference / r_norm
                values["cosine"] = float(torch.dot(unit_c, unit_r).item())
        return values, note

    def judge(self, values: Mapping[str, float]) -> bool:
        """``cosine >= min`` (or both norms zero) and no non-finite mismatch."""
        if "cosine" in values:
            ok = values["cosine"] >= self.min
        elif "cand_l2" in values or "ref_l2" in values:
            ok = values.get("cand_l2", 0.0) == 0.0 and values.get("ref_l2", 0.0) == 0.0
        else:
            ok = True
        return ok and _mismatch_free(values)


# Floating formats and the signed integer type of the same width their bits are read as. A format
# without a sign bit (e8m0) is read as unsigned: its bit pattern is already ordered.
_SIGNED_BITS: dict[torch.dtype, torch.dtype] = {
    torch.float64: torch.int64,
    torch.float32: torch.int32,
    torch.float16: torch.int16,
    torch.bfloat16: torch.int16,
    torch.float8_e4m3fn: torch.int8,
    torch.float8_e5m2: torch.int8,
}
_UNSIGNED_BITS: dict[torch.dtype, torch.dtype] = {torch.float8_e8m0fnu: torch.uint8}


def ordered_bits(x: torch.Tensor) -> torch.Tensor:
    """The elements of a float tensor as int64 keys ordered like the values they encode.

    Sign-magnitude bit patterns are mapped to ``+magnitude`` or ``-magnitude`` (``magnitude`` being the
    bits without the sign), so adjacent representable values differ by 1, and ``-0.0`` and ``0.0`` both
    map to 0. Subnormals are ordinary steps in this order.
    """
    flat = x.detach().contiguous().reshape(-1)
    if x.dtype in _UNSIGNED_BITS:
        return flat.view(_UNSIGNED_BITS[x.dtype]).to(torch.int64)
    bits = flat.view(_SIGNED_BITS[x.dtype]).to(torch.int64)
    magnitude = bits & ((1 << (8 * x.element_size() - 1)) - 1)
    return torch.where(bits < 0, -magnitude, magnitude)


class ulp(_Continuous):
    """The largest distance in units in the last place, counted in the output's own dtype, is ``<= max``.

    The distance between two values is the number of representable values of the dtype (f64, f32, f16,
    bf16, and the fp8 formats) from one to the other, read off the integer-ordered bit patterns (see
    :func:`ordered_bits`): ``-0.0`` and ``0.0`` are 0 ulp apart, the smallest subnormal is 1 ulp from zero,
    and ``1.0`` and the next float up are 1 ulp apart. Distances beyond 2**53 (only reachable in f64) are
    reported rounded to float64.

    Values: ``max_ulp`` over the finite pairs (absent when there are none).
    """

    name = "ulp"
    bounds = ("max",)

    max: float

    def refusal(self, dtype: torch.dtype) -> str | None:
        """Also refuse float formats whose ulp is not defined here (only the listed formats are)."""
        base = super().refusal(dtype)
        if base is not None:
            return base
        if dtype not in _SIGNED_BITS and dtype not in _UNSIGNED_BITS:
            return f"ulp is not defined for {dtype_name(dtype)} outputs; use rel_l2 or allclose instead"
        return None

    def measure_pairs(self, pairs: Pairs, candidate: torch.Tensor, reference: torch.Tensor) -> _Measured:
        """The largest ulp distance over the finite pairs."""
        values: dict[str, float] = {}
        if pairs.count:
            device = compute_device(reference)
            finite = pairs.finite
            c = ordered_bits(candidate.to(device))[finite]
            r = ordered_bits(reference.to(device))[finite]
            same_sign = (c >= 0) == (r >= 0)
            # Same sign: the int64 difference is exact. Opposite signs: |c| + |r| can exceed int64 for f64,
            # so it is summed in float64.
            distance = torch.where(
                same_sign,
                (c - r).abs().to(torch.float64),
                c.abs().to(torch.float64) + r.abs().to(torch.float64),
            )
            values["max_ulp"] = float(distance.max().item())
        return values, None

    def judge(self, values: Mapping[str, float]) -> bool:
        """``max_ulp <= max`` and no non-finite mismatch."""
        return values.get("max_ulp", 0.0) <= self.max and _mismatch_free(values)


class equal(Predicate):
    """Exact equality, elementwise, in the output's own dtype (no conversion, so int64 stays exact).

    Value equality: ``-0.0`` equals ``0.0``; infinities of the same sign are equal. A NaN is a mismatch,
    unless ``equal_nan`` is given: then a NaN equals a NaN at the same position whatever its payload.
    Discrete: meaningful on every dtype, and the comparison to use on integer and boolean outputs.

    Values: ``mismatches`` (elements that differ). Passes iff there are none.
    """

    name = "equal"
    bounds = ()
    needs_reference = True
    discrete = True

    def measure(self, candidate: torch.Tensor, reference: torch.Tensor | None) -> tuple[dict[str, float], str | None]:
        """Count the elements that differ."""
        assert reference is not None
        device = compute_device(reference)
        c = candidate.detach().to(device).reshape(-1)
        r = reference.detach().reshape(-1)
        nonfinite, agreed = NonFinite.of(c, r, tuple(reference.shape), self.equal_nan)
        same = (c == r) | agreed
        note = "empty output: no elements, nothing measured" if c.numel() == 0 else nonfinite.note()
        # elements: the total under the reference implementation's name (read as values["elements"], not listed)
        return {"mismatches": float((~same).sum().item()), "elements": float(c.numel())}, note

    def judge(self, values: Mapping[str, float]) -> bool:
        """No element differs."""
        return values.get("mismatches", 0.0) == 0.0


class nan_inf(Predicate):
    """The candidate holds no NaN and no infinity. Judges the candidate alone (no reference needed).

    It is the way to assert finiteness alone, so it takes no ``equal_nan``.

    Values: ``nan`` and ``inf`` (counts; ``inf`` counts both signs). Integer and boolean outputs hold
    neither, and pass. Complex elements count when either part is non-finite.
    """

    name = "nan_inf"
    bounds = ()
    needs_reference = False
    discrete = True
    takes_equal_nan = False

    def measure(self, candidate: torch.Tensor, reference: torch.Tensor | None) -> tuple[dict[str, float], str | None]:
        """Count NaN and infinite elements of the candidate."""
        c = candidate.detach()
        if c.device.type == "mps":
            c = c.cpu()
        if not (c.is_floating_point() or c.is_complex()):
            return {"nan": 0.0, "inf": 0.0}, None
        return {
            "nan": float(torch.isnan(c).sum().item()),
            "inf": float(torch.isinf(c).sum().item()),
        }, None

    def judge(self, values: Mapping[str, float]) -> bool:
        """Neither NaN nor infinity was found."""
        return values.get("nan", 0.0) == 0.0 and values.get("inf", 0.0) == 0.0


PREDICATES: Mapping[str, type[Predicate]] = MappingProxyType(
    {cls.name: cls for cls in (allclose, rel_l2, cosine, equal, ulp, max_abs, max_rel, nan_inf)}
)
"""Every predicate class, by name."""

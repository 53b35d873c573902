"""Numerical comparison of a candidate against a reference under stated predicates (spec 1.6).

``check(candidate, reference, inputs, expect=...)`` runs both callables on the same inputs, flattens
their (nested tuple) results to paths ``"output"``, ``"output[0]"``, ``"output[1][0]"``..., and judges
each output tensor by the predicates ``expect`` lists for its path (``'*'`` for every output no other key
names), returning a :class:`Report` that prints as a table and converts to JSON. The predicates:

========== ============ ====================================================================
name       bounds       passes when
========== ============ ====================================================================
allclose   atol, rtol   every ``|c - r| <= atol + rtol * |r|``
rel_l2     max          ``||c - r|| / ||r|| <= max`` (``||c - r||`` when ``r`` is all zeros)
cosine     min          ``<c, r> / (||c|| ||r||) >= min`` (both all zeros passes)
ulp        max          distance in units in the last place of the output's dtype ``<= max``
max_abs    max          ``max |c - r| <= max``
max_rel    max          ``max |c - r| / |r| <= max`` (``|c - r|`` where ``r == 0``)
equal      -            every element equal (``-0.0 == 0.0``); for integers/bools
nan_inf    -            the candidate holds no NaN/Inf; needs no reference
========== ============ ====================================================================

NaN and Inf, for every predicate but ``nan_inf``: a NaN on either side fails, unless the predicate is
given ``equal_nan`` (``allclose(atol=1e-3, rtol=1e-3, equal_nan=True)``, in text
``allclose:atol=1e-3,rtol=1e-3,equal_nan``), which counts NaNs at the same positions on both sides as
equal; an Inf of the same sign at the same position on both sides counts as equal (as
``torch.testing.assert_close``), any other Inf fails. The note says how many non-finite elements there
were. ``nan_inf`` is the way to assert finiteness alone.

Continuous measures run in float64 over the pairs finite on both sides. Refusals raise
:class:`CheckError` (a ``ValueError``) or ``TypeError`` for arguments of the wrong kind.
"""

from .check import check
from .dtypes import dtype_name
from .errors import CheckError, ResultMismatchError
from .parse import parse_predicate
from .predicate import Predicate, PredicateResult
from .predicates import (
    PREDICATES,
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
from .report import OutputCheck, Report

# The predicate classes under their CamelCase spellings too (the same classes), as model sources import them.
AllClose = allclose
RelL2 = rel_l2
Cosine = cosine
Equal = equal
Ulp = ulp
MaxAbs = max_abs
MaxRel = max_rel
NanInf = nan_inf

__all__ = [
    "PREDICATES",
    "AllClose",
    "Cosine",
    "Equal",
    "MaxAbs",
    "MaxRel",
    "NanInf",
    "RelL2",
    "Ulp",
    "CheckError",
    "OutputCheck",
    "Predicate",
    "PredicateResult",
    "Report",
    "ResultMismatchError",
    "allclose",
    "check",
    "cosine",
    "dtype_name",
    "equal",
    "max_abs",
    "max_rel",
    "nan_inf",
    "ordered_bits",
    "parse_predicate",
    "rel_l2",
    "ulp",
]

"""The exception raised when ``check`` refuses a comparison it was asked to make."""

from __future__ import annotations

__all__ = ["CheckError", "ResultMismatchError"]


class CheckError(ValueError):
    """``check`` refused the comparison: the request itself breaks the contract of spec section 1.6.

    Raised, for example, when the candidate's result differs from the reference's in structure, shape or
    dtype, when an output has no predicates or ``expect`` names a path that was not produced, when a result
    holds no tensor at all, when a predicate that needs a reference is asked for without one, or when a
    continuous measure is asked of an integer or boolean output. The message names the output path and
    the way out. Arguments of the wrong kind (a non-tensor leaf, a non-callable) raise :class:`TypeError`
    instead.
    """


class ResultMismatchError(CheckError):
    """The candidate's result differs from the reference's in structure, shape or dtype at a path.

    Unlike the other refusals, this one says the candidate is wrong rather than the request: a caller
    judging a candidate (``tilefoundry check``) reports it as the candidate's failure.
    """

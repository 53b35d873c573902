"""``check``: run a candidate and a reference on the same inputs and judge each output (spec 1.6)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from .dtypes import dtype_name, is_discrete_dtype
from .errors import CheckError, ResultMismatchError
from .flatten import clone_leaves, first_structure_difference, flatten
from .pairs import compute_device
from .predicate import Predicate
from .predicates import equal
from .report import OutputCheck, Report

__all__ = ["WILDCARD", "check", "wildcard_predicates"]

WILDCARD = "*"
"""The ``expect`` key whose predicates cover every output the other keys do not name (as ``--expect '*=...'``)."""


def check(
    candidate: Callable[..., Any],
    reference: Callable[..., Any] | None,
    inputs: Any,
    *,
    expect: Mapping[str, Sequence[Predicate]],
) -> Report:
    """Run ``candidate(*inputs)`` (and ``reference(*inputs)``) and judge every output by ``expect``.

    Args:
        candidate: anything callable on the inputs: a runtime twin's bound method, a torch callable, an
            evaluator closure.
        reference: the callable the candidate is judged against, or None to judge the candidate alone
            (then only predicates with ``needs_reference`` False, i.e. ``nan_inf``, are admitted). No
            default: a caller states which.
        inputs: the positional arguments, a tuple; each argument a tensor or a nested tuple of tensors.
            A bare tensor stands for a single argument. Each callable runs on its own clone of the inputs,
            so neither sees the other's in-place writes and the caller's tensors are left untouched.
        expect: output path -> the predicates for that output (a non-empty sequence). Paths are those of
            the flattened result: ``"output"`` for a bare tensor, ``"output[0]"``, ``"output[1][0]"``...
            for nested tuples. The key ``'*'`` covers every output no other key names; on an integer or
            boolean output a continuous predicate under ``'*'`` becomes ``equal()``, the only comparison
            meaningful there (as ``tilefoundry check --expect '*=PRED'``). No default.

    Returns:
        A :class:`Report` with one :class:`OutputCheck` per output tensor, in result order. The callables
        run under ``torch.no_grad()``.

    Raises:
        TypeError: a callable is not callable; ``expect`` is not a mapping of path -> sequence of
            Predicate instances; an input or result leaf is not a tensor (the message names its path).
        CheckError: the request breaks the contract (a ``ValueError``): a predicate needing a reference
            without one; a result holding no tensor; candidate and reference differing in structure,
            shape or dtype at a path (:class:`ResultMismatchError`, a subclass); an output without
            predicates; a path in ``expect`` that was not produced; a continuous predicate on an
            integer/boolean output (use ``equal()``), or a predicate that cannot judge the output's dtype.
    """
    if not callable(candidate):
        raise TypeError(f"candidate must be callable, got {type(candidate).__name__}")
    if reference is not None and not callable(reference):
        raise TypeError(
            f"reference must be callable or None (to judge the candidate alone), got {type(reference).__name__}"
        )
    predicates = _validated_expect(expect)
    if reference is None:
        _refuse_reference_predicates(predicates)
    arguments = _validated_inputs(inputs)

    with torch.no_grad():
        produced = candidate(*clone_leaves(arguments))
        candidate_leaves = _flatten_result(produced, "candidate")
        if reference is None:
            reference_leaves = None
        else:
            expected = reference(*clone_leaves(arguments))
            reference_leaves = _flatten_result(expected, "reference")
            _refuse_structure_difference(produced, expected, candidate_leaves, reference_leaves)

    paths = [path for path, _ in candidate_leaves]
    predicates = _expand_wildcard(predicates, candidate_leaves)
    _refuse_unmatched_paths(paths, predicates)

    for path, tensor in candidate_leaves:
        for predicate in predicates[path]:
            problem = predicate.refusal(tensor.dtype)
            if problem is not None:
                raise CheckError(f"{path} ({dtype_name(tensor.dtype)}): {problem}")

    outputs = []
    for k, (path, tensor) in enumerate(candidate_leaves):
        ref = None if reference_leaves is None else reference_leaves[k][1]
        outputs.append(
            OutputCheck(
                path=path,
                shape=tuple(tensor.shape),
                dtype=dtype_name(tensor.dtype),
                ref_norm=None if ref is None else _finite_norm(ref),
                results=tuple(p.evaluate(tensor, ref) for p in predicates[path]),
            )
        )
    return Report(tuple(outputs))


def _validated_expect(expect: Any) -> dict[str, tuple[Predicate, ...]]:
    if not isinstance(expect, Mapping):
        raise TypeError(
            "expect must map each output path to its predicates, e.g. "
            f"{{'output': [rel_l2(max=1e-2)]}}, got {type(expect).__name__}"
        )
    checked: dict[str, tuple[Predicate, ...]] = {}
    for path, listed in expect.items():
        if not isinstance(path, str):
            raise TypeError(f"expect keys are output paths (str) such as 'output[0]', got {path!r}")
        if isinstance(listed, Predicate):
            raise TypeError(f"expect[{path!r}] is a single predicate; wrap it in a list: [{listed!r}]")
        if isinstance(listed, (str, bytes)) or not isinstance(listed, Sequence):
            raise TypeError(
                f"expect[{path!r}] must be a sequence of Predicate instances, got {type(listed).__name__}"
                + (" (build one from text with parse_predicate)" if isinstance(listed, str) else "")
            )
        if not listed:
            raise CheckError(
                f"expect[{path!r}] is empty; every output needs at least one predicate, "
                "e.g. [rel_l2(max=1e-2)] or [equal()]"
            )
        for item in listed:
            if isinstance(item, type) and issubclass(item, Predicate):
                raise TypeError(
                    f"expect[{path!r}] lists the class {item.__name__}; pass an instance with its bounds, "
                    f"e.g. {item.signature()}"
                )
            if not isinstance(item, Predicate):
                hint = " (build one from text with parse_predicate)" if isinstance(item, str) else ""
                raise TypeError(f"expect[{path!r}] holds {item!r}, which is not a Predicate instance{hint}")
        checked[path] = tuple(listed)
    return checked


def wildcard_predicates(predicates: Sequence[Predicate], dtype: torch.dtype) -> list[Predicate]:
    """The predicates ``'*'`` gives an output of ``dtype``: as they are, but on an integer or boolean output each
    continuous one becomes ``equal()`` (once), the only comparison meaningful there."""
    if not is_discrete_dtype(dtype):
        return list(predicates)
    out: list[Predicate] = []
    for p in predicates:
        chosen = p if p.discrete else equal()
        if chosen not in out:
            out.append(chosen)
    return out


def _expand_wildcard(predicates: dict[str, tuple[Predicate, ...]],
                     leaves: list[tuple[str, torch.Tensor]]) -> dict[str, tuple[Predicate, ...]]:
    """``predicates`` with the ``'*'`` entry replaced by one entry per produced path no other key names."""
    wildcard = predicates.get(WILDCARD)
    if wildcard is None:
        return predicates
    out = {path: listed for path, listed in predicates.items() if path != WILDCARD}
    for path, tensor in leaves:
        if path not in out:
            out[path] = tuple(wildcard_predicates(wildcard, tensor.dtype))
    return out


def _refuse_reference_predicates(predicates: Mapping[str, tuple[Predicate, ...]]) -> None:
    for path, listed in predicates.items():
        for predicate in listed:
            if predicate.needs_reference:
                raise CheckError(
                    f"expect[{path!r}] asks for {predicate.name}, which compares against a reference, but "
                    "reference is None; pass a reference callable, or keep only predicates that judge the "
                    "candidate alone (nan_inf)"
                )


def _validated_inputs(inputs: Any) -> tuple[Any, ...]:
    if isinstance(inputs, torch.Tensor):
        arguments: tuple[Any, ...] = (inputs,)
    elif isinstance(inputs, tuple):
        arguments = inputs
    else:
        raise TypeError(f"inputs must be a tuple of arguments (or one bare tensor), got {type(inputs).__name__}")
    for i, argument in enumerate(arguments):
        flatten(argument, f"inputs[{i}]")  # raises TypeError naming a non-tensor leaf
    return arguments


def _flatten_result(result: Any, side: str) -> list[tuple[str, torch.Tensor]]:
    try:
        leaves = flatten(result, "output")
    except TypeError as error:
        raise TypeError(f"{side} result: {error}") from None
    if not leaves:
        raise CheckError(
            f"the {side} result holds no tensor ({result!r}); there is nothing to check, which is an error "
            "rather than a pass: return the tensors to compare"
        )
    return leaves


def _refuse_structure_difference(
    produced: Any,
    expected: Any,
    candidate_leaves: list[tuple[str, torch.Tensor]],
    reference_leaves: list[tuple[str, torch.Tensor]],
) -> None:
    difference = first_structure_difference(produced, expected, "output")
    if difference is not None:
        path, on_candidate, on_reference = difference
        raise ResultMismatchError(
            f"{path}: the candidate's result has a different structure from the reference's: candidate "
            f"returns {on_candidate}, reference returns {on_reference}; make the candidate return the same "
            "nesting of tuples as the reference"
        )
    for (path, c), (_, r) in zip(candidate_leaves, reference_leaves, strict=True):
        if c.shape != r.shape:
            raise ResultMismatchError(
                f"{path}: shape differs: candidate {tuple(c.shape)}, reference {tuple(r.shape)}; the "
                "candidate must produce the reference's shape"
            )
        if c.dtype != r.dtype:
            raise ResultMismatchError(
                f"{path}: dtype differs: candidate {dtype_name(c.dtype)}, reference {dtype_name(r.dtype)}; "
                "the candidate must produce the reference's dtype (cast inside the candidate if needed)"
            )


def _refuse_unmatched_paths(paths: list[str], predicates: Mapping[str, tuple[Predicate, ...]]) -> None:
    produced = ", ".join(paths)
    missing = [p for p in paths if p not in predicates]
    if missing:
        raise CheckError(
            f"{', '.join(missing)} {'has' if len(missing) == 1 else 'have'} no predicates; every produced "
            f"tensor needs exactly one non-empty list, e.g. expect[{missing[0]!r}] = [rel_l2(max=1e-2)], or "
            f"expect['*'] for every output no other key names (produced: {produced})"
        )
    unknown = [p for p in predicates if p not in paths]
    if unknown:
        raise CheckError(
            f"expect names {', '.join(repr(p) for p in unknown)}, which the result did not produce; "
            f"produced: {produced}"
        )


def _finite_norm(reference: torch.Tensor) -> float:
    tensor = reference.detach().to(compute_device(reference))
    if tensor.is_complex():
        tensor = torch.view_as_real(tensor)
    values = tensor.to(torch.float64).reshape(-1)
    return float(torch.linalg.vector_norm(values[torch.isfinite(values)]).item())

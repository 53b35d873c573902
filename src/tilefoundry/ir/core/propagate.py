"""Placement survives typing: the layout and storage an op's result takes from its operands.

A type rule computes a result's shape and dtype; this decides where the result lives, for every op, in
one place: an elementwise op's result is placed like its operands of the result's shape (operands that
disagree are refused: reshard one of them), a reduction's result like its operand with the reduced
axes gone (a mesh axis that split one becomes a broadcast), a normalisation or softmax like its input,
an op that rearranges axes keeps its operand's storage only. A result that already carries a placement
(a reshard's, a cache's) keeps it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..types.dim import dims_equal
from ..types.storage import Storage
from ..types.tensor_type import TensorType
from .errors import OpTypeError

Rule = Callable[[tuple[TensorType, ...], dict[str, Any], TensorType, int], TensorType]


def _placed(t: TensorType) -> bool:
    return t.layout is not None or t.storage is not Storage.gmem


def _same_shape(a: TensorType, b: TensorType) -> bool:
    return a.rank == b.rank and all(dims_equal(x, y) for x, y in zip(a.shape, b.shape))


def _elementwise(types: tuple[TensorType, ...], attrs: dict[str, Any], result: TensorType, index: int) -> TensorType:
    donors = [t for t in types if t.rank and _placed(t) and _same_shape(t, result)]
    if not donors:
        return result
    first = donors[0]
    for t in donors[1:]:
        if (t.layout, t.storage) != (first.layout, first.storage):
            raise OpTypeError(f"operands are placed differently ({first} and {t}); reshard one of them to the "
                              "other's layout and storage")
    return result.with_(layout=first.layout, storage=first.storage)


def _like_first(types: tuple[TensorType, ...], attrs: dict[str, Any], result: TensorType, index: int) -> TensorType:
    src = types[min(index, len(types) - 1)]
    if not _placed(src) or not _same_shape(src, result):
        return result
    return result.with_(layout=src.layout, storage=src.storage)


def _reduce(types: tuple[TensorType, ...], attrs: dict[str, Any], result: TensorType, index: int) -> TensorType:
    (x,) = types
    layout = x.layout.reduce(attrs["axes"], attrs["keepdim"]) if x.layout is not None else None
    return result.with_(layout=layout, storage=x.storage)


def _storage_only(types: tuple[TensorType, ...], attrs: dict[str, Any], result: TensorType, index: int) -> TensorType:
    return result.with_(storage=types[0].storage) if types else result


def _unplaced(types: tuple[TensorType, ...], attrs: dict[str, Any], result: TensorType, index: int) -> TensorType:
    return result


_BY_OP: dict[str, Rule] = {
    "constant": _unplaced, "matmul": _unplaced, "arange": _unplaced, "zeros": _unplaced,
    "reduce": _reduce, "softmax": _like_first, "rms_norm": _like_first, "layer_norm": _like_first,
    "rope": _like_first, "full_like": _like_first, "cast": _like_first,
    "argmax": _storage_only, "topk": _storage_only,
}
_BY_FAMILY: dict[str, Rule] = {"math": _elementwise, "tensor": _storage_only, "nn": _like_first}


def place_result(op: str, family: str, types: tuple[TensorType, ...], attrs: dict[str, Any],
                 result: TensorType | tuple[TensorType, ...]) -> TensorType | tuple[TensorType, ...]:
    """``result`` with the layout and storage ``op`` gives it (a type rule's own placement is kept)."""
    rule = _BY_OP.get(op) or _BY_FAMILY.get(family)
    if rule is None:
        return result
    if isinstance(result, tuple):
        return tuple(r if _placed(r) else rule(types, attrs, r, i) for i, r in enumerate(result))
    return result if _placed(result) else rule(types, attrs, result, 0)

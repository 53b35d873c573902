"""The op registry: one entry per HIR op, holding its name, family and type rule."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..types.tensor_type import TensorType
from .attrs import AttrSchema

TypeRule = Callable[[tuple[TensorType, ...], dict[str, Any]], "TensorType | tuple[TensorType, ...]"]


@dataclass(frozen=True)
class OpDef:
    """A HIR op: its name, its family (math, tensor, nn, ...), the rule typing its result and the schema of
    its attributes (ir/ops/schemas.py)."""

    name: str
    family: str
    infer: TypeRule
    schema: AttrSchema | None = None


OPS: dict[str, OpDef] = {}


def register_op(name: str, family: str) -> Callable[[TypeRule], TypeRule]:
    """Register ``infer`` as the type rule of op ``name``; each name is registered once."""

    def deco(infer: TypeRule) -> TypeRule:
        if name in OPS:
            raise ValueError(f"op {name!r} is registered twice")
        OPS[name] = OpDef(name, family, infer)
        return infer

    return deco


def op_def(name: str) -> OpDef:
    """The registered op ``name``; KeyError lists the known ops."""
    _ensure_loaded()
    if name not in OPS:
        raise KeyError(f"unknown HIR op {name!r}; known ops: {', '.join(sorted(OPS))}")
    return OPS[name]


def attach_schemas(schemas: dict[str, AttrSchema]) -> None:
    """Give every registered op its attribute schema; an op without one is a definition error."""
    missing = sorted(set(OPS) - set(schemas))
    if missing:
        raise ValueError(f"ops without an attribute schema (ir/ops/schemas.py): {', '.join(missing)}")
    for name, op in list(OPS.items()):
        OPS[name] = OpDef(op.name, op.family, op.infer, schemas[name])


def _ensure_loaded() -> None:
    from .. import ops  # noqa: F401 - importing registers every op family

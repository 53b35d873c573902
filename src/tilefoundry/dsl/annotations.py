"""``Tensor[...]`` and ``ConstTensor[...]``: parameter annotations of ``@func`` kernels."""

from __future__ import annotations

from ..ir.core.annotation import TensorSpec, parse_spec


class Tensor:
    """An activation parameter: ``x: Tensor[(seq, 64), "bf16"]`` (dims are ints or DimVars)."""

    def __class_getitem__(cls, item: object) -> TensorSpec:
        return parse_spec(item, const=False)


class ConstTensor:
    """A weight parameter, filled from a checkpoint: ``w: ConstTensor[(64,), "bf16"]``."""

    def __class_getitem__(cls, item: object) -> TensorSpec:
        return parse_spec(item, const=True)

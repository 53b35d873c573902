"""What ``Tensor[...]`` / ``ConstTensor[...]`` annotations evaluate to."""

from __future__ import annotations

from dataclasses import dataclass

from ..types.shard import ShardLayout, has_splits
from ..types.tensor_type import TensorType
from .source import user_source


@dataclass(frozen=True)
class TensorSpec:
    """A parameter annotation: its tensor type, and whether it is a weight (ConstTensor)."""

    type: TensorType
    const: bool

    def __repr__(self) -> str:
        kind = "ConstTensor" if self.const else "Tensor"
        return f"{kind}{str(self.type)[len('Tensor'):]}"


def parse_spec(item: object, const: bool) -> TensorSpec:
    """Parse the subscript of ``Tensor[(dims...), "dtype"]`` (an optional storage may follow)."""
    kind = "ConstTensor" if const else "Tensor"
    if not isinstance(item, tuple) or len(item) not in (2, 3):
        raise TypeError(f'{kind}[...] takes (shape, dtype) or (shape, dtype, storage), e.g. {kind}[(4, 8), "bf16"]')
    shape, dtype = item[0], item[1]
    if isinstance(shape, int) or not isinstance(shape, (tuple, list)):
        shape = (shape,)
    storage = item[2] if len(item) == 3 else "gmem"
    try:
        layout = None
        if has_splits(tuple(shape)):
            shape, layout = ShardLayout.from_shape(tuple(shape))
        return TensorSpec(TensorType(tuple(shape), dtype, layout=layout, storage=storage), const)
    except (TypeError, ValueError) as e:
        loc = user_source()
        where = f"{loc}: " if loc is not None else ""
        raise type(e)(f"{where}{kind}[...]: {e}") from None

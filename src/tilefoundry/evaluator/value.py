"""The evaluator's values are torch tensors: how an IR element type maps onto a torch dtype."""

from __future__ import annotations

import torch

from ..ir.types.dtype import DType, dtype_of


def to_torch_dtype(dtype: DType | str | torch.dtype) -> torch.dtype:
    """The torch dtype the evaluator holds values of ``dtype`` in.

    ``dtype`` is a :class:`DType`, a dtype name (``"bf16"``) or already a torch dtype; an unknown
    spelling raises TypeError listing the valid names.
    """
    return dtype_of(dtype).torch_dtype


__all__ = ["to_torch_dtype"]

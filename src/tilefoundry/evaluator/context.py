"""What a running function sees besides its arguments: DimVar bindings, device, the reading."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from ..ir.types.dim import Dim, evaluate_dim


class Reading(Protocol):
    """The weights of one Module node (a LoadedModule satisfies this)."""

    @property
    def constants(self) -> Mapping[str, torch.Tensor]: ...

    def _child_reading(self, name: str) -> Reading: ...


@dataclass
class EvalContext:
    """Per-call state of the evaluator."""

    device: torch.device
    bindings: dict[str, int] = field(default_factory=dict)
    reading: Any = None  # Reading | None: supplies child weights for call_module nodes and variants' weights
    path: str = ""  # the dotted module path of ``reading``, for messages

    def dim(self, d: Dim) -> int:
        """The integer extent of a (possibly symbolic) dim under this call's bindings."""
        return evaluate_dim(d, self.bindings)

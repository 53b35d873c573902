"""A tensor map: the descriptor through which a Hopper GPU's copy engine (TMA) reads a parameter's rows.

A matmul's GEMM schedule reads its operands' tiles through the copy engine (``cuda/ops/matmul_gmma.cuh``). The
engine needs a descriptor of the memory it reads, which only the host can make: the host entry builds one per
``TensorMap`` of a kernel's calls (``ops::make_tensor_map``, ``cuda/tensor_map.cuh``) over the parameter's
pointer, and passes it to the kernel as a ``__grid_constant__`` argument, which the call then takes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.types.dim import Dim


@dataclass(frozen=True)
class TensorMap:
    """The map ``name`` of parameter ``param``'s memory from element ``offset`` on: ``rows`` rows of ``depth``
    elements (contiguous), ``stride`` elements apart, read a box of ``box_rows`` x ``box_depth`` at a time."""

    name: str
    param: str
    offset: Dim
    rows: Dim
    depth: Dim
    stride: Dim
    box_rows: int
    box_depth: int

    def __str__(self) -> str:
        at = "" if self.offset == 0 else f" at {self.offset}"
        return (f"{self.name} = map %{self.param}[{self.rows}, {self.depth}]:({self.stride}, 1){at} "
                f"box {self.box_rows}x{self.box_depth}")

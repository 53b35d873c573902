"""An entry's parameters: the function's own (weights included), then one per output; and where each
DimVar is read from."""

from __future__ import annotations

from ..ir.types.dim import DimVar
from ..ir.types.tensor_type import TensorType
from ..tir.function import DimBinding, KernelParam
from .errors import LoweringError
from .program import Program


def output_params(prog: Program) -> tuple[KernelParam, ...]:
    """``out`` (one output) or ``out0``, ``out1``, ... (several): whole tensors in gmem, named apart from
    the function's parameters."""
    taken = {p.name for p in prog.params}
    n = len(prog.outputs)
    params = []
    for i, v in enumerate(prog.outputs):
        name = "out" if n == 1 else f"out{i}"
        while name in taken:
            name += "_"
        taken.add(name)
        params.append(KernelParam(name, TensorType(v.type.shape, v.type.dtype), True))
    return tuple(params)


def bind_dimvars(prog: Program, params: tuple[KernelParam, ...]) -> tuple[DimBinding, ...]:
    """Each DimVar's binding: its first axis declared exactly as it, inputs first.

    A DimVar met only inside an expression (``2*n``), or only in an output's shape, cannot be read from
    the inputs; both are refused.
    """
    found: dict[str, DimBinding] = {}
    mentioned: dict[str, str] = {}
    for p in params:
        for axis, d in enumerate(p.type.shape):
            if isinstance(d, DimVar):
                if d.name not in found and not p.is_output:
                    found[d.name] = DimBinding(d, p.name, axis)
            elif not isinstance(d, int):
                for dv in d.dimvars():
                    mentioned.setdefault(dv.name, p.name)
            if isinstance(d, DimVar):
                mentioned.setdefault(d.name, p.name)
    for name, where in mentioned.items():
        if name not in found:
            raise LoweringError(
                "signature", prog.name, f"DimVar {name} (in {where}) is not the whole extent of any input axis, so "
                "a call cannot read it from its inputs; give some input an axis declared exactly as it",
                prog.function.loc)
    return tuple(found.values())

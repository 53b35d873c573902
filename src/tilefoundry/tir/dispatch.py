"""A dispatching function's entry: the variant a call runs, picked by one DimVar's extent.

A ``@func`` whose body is ``pass`` and whose variants (``@f.specialize(DimVarRangePat(dv, lo, hi))``) each serve a
range of one DimVar's extents compiles into one PrimFunction per variant and a :class:`Dispatch`: an entry of the
function's own name that reads the DimVar from its argument (checked against the DimVar's whole range), then calls
the entry of the variant whose range holds it, over its own parameters, which the variant checks. The lowering
makes such variants by itself too, of a function whose matmuls' schedule depends on their row count
(lower/dispatch.py ``row_variants``).
"""

from __future__ import annotations

from dataclasses import dataclass

from .function import DimBinding, EntryParams, KernelParam


@dataclass(frozen=True)
class DispatchCase:
    """The variant entry ``function`` serves extents in ``[lo, hi)``; ``args`` names the dispatch's parameter each of
    its parameters takes, in its order."""

    lo: int
    hi: int
    function: str
    args: tuple[str, ...]


@dataclass(frozen=True)
class Dispatch(EntryParams):
    """The entry ``name`` over ``params`` (the activations, every variant's weights, then ``output_count``
    outputs), dispatching on ``binding``'s DimVar to ``cases`` (disjoint ranges, in order)."""

    name: str
    params: tuple[KernelParam, ...]
    output_count: int
    binding: DimBinding
    cases: tuple[DispatchCase, ...]

    def __str__(self) -> str:
        ins = ", ".join(str(p) for p in self.inputs)
        outs = ", ".join(str(p) for p in self.outputs)
        lines = [f"dispatch {self.name}({ins}) -> ({outs})", f"  dimvar {self.binding}"]
        d = self.binding.dimvar.name
        lines += [f"  {c.lo} <= {d} < {c.hi}: {c.function}({', '.join(c.args)})" for c in self.cases]
        return "\n".join(lines)

"""Which inputs a function may take as its output too (the caller passing one tensor as both, updated in place).

An output computed element by element from an input of its own shape, in the input's own layout, may be that
input: each element is read (into registers, with every other operand of its ops) by the thread that then writes
the result's element, and no other element reads it. That holds for a stage of elementwise ops only (no reduction
along a row, no view) with a single output, where no op outside the stage reads the input and the function does
not return it. The entry then checks ``same_or_disjoint`` for the pair instead of ``disjoint``. A matmul's epilogue
follows the same rule for the residual it adds (``staged.py``, ``read_in_place``). ConstTensor weights are never
updated in place.
"""

from __future__ import annotations

from .opmap import ELEMENTWISE_OPS
from .program import Op, Program, Val

# What such a stage may hold: elementwise ops, and the scalar constants they take.
_ELEMENTWISE = ELEMENTWISE_OPS | {"constant"}


def elementwise_only(ops: list[Op], outputs: tuple[Val, ...] | list[Val]) -> bool:
    """Whether ``ops`` are elementwise ops only, writing one output: the stages whose inputs may be updated in
    place."""
    return len(outputs) == 1 and all(o.op in _ELEMENTWISE for o in ops)


def rows_aliases(prog: Program, output: str) -> tuple[tuple[str, str], ...]:
    """The (output, input) pairs of a function lowered whole as one row-wise kernel (every parameter read as it
    lies, contiguous), whose output parameter is named ``output``."""
    if not elementwise_only(prog.ops, prog.outputs):
        return ()
    out = prog.outputs[0]
    weights = {p.name for p in prog.function.params if p.const}
    returned = {id(v) for v in prog.outputs}
    inputs = {id(v): v for o in prog.ops for v in o.inputs if v.param}
    return tuple((output, v.param) for v in inputs.values()
                 if v.param not in weights and id(v) not in returned and v.type.same_as(out.type))

"""A dispatching ``@func`` (body ``pass``, variants by ``specialize``) lowered: each variant a PrimFunction of its
own, named ``<function>_<variant>``, and a :class:`~tilefoundry.tir.dispatch.Dispatch` entry of the function's name
that picks the variant from the DimVar's extent (tir/dispatch.py). The variants partition the DimVar's range
(``check_partition``) and return the same types (the DimVar named back as the base's), so one entry serves every
extent, and a CUDA graph captured at one extent replays that variant.

``row_variants`` makes such variants of a function written once, where the schedule of its matmuls depends on
their row count: on a Hopper GPU a matmul of 16-bit operands whose rows are an activation's DimVar that may be 16
or fewer (a decode step: the GEMV schedule) and 17 or more (a prompt: the GEMM schedule on the tensor cores,
lower/matmul.py) is lowered twice, the DimVar narrowed to ``[lo, 17)`` (``few_rows``) and to ``[17, hi)``
(``many_rows``), and the entry picks one from the extent, as a user's ``specialize`` would.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

from ..ir.core.dispatch import DimVarRangePat, check_partition
from ..ir.core.function import Function, substituted
from ..ir.types.dim import DimVar
from ..ir.types.tensor_type import TensorType
from ..target import Target
from ..tir.dispatch import Dispatch, DispatchCase
from ..tir.function import DimBinding, KernelParam, PrimFunc
from .errors import LoweringError
from .gemm import CUDA_GEMM_MIN_ROWS, gemm_operands, gemm_target
from .meshwise import is_placed
from .program import flatten_function


def lower_dispatch(fn: Function, lower_one: Callable[[Function], PrimFunc],
                   taken: set[str]) -> tuple[Dispatch, dict[str, PrimFunc]]:
    """The Dispatch of ``fn`` and its variants' PrimFunctions by name (``lower_one(variant)`` lowers one; names in
    ``taken`` are avoided)."""
    check_partition(fn)
    variants = sorted(fn.variants, key=lambda v: v.pattern.lo)
    dv: DimVar = variants[0].pattern.dim_var
    binding = _binding(fn, dv)
    lowered: dict[str, PrimFunc] = {}
    cases = []
    outputs: tuple[KernelParam, ...] | None = None
    first = ""
    weights: dict[str, KernelParam] = {p.name: KernelParam(p.name, p.type, False) for p in fn.params}
    for v in variants:
        name = f"{fn.name}_{v.name}"
        while name in taken or name in lowered:
            name += "_"
        own = copy.copy(v)  # lowered under its entry's name, which names its kernels apart from other functions'
        own.name = name
        pf = lower_one(own)
        lowered[name] = pf
        back = {v.pattern.narrowed(): dv}
        outs = tuple(KernelParam(p.name, _named_back(p.type, back), True) for p in pf.outputs)
        if outputs is None:
            outputs, first = outs, v.name
        elif [(p.name, p.type) for p in outs] != [(p.name, p.type) for p in outputs]:
            raise LoweringError("dispatch", fn.name, f"its variant {v.name} returns "
                                f"({', '.join(str(p.type) for p in outs)}), its variant {first} returns "
                                f"({', '.join(str(p.type) for p in outputs)}); one entry serves both only where the "
                                "variants return the same types", v.loc)
        for p in pf.inputs:
            mine = KernelParam(p.name, _named_back(p.type, back), False)
            have = weights.setdefault(p.name, mine)
            if have.type != mine.type:
                raise LoweringError("dispatch", fn.name, f"its variant {v.name} takes {p.name} as {mine.type}, "
                                    f"another part of it as {have.type}; give the parameter one type", v.loc)
        cases.append(DispatchCase(v.pattern.lo, v.pattern.hi, name, tuple(p.name for p in pf.params)))
    assert outputs is not None
    params = (*weights.values(), *outputs)
    return Dispatch(fn.name, params, len(outputs), binding, tuple(cases)), lowered


def _named_back(t: TensorType, back: dict[DimVar, DimVar]) -> TensorType:
    """``t`` with a variant's narrowed DimVar named back as the base's, as the caller sees it."""
    return TensorType(substituted(t, back).shape, t.dtype)


def _binding(fn: Function, dv: DimVar) -> DimBinding:
    """Where the entry reads ``dv``: the first activation axis declared exactly as it."""
    for p in fn.activations:
        for axis, d in enumerate(p.type.shape):
            if isinstance(d, DimVar) and d == dv:
                return DimBinding(dv, p.name, axis)
    raise LoweringError("dispatch", fn.name, f"it dispatches on {dv.name}, which no activation declares as an axis of "
                        "its own; a call dispatches on the extent an activation binds", fn.loc)


def row_variants(fn: Function, target: Target) -> Function | None:
    """``fn`` as a function dispatching to two variants of its own body by a matmul's row count (module
    docstring), or None where no matmul's schedule depends on it: the first matmul ``gemm_operands`` takes whose
    rows are an activation's DimVar spanning both sides of CUDA_GEMM_MIN_ROWS decides the DimVar."""
    axes = {d for p in fn.activations for d in p.type.shape if isinstance(d, DimVar)}
    if not axes or not gemm_target(target):
        return None
    prog = flatten_function(fn)
    if is_placed(prog):  # a function placing its values itself is lowered as written (meshwise.py)
        return None
    rows = (op.inputs[0].type.shape[-2] for op in prog.ops
            if gemm_operands(op, target) and op.inputs[0].type.rank >= 2)
    dv = next((d for d in rows if isinstance(d, DimVar) and d in axes and d.lo < CUDA_GEMM_MIN_ROWS < d.hi), None)
    if dv is None:
        return None
    base = copy.copy(fn)
    base.variants = []
    for name, lo, hi in (("few_rows", dv.lo, CUDA_GEMM_MIN_ROWS), ("many_rows", CUDA_GEMM_MIN_ROWS, dv.hi)):
        variant = copy.copy(fn)  # the body traced once (it may name the DimVar itself, as the families' do) ...
        variant.name, variant.pattern, variant.base, variant.variants = name, DimVarRangePat(dv, lo, hi), base, []
        variant.narrowing = {dv: variant.pattern.narrowed()}  # ... and lowered with the DimVar narrowed
        base.variants.append(variant)
    return base

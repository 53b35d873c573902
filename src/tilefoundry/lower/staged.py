"""The TIR of a staged function: one kernel per stage (``stages.py``), the values between them homed.

Every value a stage writes for a later stage or for the caller has a *home*: the caller's output it is
returned as (when the function returns it once, through a contiguous view), else a temporary the entry
allocates. Each stage is lowered on its own, a row-wise stage by the row-wise lowering, a matmul stage by
``matmul.py``, and bound to the homes of what it reads and writes.
"""

from __future__ import annotations

from ..ir.types.dim import dimvars_of
from ..ir.types.tensor_type import TensorType
from ..target import Target
from ..tir.function import DimBinding, KernelParam, PrimFunc, Schedule, StageCall
from ..tir.stmt import Stmt
from .errors import LoweringError
from .matmul import matmul_body
from .params import bind_dimvars, output_params
from .program import Op, Program, Val
from .rope import rope_bodies
from .rowwise import lower_rows
from .schedule import Declared
from .stages import StagedProgram, split_stages, sub_program
from .views import View


def lower_staged(prog: Program, target: Target, declared: Declared) -> PrimFunc:
    """The PrimFunction of ``prog`` run as stages (see the module docstring)."""
    staged = split_stages(prog)
    outs = output_params(prog)
    homes: dict[int, str] = {id(p): p.name for p in prog.params}
    stage_of: dict[int, int] = {}
    for k, stage in enumerate(staged.stages):
        for op in stage.ops:
            for v in op.outputs:
                stage_of[id(v)] = k
    copies: list[tuple[Val, KernelParam]] = []
    for v, kp in zip(prog.outputs, outs):
        view = staged.view(v)
        root = view.root
        if id(root) in stage_of and id(root) not in homes and view.contiguous:
            homes[id(root)] = kp.name
        else:
            copies.append((v, kp))  # a parameter, a constant, a value returned twice or through strides
    temps: list[KernelParam] = []
    read_later = _read_by_later_stages(staged, stage_of) | {id(staged.view(v).root) for v, _ in copies}
    for stage in staged.stages:
        for op in stage.ops:
            for v in op.outputs:
                if id(v) in read_later and id(v) not in homes:
                    name = prog.namer.unique(f"{v.name}_tmp")
                    temps.append(KernelParam(name, TensorType(v.type.shape, v.type.dtype), False))
                    homes[id(v)] = name
    calls = [call for k in range(len(staged.stages)) for call in _lower_stage(staged, k, homes, target, declared)]
    calls += [_copy_stage(staged, v, kp, homes, target, declared, len(calls) + i) for i, (v, kp) in enumerate(copies)]
    params = tuple(KernelParam(p.name, p.type, False) for p in prog.params) + outs
    kernels = [c.fn for c in calls]
    sched = Schedule("stages", kernels[0].schedule.grid if kernels else 0,
                     max((f.schedule.threads_per_cta for f in kernels), default=1))
    return PrimFunc(prog.name, params, len(outs), bind_dimvars(prog, params), sched, [], prog.function.loc,
                    stages=tuple(calls), temps=tuple(temps))


def _read_by_later_stages(staged: StagedProgram, stage_of: dict[int, int]) -> set[int]:
    """The values (roots) a stage after the one producing them reads."""
    out: set[int] = set()
    for k, stage in enumerate(staged.stages):
        for op in stage.ops:
            for v in op.inputs:
                root = staged.view(v).root
                if id(root) in stage_of and stage_of[id(root)] < k:
                    out.add(id(root))
    return out


def _lower_stage(staged: StagedProgram, k: int, homes: dict[int, str], target: Target,
                 declared: Declared) -> list[StageCall]:
    prog = staged.prog
    stage = staged.stages[k]
    name = f"{prog.name}_stage{k}"
    if stage.kind in ("matmul", "rope"):
        (op,) = stage.ops
        views = [staged.view(v) for v in op.inputs]
        outs = [staged.view(v) for v in op.outputs]
        for v in views:
            if id(v.root) not in homes:
                raise LoweringError(op.op, prog.name, f"it reads {v.root.name}, which no stage computes (a constant "
                                    f"operand of {op.op} is not compiled yet)", op.loc)
        if stage.kind == "matmul":
            body, sched = matmul_body(name, op, views[0], views[1], outs[0], homes, target)
            return [_kernel(prog, name, [*views, outs[0]], homes, body, sched, op)]
        bodies = rope_bodies(name, op, views, outs, homes, target)
        return [_kernel(prog, f"{name}_{which}", [x, *views[2:], out], homes, body, sched, op)
                for which, x, out, (body, sched) in zip("qk", views[:2], outs, bodies)]
    sub, outside = sub_program(prog, staged.views, stage.ops, name)
    for v in outside:
        view = staged.view(v)
        if not view.contiguous:
            op = next(o for o in stage.ops if v in o.inputs)
            raise LoweringError(op.op, prog.name, f"it reads {v.name}, a view {view} of another layout (a "
                                "transpose or slice); a row-wise op reads contiguous values only, not yet views "
                                "through strides", op.loc)
    produced = [v for op in sub.ops for v in op.outputs]
    sub.outputs = tuple(v for v in produced if id(v) in homes)
    for op in sub.ops:
        for v in op.outputs:
            v.producer = op
    sub.name = prog.name  # refusals name the function
    fn = lower_rows(sub, target, declared)
    fn.name = name
    args = tuple(homes[id(staged.view(v).root)] for v in outside) + tuple(homes[id(v)] for v in sub.outputs)
    return [StageCall(fn, args)]


def _kernel(prog: Program, name: str, views: list[View], homes: dict[int, str], body: list[Stmt],
            sched: Schedule, op: Op) -> StageCall:
    """A stage kernel over the memory of ``views``' roots (the last one written), each a parameter named by its
    home."""
    roots = _distinct([v.root for v in views[:-1]])
    out = views[-1].root
    params = tuple(KernelParam(homes[id(r)], TensorType(r.type.shape, r.type.dtype), False) for r in roots
                   if r is not out)
    params += (KernelParam(homes[id(out)], TensorType(out.type.shape, out.type.dtype), True),)
    fn = PrimFunc(name, params, 1, _dimvars_of(prog, params), sched, body, op.loc)
    return StageCall(fn, tuple(p.name for p in params))


def _dimvars_of(prog: Program, params: tuple[KernelParam, ...]) -> tuple[DimBinding, ...]:
    """The DimVars a stage kernel's parameters mention, as the function binds them (a stage may write an axis
    no input of its own gives, such as a score matrix's context length)."""
    mentioned = dimvars_of(d for p in params for d in p.type.shape)
    function_params = tuple(KernelParam(p.name, p.type, False) for p in prog.params)
    return tuple(b for b in bind_dimvars(prog, function_params) if b.dimvar in mentioned)


def _copy_stage(staged: StagedProgram, v: Val, out: KernelParam, homes: dict[int, str], target: Target,
                declared: Declared, k: int) -> StageCall:
    """A row-wise stage copying ``v`` into the caller's output ``out`` (a value no stage writes there)."""
    prog = staged.prog
    view = staged.view(v)
    root = view.root
    if root.producer is not None and root.producer.op == "constant":
        raise LoweringError("return", prog.name, f"it returns the constant {v.name} through a view; not compiled "
                            "yet", prog.function.loc)
    if not view.contiguous or id(root) not in homes:
        raise LoweringError("return", prog.name, f"it returns {v.name}, a view {view} of another layout (a "
                            "transpose or slice); copying a strided view is not compiled yet", prog.function.loc)
    p = Val(TensorType(v.type.shape, v.type.dtype), f"{v.name}_src", param=f"{v.name}_src")
    sub = Program(f"{prog.name}_stage{k}", prog.function, (p,), [], (p,), prog.structure, prog.namer)
    fn = lower_rows(sub, target, declared)
    return StageCall(fn, (homes[id(root)], out.name))


def _distinct(vals: list[Val]) -> list[Val]:
    seen: list[Val] = []
    for v in vals:
        if all(v is not s for s in seen):
            seen.append(v)
    return seen

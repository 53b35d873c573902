"""Lowering: a HIR Module to TIR, one PrimFunction per ``@func`` kernel.

The passes, in order (each a small function over a printable form):

1. ``flatten_function``: the function's ops, calls of sibling functions inlined (``program.py``);
2. recognition, for a function without a placement of its own: attention as one op (``fuse_attention.py``),
   an rms_norm read only by matmuls moved into them as their prologue (``prologue.py``); then
   ``expand_composites``: rms_norm, layer_norm and softmax as the primitives they compute (``expand.py``);
3. staging: a function with a matmul or a view op is cut into stages, kernels run one after another
   (``stages.py``; views as strides, ``views.py``), the elementwise ops after a matmul moved into its epilogue
   (``epilogue.py``), two matmuls of one input whose results meet merged into one stage (``pairs.py``), an argmax
   or reduction of a matmul's rows into the matmul's stage as each CTA's part and a merge (``reduce_epilogue.py``),
   each stage lowered on its own below (``staged.py``; a matmul stage by ``matmul.py``);
4. placement: the function's own ``with Mesh(...)`` placement when it has one (``meshwise.py``), else
   the automatic row-wise placement (``rows.py``, ``schedule.py``, ``layouts.py``);
5. materialisation: buffers, views and runtime-op calls (``rowwise.py`` / ``meshwise.py``);
6. the shared-memory workspace of reductions whose partial results cross warps (``workspace.py``).

An op that cannot be compiled is refused with a :class:`LoweringError` naming it, the function and the
source line.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..ir.core.function import Function
from ..ir.core.module import Module
from ..target import Target, resolve_target
from ..tir.dispatch import Dispatch
from ..tir.function import PrimFunc, TirModule
from .dispatch import lower_dispatch, row_variants
from .errors import LoweringError
from .expand import expand_composites
from .fuse_attention import fuse_attention
from .gather_last import gathers_to_leading_axes
from .in_place import rows_aliases
from .meshwise import is_placed, lower_mesh
from .move_axis import picks_to_last_axis
from .program import Program, flatten_function, narrow
from .prologue import fuse_prologues
from .reduce_axis import split_reductions
from .rows import analyze_rows
from .rowwise import lower_rows
from .schedule import Declared
from .staged import lower_staged
from .stages import MATMUL_OPS, OWN_KERNEL_OPS, needs_stages
from .topology import declared_topologies
from .views import VIEW_OPS
from .workspace import attach_workspaces

__all__ = ["LoweringError", "as_module", "lower", "lower_function", "target_for"]


def as_module(fn_or_mod: Any, verb: str = "lower") -> Module:
    """A Module from a Function (an implicit one-function Module declaring no execution context)."""
    if isinstance(fn_or_mod, Module):
        return fn_or_mod
    if isinstance(fn_or_mod, Function):
        return Module(fn_or_mod.name, {fn_or_mod.name: fn_or_mod}, entry=fn_or_mod.name, target=fn_or_mod.target,
                      topologies=fn_or_mod.topologies)
    if callable(fn_or_mod):
        name = getattr(fn_or_mod, "__name__", type(fn_or_mod).__name__)
        raise TypeError(f"{verb} takes TileFoundry IR (a @func Function or a @module Module); {name} is a plain "
                        f"Python callable: decorate it with @func first")
    raise TypeError(f"{verb} takes a @func Function or a @module Module, got {type(fn_or_mod).__name__}")


def target_for(mod: Module, target: str | Target | None, verb: str) -> Target:
    """The target to compile for: the one asked, which must be of the kind the Module declares.

    A kind asked by name (``"cuda"``) takes the Module's own target of that kind when it declares one (its
    device, e.g. ``CudaTarget("nvidia.h100_sxm")``); a Target instance asked is taken as it is.
    """
    declared = mod.target
    if target is None:
        return declared if declared is not None else resolve_target("cuda")
    asked = resolve_target(target)
    if declared is None:
        return asked
    if declared.kind != asked.kind:
        raise ValueError(f"{verb}: Module {mod.name!r} declares target {declared} ({declared.kind}), but target "
                         f"{asked} ({asked.kind}) was asked; ask for {declared.kind!r} or drop the Module's target=")
    return declared if isinstance(target, str) else asked


def lower_function(fn: Function, target: Target, declared: Declared) -> PrimFunc:
    """One function's PrimFunction."""
    variants = getattr(fn, "variants", ())
    if variants:
        names = ", ".join(f"{v.name} ({v.pattern})" for v in variants)
        raise LoweringError("dispatch", fn.name, f"it dispatches to its variants {names} by the extent of a DimVar: "
                            "lower_function lowers one body; lower() and jit() lower each variant and an entry "
                            "choosing among them", fn.loc)
    prog: Program = flatten_function(fn)
    if getattr(fn, "narrowing", None):  # a variant of row_variants: its body lowered for a narrower range
        prog = narrow(prog, fn.narrowing)
    placed = is_placed(prog)
    prog = expand_composites(prog if placed else fuse_prologues(fuse_attention(prog), target))
    if placed:
        op = next((op for op in prog.ops if op.op in MATMUL_OPS or op.op in OWN_KERNEL_OPS or op.op in VIEW_OPS),
                  None)
        if op is not None:
            raise LoweringError(op.op, fn.name, "inside a function with its own placement (with Mesh(...)) it is "
                                "not compiled yet; leave the function unplaced to compile it in stages", op.loc)
        return attach_workspaces(lower_mesh(prog, target, declared))
    prog = gathers_to_leading_axes(picks_to_last_axis(split_reductions(prog)))
    if needs_stages(prog) or not _one_row_space(prog):
        staged = lower_staged(prog, target, declared)
        for stage in staged.stages:
            stage.fn = attach_workspaces(stage.fn)
        return staged
    fn = attach_workspaces(lower_rows(prog, target, declared))
    if len(fn.outputs) == 1:
        fn.aliases = rows_aliases(prog, fn.outputs[0].name)
    return fn


def _one_row_space(prog: Program) -> bool:
    """Whether the row-wise analysis takes ``prog`` whole (else its ops are grouped into row-wise stages, and an op
    no stage takes is refused by name there)."""
    if len(prog.ops) < 2:
        return True
    try:
        analyze_rows(prog)
    except LoweringError:
        return False
    return True


def lower(fn_or_mod: Any, target: str | Target | None = None, *, split_rows: bool = True) -> TirModule:
    """Lower a Module (or a Function) to TIR for ``target`` (default: the Module's, else ``"cuda"``).

    ``split_rows``: a function whose matmuls take another schedule at 17 rows and more than at 16 and fewer (on a
    Hopper GPU: the tensor cores) is lowered as an entry dispatching to two variants of it by that row count
    (``dispatch.row_variants``); False keeps one body for every row count.

    Raises:
        TypeError: not TileFoundry IR (a raw Python function: decorate it with @func).
        ValueError: the Module declares a target of another kind than ``target``.
        LoweringError: an op (or placement) the compiler cannot handle, naming the op, function and line.
    """
    if not isinstance(split_rows, bool):
        raise TypeError(f"lower: split_rows must be True or False, got {split_rows!r}")
    mod = as_module(fn_or_mod)
    tgt = target_for(mod, target, "lower")
    declared = declared_topologies(mod)
    functions: dict[str, PrimFunc] = {}
    dispatches: dict[str, Dispatch] = {}
    for name, fn in mod.functions.items():
        if split_rows and not getattr(fn, "variants", ()):
            fn = row_variants(fn, tgt) or fn
        if getattr(fn, "variants", ()):  # one PrimFunction a variant, and an entry choosing among them
            dispatch, variants = lower_dispatch(fn, lambda v: lower_function(v, tgt, declared),
                                                set(mod.functions) | set(functions))
            dispatches[name] = replace(dispatch, name=name)
            functions.update(variants)
        else:
            functions[name] = lower_function(fn, tgt, declared)
    entry = mod.entry if mod.entry is not None else next(iter(mod.functions), "")
    return TirModule(mod.name, tgt, functions, entry, dispatches)

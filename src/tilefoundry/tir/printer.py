"""The text form of TIR: one line per statement, indented by scope, each call with its HIR origin."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .buffer import Buffer, Literal, Operand
from .stmt import AliasView, Alloc, AsyncWait, GmemView, MeshScope, OpCall, RowGuard, RowLoop, Stmt, Sync

if TYPE_CHECKING:
    from .function import PrimFunc, TirModule


def _operand(o: Operand) -> str:
    return o.name if isinstance(o, Buffer) else str(o)


def _stmt(s: Stmt, indent: str, lines: list[str]) -> None:
    if isinstance(s, Alloc):
        lines.append(f"{indent}alloc {s.buffer}")
    elif isinstance(s, GmemView):
        lines.append(f"{indent}view {s.buffer} = {s.param}[{s.offset}:]")
    elif isinstance(s, AliasView):
        lines.append(f"{indent}view {s.buffer} = {s.source.name}")
    elif isinstance(s, OpCall):
        tmpl = []
        if s.tag is not None:
            tmpl.append(" then ".join(str(t) for t in (s.tag, *s.then)))
        if s.axes:
            tmpl.append(f"axes=({', '.join(str(a) for a in s.axes)})")
        ins = ", ".join([*(str(t) for t in s.functors), *(_operand(o) for o in s.operands),
                         *(f"[{i}]" for i in s.indices)])
        ws = f", workspace={s.workspace.name}" if s.workspace is not None else ""
        ws += ", weights constant" if s.weights_constant else ""
        outs = ", ".join(b.name for b in (s.out, *s.more_out))
        epi = f", {s.epilogue}" if s.epilogue is not None else ""
        epi += f", {s.prologue}" if s.prologue is not None else ""
        if s.fold is not None:
            f = s.fold
            epi += f", fold {f.tag} axes=({', '.join(str(a) for a in f.axes)}) into {f.out.name}"
        lines += [f"{indent}{m}" for m in s.maps]  # made by the host entry, passed in
        maps = "".join(f", {m.name}" for m in s.maps)
        lines.append(f"{indent}{outs} <- {s.family}<{', '.join(tmpl)}>({ins}{maps}{ws}{epi})  # {s.origin}")
    elif isinstance(s, Sync):
        lines.append(f"{indent}sync<{s.kind}>" + (f"  # {s.origin}" if s.origin else ""))
    elif isinstance(s, AsyncWait):
        lines.append(f"{indent}wait copy_async" + (f"  # {s.origin}" if s.origin else ""))
    elif isinstance(s, MeshScope):
        lines.append(f"{indent}with {s.mesh}:")
        for t in s.body:
            _stmt(t, indent + "  ", lines)
    elif isinstance(s, RowGuard):
        lines.append(f"{indent}if {' and '.join(str(c) for c in s.conds)}:")
        for t in s.body:
            _stmt(t, indent + "  ", lines)
    elif isinstance(s, RowLoop):
        lines.append(f"{indent}for {s.var} in rows of this cta:")
        for t in s.body:
            _stmt(t, indent + "  ", lines)
    else:  # pragma: no cover - every statement kind is printed above
        lines.append(f"{indent}{s!r}")


def print_function(fn: PrimFunc) -> str:
    """The text of one PrimFunction."""
    ins = ", ".join(str(p) for p in fn.inputs)
    outs = ", ".join(str(p) for p in fn.outputs)
    lines = [f"prim_func {fn.name}({ins}) -> ({outs})"]
    for b in fn.dimvars:
        lines.append(f"  dimvar {b}")
    lines.append(f"  schedule {fn.schedule}")
    if fn.early_reads:
        lines.append(f"  early reads {', '.join(fn.early_reads)}  # no kernel right before writes them")
    for t in fn.temps:
        lines.append(f"  temp {t}")
    for k, stage in enumerate(fn.stages):
        lines.append(f"  stage {k}: {stage.fn.name}({', '.join(stage.args)})")
        lines += ["  " + line for line in print_function(stage.fn).splitlines()]
    for s in fn.body:
        _stmt(s, "  ", lines)
    return "\n".join(lines)


def print_module(mod: TirModule) -> str:
    """The text of a lowered Module: its target, entry, every PrimFunction and every dispatching entry."""
    head = f"tir_module {mod.name} target={mod.target} entry={mod.entry}"
    return "\n\n".join([head] + [print_function(f) for f in mod.functions.values()]
                       + [str(d) for d in mod.dispatches.values()])


__all__ = ["Literal", "print_function", "print_module"]

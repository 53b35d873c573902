"""The lowering's working form of one function: a flat list of ops over named values.

``flatten_function`` builds it from a traced Function, inlining calls of sibling ``@func``s (their ops
keep their own source lines). The passes after it (composite expansion, placement, materialisation)
read and rewrite this form; ``str()`` prints it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..ir.core.function import Function
from ..ir.core.graph import Node, Value
from ..ir.core.op import op_def
from ..ir.core.propagate import place_result
from ..ir.core.source import SourceLoc
from ..ir.core.tree import TreeSpec, flatten
from ..ir.types.dim import Dim, DimExpr, DimVar, substitute
from ..ir.types.shard import MeshSpec
from ..ir.types.tensor_type import TensorType
from .errors import LoweringError


@dataclass(eq=False)
class Val:
    """A value of the program: a parameter (``param`` set) or an op's result."""

    type: TensorType
    name: str
    param: str | None = None
    producer: Op | None = None

    @property
    def constant(self) -> bool:
        """Whether a ``constant`` op makes this value (a literal, copied into every stage that reads it)."""
        return self.producer is not None and self.producer.op == "constant"

    def __str__(self) -> str:
        return f"%{self.name}"


@dataclass(eq=False)
class Op:
    """One HIR op with its inputs, results, attributes, source line and mesh scopes (outermost first).

    ``composite`` names the op it was expanded from (``rms_norm``), None for an op written as such.
    """

    op: str
    inputs: tuple[Val, ...]
    outputs: tuple[Val, ...]
    attrs: dict[str, Any]
    loc: SourceLoc | None
    meshes: tuple[MeshSpec, ...] = ()
    composite: str | None = None

    def __str__(self) -> str:
        outs = ", ".join(str(v) for v in self.outputs)
        ins = ", ".join(str(v) for v in self.inputs)
        attrs = "".join(f" {k}={v}" for k, v in self.attrs.items() if k != "structure")
        via = f" (from {self.composite})" if self.composite else ""
        types = ", ".join(str(v.type) for v in self.outputs)
        return f"{outs} = {self.op}({ins}){attrs} : {types}{via}"


@dataclass(eq=False)
class Program:
    """A function's flat ops: parameters (declaration order, weights included), ops, result leaves."""

    name: str
    function: Function
    params: tuple[Val, ...]
    ops: list[Op] = field(default_factory=list)
    outputs: tuple[Val, ...] = ()
    structure: TreeSpec = None
    namer: Namer = field(default_factory=lambda: Namer())

    def __str__(self) -> str:
        head = f"program {self.name}({', '.join(f'%{p.name}: {p.type}' for p in self.params)})"
        body = [f"  {op}" for op in self.ops]
        return "\n".join([head, *body, f"  return {', '.join(str(v) for v in self.outputs)}"])


class Namer:
    """Unique, readable C-identifier names: the assigned Python name when the source line has one."""

    _ASSIGN = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?::[^=]+)?=(?!=)")

    def __init__(self, taken: set[str] | None = None) -> None:
        self.taken: set[str] = set(taken or ())

    def unique(self, base: str) -> str:
        base = re.sub(r"\W", "_", base) or "v"
        if base[0].isdigit():
            base = "v" + base
        name, k = base, 1
        while name in self.taken:
            name = f"{base}_{k}"
            k += 1
        self.taken.add(name)
        return name

    @classmethod
    def assigned(cls, loc: SourceLoc | None) -> str | None:
        """The name a source line assigns (``y = ...``), if it assigns one."""
        if loc is None:
            return None
        m = cls._ASSIGN.match(loc.text)
        return m.group(1) if m else None


def flatten_function(fn: Function) -> Program:
    """The function's ops, with every ``call`` of a sibling function inlined."""
    namer = Namer({p.name for p in fn.params})
    graph = fn.graph
    params = tuple(Val(v.type, v.param or "", param=v.param) for v in graph.params)
    env: dict[int, Val] = {id(v): p for v, p in zip(graph.params, params)}
    prog = Program(fn.name, fn, params, namer=namer)
    _inline(fn, graph.nodes, env, prog, namer, ())
    leaves, spec = flatten(graph.outputs, lambda v: isinstance(v, Value))
    prog.outputs = tuple(env[id(v)] for v in leaves)
    prog.structure = spec
    _name_by_source(prog, namer)
    return prog


def narrow(prog: Program, mapping: Mapping[DimVar, Dim]) -> Program:
    """``prog`` (in place) with each DimVar in ``mapping`` replaced by its dim in every value's type and every op's
    attributes: the body traced once, lowered for a narrower range of a DimVar (dispatch.row_variants)."""

    def sub(x: Any) -> Any:
        if isinstance(x, (DimVar, DimExpr)):
            return substitute(x, mapping)
        if isinstance(x, TensorType):
            return TensorType(tuple(substitute(d, mapping) for d in x.shape), x.dtype, x.layout, x.storage)
        if isinstance(x, tuple):
            return tuple(sub(e) for e in x)
        if isinstance(x, list):
            return [sub(e) for e in x]
        if isinstance(x, dict):
            return {k: sub(v) for k, v in x.items()}
        return x

    seen: set[int] = set()
    for v in (*prog.params, *(v for op in prog.ops for v in (*op.inputs, *op.outputs)), *prog.outputs):
        if id(v) not in seen:
            seen.add(id(v))
            v.type = sub(v.type)
    for op in prog.ops:
        op.attrs = sub(op.attrs)
    return prog


def _inline(fn: Function, nodes: list[Node], env: dict[int, Val], prog: Program, namer: Namer,
            outer_meshes: tuple[MeshSpec, ...]) -> None:
    for node in nodes:
        meshes = outer_meshes + node.meshes
        if node.op == "call":
            callee = node.callee
            inner: dict[int, Val] = {id(p): env[id(a)] for p, a in zip(callee.graph.params, node.inputs)}
            _inline(callee, callee.graph.nodes, inner, prog, namer, meshes)
            leaves, _ = flatten(callee.graph.outputs, lambda v: isinstance(v, Value))
            for out, leaf in zip(node.outputs, leaves):
                env[id(out)] = inner[id(leaf)]
            continue
        if node.op == "call_module":
            raise LoweringError(
                "call_module", fn.name,
                f"it calls child Module {node.attrs.get('child')!r}, whose weights are bound by a reading; a "
                "compiled entry takes every tensor as an argument, so jit the child's function itself", node.loc)
        ins = tuple(env[id(v)] for v in node.inputs)
        outs = tuple(Val(v.type, "") for v in node.outputs)
        op = Op(node.op, ins, outs, dict(node.attrs), node.loc, meshes)
        for v in outs:
            v.producer = op
        prog.ops.append(op)
        for v, o in zip(node.outputs, outs):
            env[id(v)] = o


def _name_by_source(prog: Program, namer: Namer) -> None:
    """Name each result: the Python name its line assigns (for the line's last op), else op + index."""
    for i, op in enumerate(prog.ops):
        last_of_line = i + 1 == len(prog.ops) or prog.ops[i + 1].loc != op.loc
        hint = Namer.assigned(op.loc) if last_of_line and op.composite is None else None
        for k, v in enumerate(op.outputs):
            if v.name:
                continue
            if hint is not None:
                base = hint if len(op.outputs) == 1 else f"{hint}{k}"
            else:
                base = f"{op.composite}_{op.op}" if op.composite else op.op
            v.name = namer.unique(base)


def make_op(prog: Program, op: str, inputs: tuple[Val, ...], attrs: dict[str, Any], like: Op, role: str) -> Val:
    """Append a primitive op typed by its own type rule and placed as tracing places it (so an expansion types
    exactly as written ops, inside a ``with Mesh(...)`` scope too)."""
    (out,) = make_ops(prog, op, inputs, attrs, like, role)
    return out


def make_ops(prog: Program, op: str, inputs: tuple[Val, ...], attrs: dict[str, Any], like: Op,
             role: str) -> tuple[Val, ...]:
    """``make_op`` of an op with one result or several (topk's values and indices), its results in order."""
    attrs = dict(attrs)
    definition = op_def(op)
    types = tuple(v.type for v in inputs)
    result = place_result(op, definition.family, types, attrs, definition.infer(types, attrs))
    results = result if isinstance(result, tuple) else (result,)
    outs = tuple(Val(t, prog.namer.unique(f"{like.op}_{role}")) for t in results)
    new = Op(op, inputs, outs, attrs, like.loc, like.meshes, composite=like.composite or like.op)
    for out in outs:
        out.producer = new
    prog.ops.append(new)
    return outs


def adopt_result(prog: Program, out: Val) -> None:
    """The last op appended to ``prog`` (a rewrite computing ``out`` anew) takes ``out`` as its first result in place
    of its own, so that the ops reading ``out`` read it."""
    last = prog.ops[-1]
    last.outputs = (out, *last.outputs[1:])
    out.producer = last

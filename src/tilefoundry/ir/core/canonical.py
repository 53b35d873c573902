"""The canonical text of a Module: deterministic, and the same for two identical definitions.

It holds what decides a compiled result: the Module's name, entry and target kind, its *effective*
topology hierarchy (declared, or inherited from its owner), every function (parameters with their
types and DimVar ranges, then its ops in program order with their attributes, mesh scopes and result
types, then its results), and its children. Nodes are numbered by their position in their function
(``%0``, ``%1``...; a multi-result node's results are ``%3.0``, ``%3.1``), so ids are stable from one
trace to the next. Source locations, Python object identities and orchestration methods' code are not
part of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import TYPE_CHECKING, Any

from ..types.dim import DimExpr, DimVar
from ..types.dtype import DType
from ..types.shard import MeshAxis, MeshSpec
from ..types.storage import Storage
from ..types.tensor_type import TensorType
from .graph import Graph, Value
from .tree import flatten

if TYPE_CHECKING:
    from .function import Function
    from .module import Module


def canonical_value(v: Any) -> str:
    """One attribute value in canonical form (an enum by its value, a float by its shortest repr)."""
    if isinstance(v, Enum):
        return canonical_value(v.value)
    if isinstance(v, bool) or v is None:
        return repr(v)
    if isinstance(v, (int, float, str)):
        return repr(v)
    if isinstance(v, DType):
        return v.name
    if isinstance(v, DimVar):
        return f"{v.name}[{v.lo},{v.hi})"
    if isinstance(v, DimExpr):
        return f"({v})"
    if isinstance(v, (tuple, list)):
        return "(" + ", ".join(canonical_value(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    if isinstance(v, MeshSpec):
        return f"mesh({canonical_value(v.topologies)}, {canonical_value(v.layout)}, {canonical_value(v.names)})"
    if isinstance(v, MeshAxis):
        return f"{canonical_value(v.mesh)}.{v.name}"
    canonical = getattr(v, "canonical_text", None)
    if callable(canonical):
        return canonical()
    if isinstance(v, Mapping):
        return "{" + ", ".join(f"{canonical_value(k)}: {canonical_value(x)}" for k, x in sorted(v.items())) + "}"
    return repr(v)


def canonical_type(t: TensorType) -> str:
    """A type with every dim spelled out (a DimVar with its range)."""
    dims = ", ".join(canonical_value(d) for d in t.shape)
    layout = "" if t.layout is None else f", layout={canonical_value(t.layout)}"
    storage = "" if t.storage is Storage.gmem else f", {t.storage.value}"
    return f"[({dims}), {t.dtype.name}{storage}{layout}]"


def canonical_graph(fn: Function, graph: Graph, callees: dict[str, Function]) -> list[str]:
    """The lines of one function: signature, ops, results."""
    params = ", ".join(f"%{p.name}: {'ConstTensor' if p.const else 'Tensor'}{canonical_type(p.type)}"
                       for p in fn.params)
    lines = [f"func {fn.name}({params})"]
    names: dict[int, str] = {id(v): f"%{v.param}" for v in graph.params}
    for node in graph.nodes:
        for k, v in enumerate(node.outputs):
            names[id(v)] = f"%{node.id}" if len(node.outputs) == 1 and not node.returns_tuple else f"%{node.id}.{k}"
        outs = ", ".join(names[id(v)] for v in node.outputs)
        ins = ", ".join(names[id(v)] for v in node.inputs)
        attrs = {k: a for k, a in node.attrs.items() if k != "structure"}
        if node.callee is not None:
            callees.setdefault(node.callee.name, node.callee)
        text = ", ".join(f"{k}={canonical_value(a)}" for k, a in attrs.items())
        meshes = node.meshes
        scope = f" in {' / '.join(canonical_value(m) for m in meshes)}" if meshes else ""
        types = ", ".join(canonical_type(v.type) for v in node.outputs)
        lines.append(f"  {outs} = {node.op}({ins}) {{{text}}}{scope} : {types}")
    leaves, spec = flatten(graph.outputs, lambda v: isinstance(v, Value))
    lines.append(f"  return {', '.join(names[id(v)] for v in leaves)} as {spec!r}")
    return lines


def canonical_function_text(fn: Function) -> str:
    """One function (a dispatching one with each variant and its range) and every function it calls."""
    callees: dict[str, Function] = {}
    variants = getattr(fn, "variants", ())
    if variants:
        params = ", ".join(f"%{p.name}: {'ConstTensor' if p.const else 'Tensor'}{canonical_type(p.type)}"
                           for p in fn.params)
        lines = [f"func {fn.name}({params}) dispatches on {canonical_value(fn.dispatch_var())}"]
        for v in variants:
            lines.append(f"  variant {v.pattern}:")
            lines += ["    " + line for line in canonical_graph(v, v.graph, callees)]
    else:
        lines = canonical_graph(fn, fn.graph, callees)
    done = {fn.name}
    while set(callees) - done:
        name = sorted(set(callees) - done)[0]
        done.add(name)
        lines += canonical_graph(callees[name], callees[name].graph, callees)
    return "\n".join(lines)


def canonical_module_text(mod: Module) -> str:
    """The canonical text of a Module and its children (see the module docstring)."""
    return "\n".join(_module_lines(mod, ""))


def _module_lines(mod: Module, indent: str) -> list[str]:
    target = mod.target.kind if mod.target is not None else "none"
    topos = mod._effective_topologies()
    hierarchy = ", ".join(f"{t.name}={t.size}" for t in topos) if topos is not None else "none"
    lines = [f"{indent}module {mod.name} entry={mod.entry} target={target} topologies=({hierarchy})"]
    for name in sorted(mod.functions):
        lines += [indent + "  " + line for line in canonical_function_text(mod.functions[name]).splitlines()]
    for child in mod.modules:
        lines += _module_lines(child, indent + "  ")
    if mod.methods:
        lines.append(f"{indent}  methods {', '.join(sorted(mod.methods))}")
    return lines

"""Run a traced Function on torch: validate inputs, bind DimVars, execute nodes in order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..ir.core.binding import Binder, Mismatch
from ..ir.core.function import Converter, Function, Param
from ..ir.core.graph import Node, Value
from ..ir.core.source import user_source
from ..ir.core.tables import positional_tables
from ..ir.core.tree import flatten, unflatten
from ..ir.types.tensor_type import TensorType
from .context import EvalContext
from .registry import HANDLERS


class EvaluationError(RuntimeError):
    """An op failed at run time (e.g. an index out of range); names the op and the source line."""


def evaluate(fn: Function, *inputs: Any, device: str | torch.device | None = None) -> Any:
    """Evaluate ``fn`` with one tensor per declared parameter (weights included).

    Every input's dtype and shape is validated against its declaration; DimVars are bound from the
    inputs, consistently across parameters and inside their ranges. ``device=None`` runs where the
    inputs are (they must agree); a device given moves the inputs there.

    Returns a tensor, or nested tuples of tensors shaped like the function's result.
    """
    from ..ir.core.function import Function as _Function
    from ..ir.core.module import Module

    if isinstance(fn, Module):
        raise TypeError(f"evaluate takes a Function; for Module {fn.name!r} call it (forward) or pass "
                        f"one of its functions ({', '.join(fn.functions)})")
    if not isinstance(fn, _Function):
        raise TypeError(f"evaluate takes a @func Function, got {type(fn).__name__}")
    args = list(inputs)
    if device is not None:
        dev = torch.device(device)
        args = [a.to(dev) if isinstance(a, torch.Tensor) else a for a in args]
    else:
        dev = agree_device(fn.name, [(p.name, a) for p, a in zip(fn.params, args)])
    return run_function(fn, args, EvalContext(dev))


def agree_device(what: str, named: Sequence[tuple[str, Any]]) -> torch.device:
    """The one device all tensors sit on (CPU when there are none); a refusal naming what sits where."""
    devices = {a.device for _, a in named if isinstance(a, torch.Tensor)}
    if len(devices) > 1:
        where = ", ".join(f"{n} on {a.device}" for n, a in named if isinstance(a, torch.Tensor))
        raise ValueError(f"{what}: tensors sit on different devices ({where}); put them on one device")
    return devices.pop() if devices else torch.device("cpu")


def bind_inputs(fn: Function, params: Sequence[Param], args: Sequence[Any], bindings: dict[str, int]) -> list[Any]:
    """Check each argument against its declaration, binding DimVars into ``bindings``; return the arguments.

    The rule is the IR's one (:class:`~tilefoundry.ir.core.binding.Binder`); a wrong kind of tensor is a
    TypeError, a wrong extent a ValueError, each prefixed with the function's name. An activation of another
    floating dtype than the declared one is converted to it first (as ``torch.as_tensor(x, dtype=declared)``
    does: an f32 tensor where bf16 is declared); a weight (ConstTensor) and a weight converter's raw checkpoint
    tensors are bound as they are (spec 1.5), and anything else (a float where an integer is declared) is refused.
    A positional table (RoPE's cos / sin rows, :func:`~tilefoundry.ir.core.tables.positional_tables`) may hold
    fewer rows than it declares, as the reference implementation's model sources pass them.
    """
    if len(args) != len(params):
        raise TypeError(
            f"{fn.name} takes {len(params)} arguments ({', '.join(p.name for p in params)}), got {len(args)}"
        )
    binder = Binder("argument", bindings)
    tables = positional_tables(fn)
    bound = []
    try:
        for p, a in zip(params, args):
            declared = p.type.dtype
            if (not p.const and not isinstance(fn, Converter) and isinstance(a, torch.Tensor)
                    and a.is_floating_point() and declared.is_float and a.dtype != declared.torch_dtype):
                a = a.to(declared.torch_dtype)
            bound.append(binder.bind(p.name, a, p.type, table=not p.const and p.name in tables))
        binder.finish(complete=True)
    except Mismatch as m:
        raise (TypeError if m.is_type_error else ValueError)(f"{fn.name}: {m}") from None
    return bound


def run_function(fn: Function, args: Sequence[Any], ctx: EvalContext, params: Sequence[Param] | None = None) -> Any:
    """Validate ``args`` against ``fn``'s params, then run its graph under ``ctx``.

    A function with variants runs the variant serving the extent its arguments bind.
    """
    bindings: dict[str, int] = {}
    try:
        args = bind_inputs(fn, fn.params if params is None else params, args, bindings)
    except (TypeError, ValueError) as e:
        loc = user_source()
        if loc is None:
            raise
        raise type(e)(f"{e}\n  called at {loc}") from None
    if fn.variants:
        return _dispatch(fn, args, bindings, ctx)
    graph = fn.graph
    local = EvalContext(ctx.device, bindings, ctx.reading, ctx.path)
    values: dict[int, torch.Tensor] = {id(v): a for v, a in zip(graph.params, args)}
    for node in graph.nodes:
        ins = [values[id(v)] for v in node.inputs]
        try:
            out = _run_node(node, ins, local)
        except EvaluationError:  # from a nested call: already names its op and line
            raise
        except (RuntimeError, IndexError, NotImplementedError) as e:
            meta = [v.param or f"its operand {k}" for k, (v, t) in enumerate(zip(node.inputs, ins))
                    if isinstance(t, torch.Tensor) and t.is_meta]
            if meta:  # shapes evaluate on the meta device; an op that reads values does not
                raise EvaluationError(
                    f"{node.op} in {fn.name} reads the values of {', '.join(meta)}, on the meta device (a shape, no "
                    f"data); run it on tensors of 'cpu' or 'cuda'\n  at {node.loc}") from e
            raise EvaluationError(f"{node.op} failed in {fn.name}: {e}\n  at {node.loc}") from e
        outs = out if isinstance(out, tuple) else (out,)
        for v, t in zip(node.outputs, outs):
            _check_result(node, v, t, local)
            values[id(v)] = t
    leaves, spec = flatten(graph.outputs, lambda v: isinstance(v, Value))
    return unflatten(spec, [values[id(v)] for v in leaves])


def run_reading(fn: Function, args: Sequence[Any], device: torch.device, reading: Any) -> Any:
    """Run ``fn`` of the LoadedModule ``reading`` on ``device``; ``args`` hold every declared parameter."""
    return run_function(fn, args, EvalContext(device, reading=reading, path=reading.name))


def _run_node(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> Any:
    if node.op == "call":
        out = run_function(node.callee, ins, ctx)
        return tuple(flatten(out, lambda t: isinstance(t, torch.Tensor))[0])
    if node.op == "call_module":
        out = _call_child(node, ins, ctx)
        return tuple(flatten(out, lambda t: isinstance(t, torch.Tensor))[0])
    return HANDLERS[node.op](node, ins, ctx)


def _call_child(node: Node, ins: list[torch.Tensor], ctx: EvalContext) -> Any:
    from ..ir.core.loaded import child_reading

    child = node.attrs["child"]
    if ctx.reading is None:
        raise TypeError(
            f"{node.loc}: calls child Module {child!r}, whose weights come from a reading; load the root "
            "with Module.load(resource) and call the LoadedModule"
        )
    reading = child_reading(ctx.reading, ctx.path or ctx.reading.name, child)
    path = f"{ctx.path or ctx.reading.name}.{child}"
    fn = node.callee.select(ins)
    it = iter(ins)
    args = [_placed_constant(reading, path, p.name, fn.name, ctx.device) if p.const else next(it) for p in fn.params]
    return run_function(fn, args, EvalContext(ctx.device, {}, reading, path))


def _placed_constant(reading: Any, path: str, weight: str, user: str, device: torch.device) -> Any:
    """A weight of ``reading`` for ``user``, which must sit on the run's device (named when it does not)."""
    from ..ir.core.loaded import reading_constant

    t = reading_constant(reading, path, weight, user)
    if isinstance(t, torch.Tensor) and t.device != device:
        raise ValueError(
            f"{user} reads constant {path}.{weight} on {t.device}, but the call runs on {device}; nothing was "
            "moved. Load every weight onto one device"
        )
    return t


def _dispatch(fn: Function, args: Sequence[Any], bindings: dict[str, int], ctx: EvalContext) -> Any:
    """Run the variant of ``fn`` serving the extent ``args`` bound; its weights come from ``args`` by name when
    ``fn`` declares them, else from the reading, where they must sit on the run's device."""
    from ..ir.core.dispatch import select_variant

    dv = fn.dispatch_var()
    assert dv is not None
    variant = select_variant(fn, bindings[dv.name])
    given = {p.name: a for p, a in zip(fn.params, args)}
    out: list[Any] = []
    for p in variant.params:
        if p.name in given:
            out.append(given[p.name])
            continue
        if ctx.reading is None:
            raise TypeError(
                f"{fn.name}: its variant {variant.name} needs the weight {p.name}, which {fn.name} does not declare; "
                "call it through a reading (Module.load(resource)), or declare the weight on the base function"
            )
        out.append(_placed_constant(ctx.reading, ctx.path or ctx.reading.name, p.name, f"{fn.name} (variant "
                                    f"{variant.name})", ctx.device))
    return run_function(variant, out, ctx)


def _check_result(node: Node, v: Value, t: Any, ctx: EvalContext) -> None:
    """Hold every handler to its op's type rule: a mismatch is a framework bug, reported as such."""
    want: TensorType = v.type
    if not isinstance(t, torch.Tensor) or t.dtype != want.dtype.torch_dtype:
        raise AssertionError(f"evaluator bug: {node.op} produced {getattr(t, 'dtype', type(t))}, typed {want}")
    try:
        shape = want.concrete_shape(ctx.bindings)
    except KeyError:
        return
    if tuple(t.shape) != shape:
        raise AssertionError(f"evaluator bug: {node.op} produced shape {tuple(t.shape)}, typed {want} = {shape}")

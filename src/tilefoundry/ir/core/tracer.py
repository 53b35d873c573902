"""Tracing: while a ``@func`` body runs on symbolic Values, every op call appends a typed Node."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from ..types.dtype import DType, dtype_of
from ..types.shard import MeshSpec
from ..types.tensor_type import TensorType
from .errors import IRTypeError, OpTypeError
from .graph import Graph, Node, Value
from .op import op_def
from .propagate import place_result
from .source import user_source


class TraceContext:
    """The graph being built and the mesh scopes open around the current call."""

    def __init__(self, graph: Graph, function_name: str) -> None:
        self.graph = graph
        self.function_name = function_name
        self.mesh_stack: list[MeshSpec] = []


_state = threading.local()


def current_trace() -> TraceContext | None:
    """The innermost active trace, or None outside tracing."""
    stack = getattr(_state, "stack", None)
    return stack[-1] if stack else None


@contextmanager
def tracing(ctx: TraceContext) -> Iterator[TraceContext]:
    """Make ``ctx`` the active trace for the duration of the block."""
    if not hasattr(_state, "stack"):
        _state.stack = []
    _state.stack.append(ctx)
    try:
        yield ctx
    finally:
        _state.stack.pop()


def require_trace(op: str) -> TraceContext:
    """The active trace; a clear error when an op is called outside a ``@func`` body."""
    ctx = current_trace()
    if ctx is None:
        raise RuntimeError(
            f"tf.{op} was called outside a @func body: ops only record HIR while a @func is traced; "
            "to compute on tensors, call the @func (or evaluate it) instead"
        )
    return ctx


def emit(op: str, inputs: tuple[Any, ...], attrs: dict[str, Any] | None = None) -> Any:
    """Type ``op`` on ``inputs`` with ``attrs`` and append it to the active trace.

    Returns one Value, or a tuple of Values for ops with several results.
    """
    ctx = require_trace(op)
    attrs = dict(attrs or {})
    loc = user_source()
    for i, v in enumerate(inputs):
        if not isinstance(v, Value):
            raise IRTypeError(op, [x.type for x in inputs if isinstance(x, Value)],
                              f"operand {i} is {type(v).__name__} {v!r}, expected a tensor", loc)
    types = tuple(v.type for v in inputs)
    definition = op_def(op)
    try:
        if definition.schema is not None:
            attrs = definition.schema.apply(op, attrs, types)
        result = place_result(op, definition.family, types, attrs, definition.infer(types, attrs))
    except OpTypeError as e:
        raise IRTypeError(op, types, str(e), loc) from None
    node = Node(op, tuple(inputs), attrs, loc=loc, meshes=tuple(ctx.mesh_stack))
    return _attach(ctx, node, result)


def _attach(ctx: TraceContext, node: Node, result: TensorType | tuple[TensorType, ...]) -> Any:
    node.id = len(ctx.graph.nodes)
    node.returns_tuple = isinstance(result, tuple)
    out_types = result if isinstance(result, tuple) else (result,)
    node.outputs = tuple(Value(t, node, i) for i, t in enumerate(out_types))
    ctx.graph.nodes.append(node)
    return node.outputs if node.returns_tuple else node.outputs[0]


def emit_node(node: Node, out_types: TensorType | tuple[TensorType, ...]) -> Any:
    """Append a prebuilt node (calls) with already-inferred result types."""
    ctx = require_trace(node.op)
    node.meshes = tuple(ctx.mesh_stack)
    return _attach(ctx, node, out_types)


def constant(value: float | int | bool, dtype: str | DType) -> Value:
    """A rank-0 constant of ``dtype`` recorded in the active trace."""
    dt = dtype_of(dtype)
    return emit("constant", (), {"value": value, "dtype": dt})


def lift_scalars(op: str, a: Any, b: Any) -> tuple[Value, Value]:
    """Turn a Python number operand into a rank-0 constant of the other operand's dtype.

    There is no implicit promotion: a float adopts the tensor's float dtype, an int adopts the
    tensor's dtype, and a float next to an integer tensor is refused.
    """
    if isinstance(a, Value) and isinstance(b, Value):
        return a, b
    if isinstance(a, Value):
        return a, _scalar_like(op, b, a)
    if isinstance(b, Value):
        return _scalar_like(op, a, b), b
    raise IRTypeError(op, [], f"needs at least one tensor operand, got {a!r} and {b!r}", user_source())


def _scalar_like(op: str, x: Any, like: Value) -> Value:
    dt = like.type.dtype
    if isinstance(x, bool):
        if not dt.is_bool:
            raise IRTypeError(op, [like.type], f"bool scalar {x!r} next to a {dt} tensor", user_source())
    elif isinstance(x, int):
        if dt.is_bool:
            raise IRTypeError(op, [like.type], f"int scalar {x!r} next to a bool tensor", user_source())
        if dt.is_int:
            info = torch.iinfo(dt.torch_dtype)
            if not info.min <= x <= info.max:
                raise IRTypeError(op, [like.type], f"int scalar {x} does not fit {dt} [{info.min}, {info.max}]",
                                  user_source())
    elif isinstance(x, float):
        if not dt.is_float:
            raise IRTypeError(
                op, [like.type],
                f"float scalar {x!r} next to a {dt} tensor: no implicit promotion; cast the tensor first",
                user_source(),
            )
    else:
        raise IRTypeError(op, [like.type], f"operand {x!r} ({type(x).__name__}) is not a tensor or number",
                          user_source())
    return constant(x, dt)

"""The traced HIR graph: typed values and the nodes that produce them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..types.shard import MeshSpec
from ..types.tensor_type import TensorType
from .source import SourceLoc

if TYPE_CHECKING:
    from .function import Function


class Value:
    """A typed symbolic tensor seen while tracing a ``@func`` body.

    Python operators record HIR ops (``a + b`` is ``tf.add(a, b)``); comparisons record boolean ops.
    """

    __slots__ = ("type", "producer", "index", "param")

    def __init__(self, type: TensorType, producer: Node | None = None, index: int = 0,
                 param: str | None = None) -> None:
        self.type = type
        self.producer = producer
        self.index = index
        self.param = param

    @property
    def shape(self) -> tuple:
        """The symbolic shape."""
        return self.type.shape

    @property
    def dtype(self):  # noqa: ANN201 - DType, re-exported for authoring convenience
        """The element type."""
        return self.type.dtype

    @property
    def ndim(self) -> int:
        """Number of axes."""
        return self.type.rank

    def __repr__(self) -> str:
        origin = f"param {self.param}" if self.param else (self.producer.op if self.producer else "?")
        return f"<Value {self.type} from {origin}>"

    def __bool__(self) -> bool:
        raise TypeError(
            "a traced tensor has no truth value: Python control flow may only branch on static "
            "values (shapes, ints); use tf.where for data-dependent selection"
        )

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        """torch's functions (``torch.relu``, ``F.silu``, ...) run on real tensors and cannot be traced: say so,
        and name the DSL op of the same name when there is one."""
        from .op import OPS, _ensure_loaded

        _ensure_loaded()
        name = getattr(func, "__name__", None) or str(func)
        module = getattr(func, "__module__", None) or "torch"
        spelled = f"{'torch' if module.startswith('torch._C') else module}.{name}"
        if name in OPS:
            hint = f"use tf.{name} (from tilefoundry.dsl import tf), which the trace records"
        else:
            hint = "write it with the DSL's ops (from tilefoundry.dsl import tf; dir(tf) lists them)"
        raise TypeError(f"{spelled} was called on a traced tensor inside a @func: torch functions run on real "
                        f"tensors, not on the values a @func traces; {hint}")

    # Python operators map onto the HIR ops of the same meaning.
    def __add__(self, o: Any) -> Value: return _binary("add", self, o)
    def __radd__(self, o: Any) -> Value: return _binary("add", o, self)
    def __sub__(self, o: Any) -> Value: return _binary("sub", self, o)
    def __rsub__(self, o: Any) -> Value: return _binary("sub", o, self)
    def __mul__(self, o: Any) -> Value: return _binary("mul", self, o)
    def __rmul__(self, o: Any) -> Value: return _binary("mul", o, self)
    def __truediv__(self, o: Any) -> Value: return _binary("div", self, o)
    def __rtruediv__(self, o: Any) -> Value: return _binary("div", o, self)
    def __pow__(self, o: Any) -> Value: return _binary("pow", self, o)
    def __rpow__(self, o: Any) -> Value: return _binary("pow", o, self)
    def __matmul__(self, o: Any) -> Value: return _binary("matmul", self, o)
    def __floordiv__(self, o: Any) -> Value: return _binary("floor_div", self, o)
    def __rfloordiv__(self, o: Any) -> Value: return _binary("floor_div", o, self)
    def __mod__(self, o: Any) -> Value: return _binary("mod", self, o)
    def __rmod__(self, o: Any) -> Value: return _binary("mod", o, self)
    # On bool tensors & | ~ are the logical ops (there are no bitwise ops on other dtypes).
    def __and__(self, o: Any) -> Value: return _binary("logical_and", self, o)
    def __rand__(self, o: Any) -> Value: return _binary("logical_and", o, self)
    def __or__(self, o: Any) -> Value: return _binary("logical_or", self, o)
    def __ror__(self, o: Any) -> Value: return _binary("logical_or", o, self)
    def __invert__(self) -> Value: return _unary("logical_not", self)
    def __neg__(self) -> Value: return _unary("neg", self)
    def __lt__(self, o: Any) -> Value: return _binary("lt", self, o)
    def __le__(self, o: Any) -> Value: return _binary("le", self, o)
    def __gt__(self, o: Any) -> Value: return _binary("gt", self, o)
    def __ge__(self, o: Any) -> Value: return _binary("ge", self, o)
    def __eq__(self, o: Any) -> Value: return _binary("eq", self, o)  # type: ignore[override]
    def __ne__(self, o: Any) -> Value: return _binary("ne", self, o)  # type: ignore[override]
    __hash__ = object.__hash__

    def __getitem__(self, key: Any) -> Value:
        """``x[:, :K]``, ``x[..., a:b]``, ``x[:, i]`` (an int drops the axis), ``x[None]``: slice + reshape ops."""
        from .indexing import index_value

        return index_value(self, key)

    def __len__(self) -> int:
        """The static extent of axis 0 (as ``len`` of a torch tensor)."""
        if not self.type.shape or not isinstance(self.type.shape[0], int):
            raise TypeError(f"len() of {self.type} needs a static leading axis")
        return self.type.shape[0]

    def __iter__(self) -> Any:
        """``x[0], x[1], ...`` over a static leading axis (as iterating a torch tensor)."""
        n = len(self)
        return (self[i] for i in range(n))


def _binary(op: str, a: Any, b: Any) -> Value:
    from .tracer import emit, lift_scalars

    a, b = lift_scalars(op, a, b)
    return emit(op, (a, b))


def _unary(op: str, a: Value) -> Value:
    from .tracer import emit

    return emit(op, (a,))


@dataclass(eq=False)
class Node:
    """One HIR operation: ``op`` applied to ``inputs`` with static ``attrs``.

    ``op == "call"`` invokes ``callee`` (a sibling Function) with every declared parameter;
    ``op == "call_module"`` invokes the function ``attrs["function"]`` (``callee``) of the child Module named
    ``attrs["child"]`` with its activations alone (its weights come from the reading that evaluates it).
    ``meshes`` are the ``with Mesh(...)`` scopes open around the op, outermost first; ``id`` is its position
    in its graph.
    """

    op: str
    inputs: tuple[Value, ...]
    attrs: dict[str, Any]
    outputs: tuple[Value, ...] = ()
    loc: SourceLoc | None = None
    meshes: tuple[MeshSpec, ...] = ()
    callee: Function | None = None
    returns_tuple: bool = False
    id: int = -1

    @property
    def mesh(self) -> MeshSpec | None:
        """The innermost mesh scope around the op (None outside every scope)."""
        return self.meshes[-1] if self.meshes else None

    def __repr__(self) -> str:
        outs = ", ".join(str(v.type) for v in self.outputs)
        return f"{self.op}({', '.join(str(v.type) for v in self.inputs)}) -> {outs}"


@dataclass(eq=False)
class Graph:
    """A traced function body: parameters, nodes in program order, and the output structure."""

    params: tuple[Value, ...]
    nodes: list[Node] = field(default_factory=list)
    outputs: Any = None  # a Value or nested tuples of Values

    def __str__(self) -> str:
        names: dict[int, str] = {}
        for v in self.params:
            names[id(v)] = f"%{v.param}"
        lines = []
        for node in self.nodes:
            for k, v in enumerate(node.outputs):
                names[id(v)] = f"%{node.id}" if len(node.outputs) == 1 else f"%{node.id}.{k}"
            outs = ", ".join(names[id(v)] for v in node.outputs)
            ins = ", ".join(names.get(id(v), "?") for v in node.inputs)
            target = f" @{node.callee.name}" if node.callee is not None else ""
            attrs = f" {node.attrs}" if node.attrs else ""
            types = ", ".join(str(v.type) for v in node.outputs)
            scope = f" in {' / '.join(str(m) for m in node.meshes)}" if node.meshes else ""
            lines.append(f"  {outs} = {node.op}{target}({ins}){attrs}{scope} : {types}")
        return "\n".join(lines)

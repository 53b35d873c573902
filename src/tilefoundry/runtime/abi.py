"""The ABI of a function body: :class:`ParamABI` and :class:`EntryABI`, and their derivation (spec 1.1.1).

The ABI reuses the IR type system: a parameter's dtype, shape (with DimVars for dynamic extents), storage
and layout all come from its :class:`~tilefoundry.ir.types.tensor_type.TensorType`. :func:`param_abi_of`
is the one place a ParamABI is derived from an IR parameter; :func:`entry_abi_of` builds a value-returning
function's EntryABI from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..ir.core.function import Function
from ..ir.core.graph import Value
from ..ir.core.module import Module
from ..ir.types.tensor_type import TensorType

__all__ = ["EntryABI", "ParamABI", "entry_abi_of", "param_abi_of"]


@dataclass(frozen=True)
class ParamABI:
    """One parameter of an entry: its name and its IR type (dtype / shape / storage / layout).

    A dynamic extent is whatever ``type.shape`` carries (a DimVar or an expression of DimVars); there is
    no separate dynamic-dim marker.
    """

    name: str
    type: TensorType

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"ParamABI name must be an identifier, got {self.name!r}")
        if not isinstance(self.type, TensorType):
            raise TypeError(
                f"ParamABI {self.name!r}: type must be a TensorType (the IR type the parameter is declared "
                f"with), got {type(self.type).__name__}"
            )

    def __str__(self) -> str:
        return f"{self.name}: {self.type}"


@dataclass(frozen=True)
class EntryABI:
    """The ABI of one entry: every parameter in declaration order, outputs trailing.

    Attributes:
        name: the entry (function) name.
        params: ALL parameters, inputs then ``output_count`` output parameters.
        output_count: how many trailing parameters are outputs (0 for a value-returning body).
    """

    name: str
    params: tuple[ParamABI, ...]
    output_count: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"EntryABI name must be a non-empty str, got {self.name!r}")
        if isinstance(self.params, (str, bytes)) or not hasattr(self.params, "__iter__"):
            raise TypeError(f"EntryABI {self.name!r}: params must be a sequence of ParamABI, got {self.params!r}")
        params = tuple(self.params)
        seen: set[str] = set()
        for p in params:
            if not isinstance(p, ParamABI):
                raise TypeError(
                    f"EntryABI {self.name!r}: params holds {p!r}, not a ParamABI; derive one with param_abi_of"
                )
            if p.name in seen:
                raise ValueError(f"EntryABI {self.name!r}: parameter {p.name!r} appears twice")
            seen.add(p.name)
        object.__setattr__(self, "params", params)
        count = self.output_count
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= len(params):
            raise ValueError(
                f"EntryABI {self.name!r}: output_count must be an int in [0, {len(params)}] (the trailing "
                f"output parameters), got {count!r}"
            )

    @property
    def input_count(self) -> int:
        """How many leading parameters are inputs: ``len(params) - output_count``."""
        return len(self.params) - self.output_count

    @property
    def input_params(self) -> tuple[ParamABI, ...]:
        """The leading ``input_count`` parameters."""
        return self.params[: self.input_count]

    @property
    def output_params(self) -> tuple[ParamABI, ...]:
        """The trailing ``output_count`` parameters."""
        return self.params[self.input_count :]

    def __str__(self) -> str:
        inputs = ", ".join(str(p) for p in self.input_params)
        outputs = ", ".join(str(p) for p in self.output_params)
        return f"{self.name}({inputs}{' -> ' + outputs if outputs else ''})"


def param_abi_of(var: Any) -> ParamABI:
    """The ParamABI of one IR parameter: its name and its TensorType, taken as they are.

    This is the single derivation site. ``var`` is a declared parameter (a ``Param`` of a ``@func``, a
    parameter ``Value`` of a traced graph) or any IR variable exposing ``name`` and ``type``.

    Raises:
        TypeError: ``var`` carries no name or no TensorType (e.g. an intermediate Value).
    """
    if isinstance(var, Value):
        if var.param is None:
            raise TypeError(
                f"param_abi_of takes a parameter; {var!r} is an intermediate value of a graph, not a parameter"
            )
        return ParamABI(var.param, var.type)
    name = getattr(var, "name", None)
    ty = getattr(var, "type", None)
    if not isinstance(name, str) or not isinstance(ty, TensorType):
        raise TypeError(
            f"param_abi_of takes an IR parameter with a name and a TensorType (a Param of a @func, a parameter "
            f"Value), got {type(var).__name__}"
        )
    return ParamABI(name, ty)


def entry_abi_of(fn: Function) -> EntryABI:
    """The EntryABI of a HIR Function: one ParamABI per declared parameter (weights included), in
    declaration order, ``output_count=0`` (a value-returning body, not an out-param entry).

    Raises:
        TypeError: ``fn`` is not a Function (a Module: pick one of its functions; a plain Python function:
            decorate it with ``@func``).
    """
    if isinstance(fn, Module):
        raise TypeError(
            f"entry_abi_of takes one Function; Module {fn.name!r} has functions "
            f"{', '.join(fn.functions) or 'none'}: pass one of them, e.g. entry_abi_of(mod.functions[name])"
        )
    if not isinstance(fn, Function):
        raise TypeError(
            f"entry_abi_of takes a HIR Function (a @func), got {type(fn).__name__}; decorate the Python function "
            "with @func first"
        )
    return EntryABI(fn.name, tuple(param_abi_of(p) for p in fn.params), 0)

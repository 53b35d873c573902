"""ParamABI / EntryABI / param_abi_of / entry_abi_of and the RuntimeFunction base (spec 1.1.1)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from tilefoundry import func, module
from tilefoundry.dsl import ConstTensor, DimVar, Tensor
from tilefoundry.ir.core import Param
from tilefoundry.ir.types.tensor_type import TensorType
from tilefoundry.runtime import EntryABI, ParamABI, RuntimeFunction, entry_abi_of, param_abi_of

n = DimVar("n", 1, 64)


@func
def scale(x: Tensor[(n, 4), "bf16"], g: ConstTensor[(4,), "bf16"], shift: Tensor[(n, 4), "bf16"]):
    return x * g + shift


def _abi(out: int = 0) -> EntryABI:
    f32 = TensorType((n, 4), "f32")
    return EntryABI("k", (ParamABI("a", f32), ParamABI("b", f32), ParamABI("c", f32)), out)


def test_param_abi_reuses_the_ir_type_and_keeps_dimvars() -> None:
    p = param_abi_of(scale.params[0])
    assert p == ParamABI("x", scale.params[0].type)
    assert p.type is scale.params[0].type, "the TensorType is reused, not restated"
    assert p.type.shape[0] == n and isinstance(p.type.shape[0], DimVar), "a dynamic dim is the DimVar itself"
    assert str(p.type.dtype) == "bf16"
    graph_param = scale.graph.params[1]
    assert param_abi_of(graph_param) == ParamABI("g", TensorType((4,), "bf16"))


def test_param_abi_of_refuses_what_is_not_a_parameter() -> None:
    intermediate = scale.graph.nodes[0].outputs[0]
    with pytest.raises(TypeError, match="intermediate value of a graph, not a parameter"):
        param_abi_of(intermediate)
    with pytest.raises(TypeError, match="name and a TensorType"):
        param_abi_of("x")


def test_param_abi_validates_its_fields_and_is_frozen() -> None:
    with pytest.raises(TypeError, match="type must be a TensorType"):
        ParamABI("x", "f32")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="identifier"):
        ParamABI("not a name", TensorType((4,), "f32"))
    p = ParamABI("x", TensorType((4,), "f32"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.name = "y"  # type: ignore[misc]


def test_entry_abi_of_one_param_per_declared_parameter_in_order() -> None:
    abi = entry_abi_of(scale)
    assert abi.name == "scale"
    assert [p.name for p in abi.params] == ["x", "g", "shift"], "weights included, declaration order"
    assert abi.params == tuple(param_abi_of(p) for p in scale.params)
    assert abi.output_count == 0 and abi.input_count == 3
    assert abi.input_params == abi.params and abi.output_params == ()


def test_entry_abi_of_refuses_modules_and_plain_functions() -> None:
    @module
    class M:
        @func
        def f(x: Tensor[(4,), "f32"]):
            return x

    with pytest.raises(TypeError, match=r"Module 'M' has functions f: pass one of them"):
        entry_abi_of(M)

    def plain(x):
        return x

    with pytest.raises(TypeError, match="decorate the Python function with @func"):
        entry_abi_of(plain)  # type: ignore[arg-type]


def test_entry_abi_counts_and_slices() -> None:
    abi = _abi(out=1)
    assert abi.input_count == 2
    assert [p.name for p in abi.input_params] == ["a", "b"]
    assert [p.name for p in abi.output_params] == ["c"]
    everything_out = _abi(out=3)
    assert everything_out.input_count == 0 and everything_out.input_params == ()
    assert len(everything_out.output_params) == 3


def test_entry_abi_refuses_bad_counts_duplicates_and_non_params() -> None:
    t = TensorType((4,), "f32")
    with pytest.raises(ValueError, match=r"output_count must be an int in \[0, 1\]"):
        EntryABI("k", (ParamABI("a", t),), 2)
    with pytest.raises(ValueError, match=r"output_count"):
        EntryABI("k", (ParamABI("a", t),), -1)
    with pytest.raises(ValueError, match="'a' appears twice"):
        EntryABI("k", (ParamABI("a", t), ParamABI("a", t)))
    with pytest.raises(TypeError, match="not a ParamABI; derive one with param_abi_of"):
        EntryABI("k", (Param("a", t, False),))  # type: ignore[arg-type]
    assert EntryABI("k", [ParamABI("a", t)]).params == (ParamABI("a", t),), "a list is kept as a tuple"


def test_runtime_function_base_call_raises_naming_the_subclass_to_write() -> None:
    body = RuntimeFunction(entry_abi_of(scale))
    assert body.type == entry_abi_of(scale)
    with pytest.raises(NotImplementedError, match=r"base class.*'scale'.*ScaleBody\(RuntimeFunction\).*__call__"):
        body(torch.zeros(2, 4))

    class Forgot(RuntimeFunction):
        pass

    with pytest.raises(NotImplementedError, match=r"Forgot does not override __call__.*Forgot.__call__"):
        Forgot(entry_abi_of(scale))()


def test_runtime_function_subclass_runs_and_type_must_be_an_entry_abi() -> None:
    class Fused(RuntimeFunction):
        def __call__(self, x, g, shift):
            return torch.addcmul(shift, x, g)

    body = Fused(entry_abi_of(scale))
    x, g, s = torch.ones(2, 4), torch.full((4,), 2.0), torch.ones(2, 4)
    assert torch.equal(body(x, g, s), torch.full((2, 4), 3.0))
    with pytest.raises(TypeError, match=r"takes an EntryABI, got Function; derive one with entry_abi_of"):
        Fused(scale)  # type: ignore[arg-type]

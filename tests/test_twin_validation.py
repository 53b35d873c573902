"""Twin kernels are held to their @func like the reference runner: arguments are bound with the evaluator's own
routine (dtype, rank, extents, DimVar ranges and agreement) and the result must be the declared structure."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch

from tilefoundry import func, module
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, tf
from tilefoundry.runtime import RuntimeFunction, entry_abi_of, runtime_func, runtime_module
from tilefoundry.runtime.resource import DictResource

seq = DimVar("seq", 1, 8)

RESULTS: dict[str, Any] = {}


@module
class Net:
    @func
    def proj(x: Tensor[(seq, 4), "f32"], w: ConstTensor[(4, 4), "f32"]):
        return tf.matmul(x, w)

    @func
    def pair(x: Tensor[(seq, 4), "f32"], y: Tensor[(seq, 4), "f32"]):
        return x + y, (x - y, x * y)

    @func
    def ids(t: Tensor[(seq,), "i64"]):
        return t + 1


@runtime_module(Net)
class NetTwin:
    @runtime_func
    def proj(self, x, w):
        return RESULTS.get("proj", x @ w)

    @runtime_func
    def pair(self, x, y):
        return RESULTS.get("pair", (x + y, (x - y, x * y)))

    @runtime_func
    def ids(self, t):
        return RESULTS.get("ids", t + 1)


@pytest.fixture
def twin() -> NetTwin:
    RESULTS.clear()
    return NetTwin().load(DictResource({"w": torch.eye(4)}))


def test_matching_arguments_run(twin: NetTwin) -> None:
    x = torch.randn(3, 4)
    assert torch.equal(twin.proj(x), x)
    assert torch.equal(twin.ids(torch.tensor([1, 2])), torch.tensor([2, 3]))


@pytest.mark.parametrize(("args", "error", "words"), [
    ((torch.randn(9, 4),), ValueError,
     "argument x (Tensor[(seq, 4), f32]): DimVar seq = 9 is outside its range [1, 8)"),
    ((torch.randn(0, 4),), ValueError, "DimVar seq = 0 is outside its range [1, 8)"),
    ((torch.ones(3, 4, dtype=torch.int64),), TypeError, "argument x has dtype torch.int64, declared"),
    ((torch.ones(3, 4, dtype=torch.bool),), TypeError, "argument x has dtype torch.bool"),
    ((torch.randn(3, 5),), ValueError, "argument x has shape (3, 5), declared Tensor[(seq, 4), f32] (axis 1: 5 != 4)"),
    ((torch.randn(3, 4, 1),), TypeError, "argument x has rank 3"),
    (([[1.0] * 4],), TypeError, "argument x must be a torch.Tensor (Tensor[(seq, 4), f32]), got list"),
])
def test_a_kernel_refuses_activations_that_break_the_declaration(twin: NetTwin, args: tuple[Any, ...],
                                                                 error: type[Exception], words: str) -> None:
    with pytest.raises(error, match=re.escape(words)) as info:
        twin.proj(*args)
    assert str(info.value).startswith("NetTwin Net.proj: ")


def test_a_float_activation_of_another_dtype_is_converted_to_the_declared_one(twin: NetTwin) -> None:
    x = torch.randn(3, 4, dtype=torch.float64)  # as torch.as_tensor(x, dtype=declared) binds it
    out = twin.proj(x)
    assert out.dtype == torch.float32 and torch.equal(out, x.float())


def test_dimvars_must_agree_across_arguments(twin: NetTwin) -> None:
    with pytest.raises(ValueError, match=r"NetTwin Net\.pair: .*DimVar seq is 3 from argument x but 4 in y"):
        twin.pair(torch.randn(3, 4), torch.randn(4, 4))


def test_an_integer_kernel_refuses_floats(twin: NetTwin) -> None:
    with pytest.raises(TypeError, match=r"NetTwin Net\.ids: .*argument t has dtype torch\.float32"):
        twin.ids(torch.tensor([1.0]))


@pytest.mark.parametrize(("kernel", "result", "words"), [
    ("proj", "a string", "returned a str at output, where a tensor (Tensor[(seq, 4), f32]) is declared"),
    ("proj", None, "returned None at output"),
    ("proj", (torch.zeros(3, 4),), "returned a tuple of 1 at output, where a tensor"),
    ("proj", torch.zeros(3, 4, dtype=torch.float64), "returned a torch.float64 tensor of shape (3, 4) at output"),
    ("proj", torch.zeros(3, 3), "returned a tensor of shape (3, 3) at output, declared Tensor[(seq, 4), f32] = (3, 4)"),
    ("proj", torch.zeros(12), "returned a torch.float32 tensor of shape (12,) at output"),
    ("pair", torch.zeros(3, 4), "returned a tensor at output, where a tuple of 2 is declared"),
    ("pair", [torch.zeros(3, 4), (torch.zeros(3, 4), torch.zeros(3, 4))], "returned a list at output"),
    ("pair", (torch.zeros(3, 4), torch.zeros(3, 4)), "returned a tensor at output[1], where a tuple of 2"),
    ("pair", (torch.zeros(3, 4), (torch.zeros(3, 4),)), "returned a tuple of 1 at output[1]"),
    ("pair", (torch.zeros(3, 4), (torch.zeros(3, 4), "x")), "returned a str at output[1][1]"),
])
def test_a_kernel_whose_result_is_not_the_declared_structure_is_refused(twin: NetTwin, kernel: str, result: Any,
                                                                        words: str) -> None:
    RESULTS[kernel] = result
    args = (torch.randn(3, 4),) if kernel == "proj" else (torch.randn(3, 4), torch.randn(3, 4))
    with pytest.raises(TypeError, match=re.escape(words)) as info:
        getattr(twin, kernel)(*args)
    assert str(info.value).startswith(f"NetTwin Net.{kernel} returned ")
    assert f"a kernel returns what @func {kernel} declares" in str(info.value)


def test_a_runtime_function_body_is_held_to_the_same_rules() -> None:
    class Body(RuntimeFunction):
        def __call__(self, x: torch.Tensor, w: torch.Tensor) -> Any:
            return None

    @runtime_module(Net)
    class BodyTwin:
        proj = Body(entry_abi_of(Net.functions["proj"]))
        pair = NetTwin.pair.impl
        ids = NetTwin.ids.impl

    twin = BodyTwin().load(DictResource({"w": torch.eye(4)}))
    with pytest.raises(ValueError, match=r"BodyTwin Net\.proj: .*DimVar seq = 8 is outside its range"):
        twin.proj(torch.randn(8, 4))
    with pytest.raises(TypeError, match=r"BodyTwin Net\.proj returned None at output"):
        twin.proj(torch.randn(2, 4))

"""What model sources written for the reference implementation use, round 2 (issue 24).

Each test is one habit of those sources that failed here before: a name imported from
``tilefoundry.evaluator``, ``Module.entry_function()`` / ``Module.lookup`` / ``Param.is_const``, upper-case
``ReduceKind`` members, ``DimVarRangePat`` given the DimVar's name, an activation of another float dtype passed to
a call (converted, as ``torch.as_tensor(x, dtype=declared)``), a member named ``module``, and the exception classes
and check-record keys their tests assert.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tilefoundry import func, module
from tilefoundry.dsl import ConstTensor, DimVar, DimVarRangePat, ReduceKind, Tensor, tf
from tilefoundry.ir.core.errors import ModuleDefinitionError
from tilefoundry.ir.core.weights import WeightMismatchError
from tilefoundry.runtime import DictResource, NotLoadedError, SafetensorsResource, runtime_func, runtime_module
from tilefoundry.runtime.check import allclose, check, equal, rel_l2
from tilefoundry.runtime.errors import TwinDefinitionError
from tilefoundry.runtime.prepare import PrepareError
from tilefoundry.runtime.resource.errors import CheckpointError

S = DimVar("n_resource", 1, 9)


@module(entry="step")
class Block:
    @func
    def step(x: Tensor[(4,), "bf16"], w: ConstTensor[(4,), "bf16"]):
        return x * w

    @func
    def peak(x: Tensor[(S, 4), "f32"]):
        return tf.reduce(x, axes=(-1,), keepdim=False, kind=ReduceKind.ABS_MAX)


def test_to_torch_dtype_is_exported_by_the_evaluator_package() -> None:
    from tilefoundry.evaluator import to_torch_dtype

    assert to_torch_dtype("bf16") is torch.bfloat16


def test_entry_function_lookup_and_is_const() -> None:
    assert Block.entry_function() is Block.functions["step"]
    assert Block.lookup("peak") is Block.functions["peak"]
    x, w = Block.functions["step"].params
    assert w.is_const and not x.is_const
    loaded = Block.load(DictResource({"w": torch.ones(4, dtype=torch.bfloat16)}))
    entry = loaded.entry_function()
    assert torch.equal(entry(torch.ones(4, dtype=torch.bfloat16)), torch.ones(4, dtype=torch.bfloat16))

    @module
    class NoEntry:
        @func
        def f(x: Tensor[(2,), "f32"]):
            return x + 1.0

    assert NoEntry.entry_function() is None


@pytest.mark.parametrize("name", ["entry_function", "lookup"])
def test_a_member_may_not_take_the_names_of_entry_function_or_lookup(name: str) -> None:
    def f(x: Tensor[(2,), "f32"]):
        return x + 1.0

    f.__name__ = name
    with pytest.raises(ModuleDefinitionError, match=rf"function '{name}' takes the reserved name '{name}'"):
        module(type("Clash", (), {name: func(f)}))


def test_upper_case_reduce_kinds_are_the_lower_case_ones() -> None:
    assert ReduceKind.ABS_MAX is ReduceKind.abs_max and ReduceKind.SUM is ReduceKind.sum
    x = torch.tensor([[1.0, -3.0, 2.0, 0.5]])
    assert torch.equal(Block.peak(x), torch.tensor([3.0]))

    @func
    def by_name(x: Tensor[(2, 4), "f32"]):
        return tf.reduce(x, axes=(-1,), keepdim=False, kind="MAX")

    assert torch.equal(by_name(torch.arange(8.0).reshape(2, 4)), torch.tensor([3.0, 7.0]))


def test_a_dispatch_pattern_may_name_its_dimvar() -> None:
    @module(entry="step")
    class Dispatch:
        @func
        def step(x: Tensor[(S, 4), "f32"]):
            pass

        @step.specialize(DimVarRangePat("n_resource", 1, 5))
        def few(x):
            return x + 1.0

        @step.specialize(DimVarRangePat("n_resource", 5, 9))
        def many(x):
            return x * 2.0

    assert torch.equal(Dispatch.step(torch.ones(2, 4)), torch.full((2, 4), 2.0))
    assert torch.equal(Dispatch.step(torch.ones(6, 4)), torch.full((6, 4), 2.0) * 1.0)
    assert torch.equal(Dispatch.step(torch.full((6, 4), 3.0)), torch.full((6, 4), 6.0))
    with pytest.raises(ModuleDefinitionError, match=r"'nope' is no axis of step's activations"):
        Dispatch.functions["step"].specialize(DimVarRangePat("nope", 1, 2))
    with pytest.raises(ValueError, match=r"takes a DimVar or a DimVar's name first, got an empty name"):
        DimVarRangePat("", 1, 2)


def test_a_float_activation_of_another_dtype_is_converted_and_an_integer_one_refused() -> None:
    @func
    def scale(x: Tensor[(4,), "bf16"], pos: Tensor[(4,), "i64"]):
        return x * 2.0, pos + 1

    x = torch.tensor([1.0, 2.5, -3.0, 0.1])  # f32, declared bf16: converted as torch.as_tensor would
    y, _ = scale(x, torch.arange(4))
    assert y.dtype == torch.bfloat16 and torch.equal(y, x.to(torch.bfloat16) * 2.0)
    with pytest.raises(TypeError, match=r"argument pos has dtype torch.float32, declared Tensor\[\(4,\), i64\]"):
        scale(x, torch.arange(4.0))


def test_a_weight_stays_strict_about_its_dtype() -> None:
    with pytest.raises(WeightMismatchError, match=r"weight w: the checkpoint holds torch.float32 \(4,\), declared "):
        Block.load(DictResource({"w": torch.ones(4)}))
    x = torch.ones(4, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match=r"argument w has dtype torch.float32, declared Tensor\[\(4,\), bf16\]"):
        Block.step(x, torch.ones(4))  # a weight passed as an argument: not converted either


def test_a_member_named_module_is_authored_reached_through_lookup_and_refused_by_a_twin() -> None:
    @module(entry="module")
    class Named:
        @func
        def module(x: Tensor[(2,), "f32"]):
            return x * 3.0

    assert torch.equal(Named.module(torch.ones(2)), torch.full((2,), 3.0))
    loaded = Named.load(DictResource({}))
    assert loaded.module is Named  # the reserved accessor: the Module itself
    assert torch.equal(loaded.lookup("module")(torch.ones(2)), torch.full((2,), 3.0))
    with pytest.raises(TwinDefinitionError, match=r"has a function named 'module'"):
        runtime_module(Named)


def test_the_exception_classes_the_reference_tests_assert(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"entry='absent' names no function") as info:
        @module(entry="absent")
        class Absent:
            @func
            def f(x: Tensor[(2,), "f32"]):
                return x

    assert isinstance(info.value, ModuleDefinitionError)
    with pytest.raises(FileNotFoundError, match=r"holds neither") as found:
        SafetensorsResource(str(tmp_path), device="cpu").load("anything")
    assert isinstance(found.value, CheckpointError)

    @runtime_module(Block)
    class BlockTwin:
        @runtime_func
        def step(self, x, w):
            return x * w

        @runtime_func
        def peak(self, x):
            return x.abs().amax(-1)

    with pytest.raises(KeyError) as unbound:
        BlockTwin().step(torch.ones(4, dtype=torch.bfloat16))
    assert isinstance(unbound.value, NotLoadedError) and str(unbound.value).startswith("BlockTwin")


def test_check_records_carry_the_reference_key_names() -> None:
    fn = Block.functions["peak"]
    x = torch.tensor([[1.0, -3.0, 2.0, 0.5]])
    report = check(lambda x: torch.tensor([3.5]), fn, (x,), expect={"output": [allclose(atol=0.1, rtol=0.0)]})
    (result,) = report.outputs[0].results
    assert result.values["max_violation"] == pytest.approx(0.4) and not result.passed
    report = check(lambda x: torch.tensor([3.0]), fn, (x,), expect={"output": [equal()]})
    values = report.outputs[0].results[0].values
    assert (values["mismatched"], values["elements"]) == (0.0, 1.0)
    zero = torch.zeros(1, 4)
    report = check(lambda x: torch.tensor([0.5]), fn, (zero,), expect={"output": [rel_l2(max=1.0)]})
    assert report.outputs[0].results[0].values["absolute_l2"] == pytest.approx(0.5)


def test_a_cloned_module_reads_its_own_weights() -> None:
    copy = Block.cloned()
    assert copy is not Block and copy.name == Block.name and copy.functions == Block.functions
    loaded = copy.load(DictResource({"w": torch.full((4,), 2.0, dtype=torch.bfloat16)}))
    assert torch.equal(loaded(torch.ones(4, dtype=torch.bfloat16)), torch.full((4,), 2.0, dtype=torch.bfloat16))


def test_prepare_takes_fp8_weights_and_refuses_a_non_finite_one(tmp_path: Path) -> None:
    @module(entry="f")
    class Fp8:
        @func
        def f(x: Tensor[(4,), "f32"], w: ConstTensor[(4,), "fp8e4m3"]):
            return x * tf.cast(w, "f32")

    good = torch.tensor([1.0, -2.0, 0.5, 4.0]).to(torch.float8_e4m3fn)
    Fp8.prepare(DictResource({"w": good}), str(tmp_path / "good"))
    assert (tmp_path / "good").is_dir()
    bad = torch.tensor([1.0, float("nan"), 0.5, 4.0]).to(torch.float8_e4m3fn)
    with pytest.raises(PrepareError, match=r"weight w: 1 NaN and 0 Inf values of 4"):
        Fp8.prepare(DictResource({"w": bad}), str(tmp_path / "bad"))

"""Dispatch variants: DimVarRangePat and @f.specialize (issue 11)."""

from __future__ import annotations

import pytest
import torch

from tilefoundry import func, module
from tilefoundry.dsl import ConstTensor, DimVar, DimVarRangePat, Tensor, tf
from tilefoundry.ir.core.errors import MissingWeightError, ModuleDefinitionError
from tilefoundry.ir.core.loaded import LoadedModule
from tilefoundry.runtime import DictResource, runtime_func, runtime_module

S = DimVar("S", 1, 16)


def _model():  # noqa: ANN202
    @module(entry="step")
    class Model:
        @func
        def step(x: Tensor[(S, 4), "f32"], w: ConstTensor[(4, 4), "f32"]):
            pass

        @step.specialize(DimVarRangePat(S, 1, 2))
        def decode(x, w_last: ConstTensor[(4, 4), "f32"]):
            # S is narrowed to [1, 2) here, so x[-1:] is provably inside the axis.
            return tf.matmul(x[-1:], w_last) + x

        @step.specialize(DimVarRangePat(S, 2, 16))
        def prefill(x, w):
            return tf.matmul(x, w)

        @func
        def twice(x: Tensor[(S, 4), "f32"], w: ConstTensor[(4, 4), "f32"]):
            return step(x, w) * 2.0

        def forward(self, x):
            return self.step(x)

    return Model


@pytest.fixture()
def weights() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {"w": torch.randn(4, 4, generator=g), "w_last": torch.randn(4, 4, generator=g)}


def test_a_call_dispatches_on_the_runtime_extent(weights) -> None:  # noqa: ANN001
    Model = _model()
    loaded = Model.load(DictResource(weights))
    w, w_last = weights["w"], weights["w_last"]
    for n in (1, 2, 5, 15):
        x = torch.randn(n, 4)
        want = x @ w_last + x if n == 1 else x @ w
        assert torch.equal(loaded.step(x), want)
        assert torch.equal(loaded(x), want)
        assert torch.equal(loaded.twice(x), want * 2.0), "a sibling call dispatches too"
    x3 = torch.randn(3, 4)
    assert torch.equal(Model.step(x3, w), x3 @ w), "the unread Module's runner dispatches on its arguments"


def test_variants_are_declared_on_the_base_and_traced_with_the_narrowed_dimvar(weights) -> None:  # noqa: ANN001
    Model = _model()
    step = Model.functions["step"]
    assert [(v.name, v.pattern.lo, v.pattern.hi) for v in step.variants] == [("decode", 1, 2), ("prefill", 2, 16)]
    assert "decode" not in Model.functions and "prefill" not in Model.functions
    decode = step.variants[0]
    assert decode.params[0].type.shape[0] == DimVar("S", 1, 2)
    assert str(step.output_types) == "Tensor[(S, 4), f32]"
    assert set(Model.weights) == {"w", "w_last"}
    with pytest.raises(ModuleDefinitionError, match=r"step dispatches to its variants \(decode, prefill\)"):
        _ = step.graph


def test_only_the_selected_variants_weights_must_be_present(weights) -> None:  # noqa: ANN001
    Model = _model()
    x1, x3 = torch.randn(1, 4), torch.randn(3, 4)
    prefill_only = LoadedModule(Model, {"w": weights["w"]}, ())
    assert torch.equal(prefill_only.step(x3), x3 @ weights["w"])
    with pytest.raises(MissingWeightError, match=r"LoadedModule 'Model'.step needs the weight w_last, which this "
                                                 r"reading does not hold \(it holds: w\)"):
        prefill_only.step(x1)
    with pytest.raises(MissingWeightError, match=r"Model.w_last: the reading of Model holds no constant 'w_last', "
                                                 r"which step \(variant decode\) needs"):
        prefill_only.twice(x1)


def test_only_the_selected_variants_weights_must_be_placed(weights) -> None:  # noqa: ANN001
    Model = _model()
    x1, x3 = torch.randn(1, 4), torch.randn(3, 4)
    elsewhere = LoadedModule(Model, {"w": weights["w"], "w_last": weights["w_last"].to("meta")}, ())
    assert torch.equal(elsewhere.step(x3), x3 @ weights["w"]), "decode's weight sits elsewhere; prefill runs"
    with pytest.raises(ValueError, match=r"constant Model.w_last on meta"):
        elsewhere.step(x1)
    with pytest.raises(ValueError, match=r"reads constant Model.w_last on meta, but the call runs on cpu"):
        elsewhere.twice(x1)


def test_the_unread_runner_needs_the_variant_weights_declared_on_the_base(weights) -> None:  # noqa: ANN001
    Model = _model()
    with pytest.raises(TypeError, match=r"its variant decode needs the weight w_last, which step does not declare"):
        Model.step(torch.randn(1, 4), weights["w"])


def test_a_child_function_with_variants_dispatches_from_its_parent(weights) -> None:  # noqa: ANN001
    Inner = _model()

    @module(entry="outer")
    class Outer:
        inner = Inner

        @func
        def outer(x: Tensor[(S, 4), "f32"]):
            return inner(x) + 1.0

    loaded = Outer.load(DictResource({f"inner.{k}": v for k, v in weights.items()}))
    x1, x4 = torch.randn(1, 4), torch.randn(4, 4)
    assert torch.equal(loaded(x1), x1 @ weights["w_last"] + x1 + 1.0)
    assert torch.equal(loaded(x4), x4 @ weights["w"] + 1.0)


def test_a_twin_kernel_stands_for_the_base(weights) -> None:  # noqa: ANN001
    Model = _model()

    @runtime_module(Model)
    class Twin:
        @runtime_func
        def step(self, x, w):
            return x @ w

        @runtime_func
        def twice(self, x, w):
            return x @ w * 2.0

    twin = Twin().load(DictResource(weights))
    x = torch.randn(3, 4)
    assert torch.equal(twin(x), x @ weights["w"])


def test_a_gap_is_refused_at_module_definition_naming_it() -> None:
    with pytest.raises(ModuleDefinitionError, match=r"f: its variants leave \[4, 6\) of S uncovered .* add a variant "
                                                    r"for the gap"):
        @module
        class Gap:
            @func
            def f(x: Tensor[(S, 4), "f32"]):
                pass

            @f.specialize(DimVarRangePat(S, 1, 4))
            def small(x):
                return x

            @f.specialize(DimVarRangePat(S, 6, 16))
            def large(x):
                return x

    with pytest.raises(ModuleDefinitionError, match=r"leave \[15, 16\) of S uncovered"):
        @module
        class Short:
            @func
            def f(x: Tensor[(S, 4), "f32"]):
                pass

            @f.specialize(DimVarRangePat(S, 1, 15))
            def most(x):
                return x


def test_an_overlap_is_refused_when_the_variant_is_declared() -> None:
    with pytest.raises(ModuleDefinitionError, match=r"variants small \(S in \[1, 4\)\) and large \(S in \[3, 16\)\) "
                                                    r"overlap on \[3, 4\) of S"):
        @module
        class Overlap:
            @func
            def f(x: Tensor[(S, 4), "f32"]):
                pass

            @f.specialize(DimVarRangePat(S, 1, 4))
            def small(x):
                return x

            @f.specialize(DimVarRangePat(S, 3, 16))
            def large(x):
                return x


def test_a_bare_function_with_variants_checks_its_partition_on_first_use() -> None:
    @func
    def g(x: Tensor[(S, 2), "f32"]):
        pass

    @g.specialize(DimVarRangePat(S, 1, 8))
    def low(x):
        return x + 1.0

    with pytest.raises(ModuleDefinitionError, match=r"leave \[8, 16\) of S uncovered"):
        g(torch.zeros(3, 2))

    @g.specialize(DimVarRangePat(S, 8))  # hi defaults to the DimVar's end
    def high(x):
        return x - 1.0

    assert torch.equal(g(torch.zeros(3, 2)), torch.ones(3, 2))
    assert torch.equal(g(torch.zeros(9, 2)), -torch.ones(9, 2))


@pytest.mark.parametrize("args,exc,reason", [
    ((S, 2, 2), ValueError, r"DimVarRangePat\(S, 2, 2\) is empty"),
    ((S, 0, 4), ValueError, r"reaches outside S's range \[1, 16\)"),
    ((S, 1, 17), ValueError, r"reaches outside"),
    ((4, 1, 2), TypeError, r"takes a DimVar or a DimVar's name first, got 4"),
    ((S, 1.0, 2), TypeError, r"bounds must be ints"),
    (("S", 3, 3), ValueError, r"DimVarRangePat\('S', 3, 3\) is empty"),
    (("S", 1, None), TypeError, r"bounds must be ints \(hi too, where the DimVar is given by name\)"),
])
def test_bad_patterns_are_refused(args: tuple, exc: type, reason: str) -> None:
    with pytest.raises(exc, match=reason):
        DimVarRangePat(*args)


def test_a_base_with_a_body_or_a_foreign_dimvar_is_refused() -> None:
    with pytest.raises(ModuleDefinitionError, match=r"h has a body of its own; a function dispatching to variants is "
                                                    r"written with the body `pass`"):
        @func
        def h(x: Tensor[(S, 2), "f32"]):
            return x

        h.specialize(DimVarRangePat(S, 1, 16))

    other = DimVar("T", 1, 8)
    with pytest.raises(ModuleDefinitionError, match=r"DimVar\('T', 1, 8\) is no axis of k's activations"):
        @func
        def k(x: Tensor[(S, 2), "f32"]):
            pass

        k.specialize(DimVarRangePat(other, 1, 8))


def test_a_variant_takes_the_base_activations() -> None:
    @func
    def base(x: Tensor[(S, 2), "f32"], y: Tensor[(S, 2), "f32"]):
        pass

    with pytest.raises(ModuleDefinitionError, match=r"variant swapped takes the activations \(y, x\), but base takes "
                                                    r"\(x, y\)"):
        @base.specialize(DimVarRangePat(S, 1, 16))
        def swapped(y, x):
            return x

    with pytest.raises(ModuleDefinitionError, match=r"variant retyped declares x: Tensor\[\(S, 2\), bf16\]"):
        @base.specialize(DimVarRangePat(S, 1, 16))
        def retyped(x: Tensor[(S, 2), "bf16"], y):
            return y


def test_variants_returning_different_types_are_refused() -> None:
    with pytest.raises(ModuleDefinitionError, match=r"variants a and b return different types"):
        @module
        class Mixed:
            @func
            def f(x: Tensor[(S, 4), "f32"]):
                pass

            @f.specialize(DimVarRangePat(S, 1, 2))
            def a(x):
                return x

            @f.specialize(DimVarRangePat(S, 2, 16))
            def b(x):
                return tf.reduce(x, kind="sum")


def test_load_and_prepare_pass_over_a_variant_weight_the_checkpoint_lacks(weights, tmp_path) -> None:  # noqa: ANN001
    from tilefoundry.runtime import SafetensorsResource

    Model = _model()
    only_w = DictResource({"w": weights["w"]})
    x1, x3 = torch.randn(1, 4), torch.randn(3, 4)
    loaded = Model.load(only_w)
    assert set(loaded.constants) == {"w"}
    assert torch.equal(loaded(x3), x3 @ weights["w"])
    with pytest.raises(MissingWeightError, match=r"needs the weight w_last"):
        loaded(x1)

    @runtime_module(Model)
    class Twin:
        @runtime_func
        def step(self, x, w):
            return x @ w

        @runtime_func
        def twice(self, x, w):
            return x @ w * 2.0

    assert torch.equal(Twin().load(only_w)(x3), x3 @ weights["w"])

    Model.prepare(only_w, str(tmp_path / "prepared"))
    assert torch.equal(Model.load(SafetensorsResource(str(tmp_path / "prepared"), device="cpu"))(x3),
                       x3 @ weights["w"])
    with pytest.raises(KeyError, match=r"'w'"):
        Model.load(DictResource({"w_last": weights["w_last"]}))  # a weight the base declares stays required

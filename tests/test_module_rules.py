"""Module, reading and twin rules for member names, __call__, converters calling children, missing weights."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from tilefoundry import func, module
from tilefoundry.dsl import ConstTensor, Tensor, tf
from tilefoundry.ir.core.errors import MissingWeightError, ModuleDefinitionError
from tilefoundry.ir.core.loaded import LoadedModule
from tilefoundry.ir.core.module import AUTHORABLE, RESERVED_NAMES, Module
from tilefoundry.runtime import DictResource, RuntimeModule, SafetensorsResource, runtime_func, runtime_module

DOCS = Path(__file__).resolve().parents[1] / "docs" / "authoring.md"


def test_the_reserved_names_are_listed_once_and_in_the_docs() -> None:
    assert set(RESERVED_NAMES) == {"module", "name", "entry", "functions", "modules", "methods", "target",
                                   "topologies", "weights", "constants", "load", "prepare", "renamed", "lookup",
                                   "entry_function", "cloned"}
    text = DOCS.read_text()
    block = text.split("<!-- reserved-names")[1].split("<!-- /reserved-names -->")[0]
    listed = dict(re.findall(r"^- `(\w+)`: (.+)$", block, flags=re.M))
    assert listed == RESERVED_NAMES


def test_every_reserved_name_is_answered_by_module_reading_and_twin() -> None:
    @module(entry="f")
    class Small:
        @func
        def f(x: Tensor[(2,), "f32"], w: ConstTensor[(2,), "f32"]):
            return x * w

    @runtime_module(Small)
    class SmallTwin:
        @runtime_func
        def f(self, x, w):
            return x * w

    reading = Small.load(DictResource({"w": torch.ones(2)}))
    twin = SmallTwin().load(DictResource({"w": torch.ones(2)}))
    on_module = {"name", "entry", "functions", "modules", "methods", "target", "topologies", "weights", "load",
                 "prepare", "renamed", "lookup", "entry_function", "cloned"}
    for name in RESERVED_NAMES:
        assert (name in on_module) == hasattr(Small, name) or name == "module", name
    assert {n for n in RESERVED_NAMES if hasattr(reading, n)} >= {"module", "name", "constants", "modules", "lookup",
                                                                   "entry_function"}
    assert {n for n in RESERVED_NAMES if hasattr(twin, n)} >= {"module", "name", "entry", "modules", "load", "lookup",
                                                                "entry_function"}


def _make(kind: str, member: str) -> Module:
    @func
    def kernel(x: Tensor[(2,), "f32"]):
        return x + 1.0

    @module
    class Leaf:
        @func
        def leaf(x: Tensor[(2,), "f32"]):
            return x * 2.0

    functions = {member: kernel} if kind == "function" else {"other": kernel}
    children = (Leaf.renamed(member),) if kind == "child" else ()
    methods = {member: lambda self, x: x} if kind == "method" else {}
    return Module("Owner", functions, children, methods)


@pytest.mark.parametrize("kind", ["function", "child", "method"])
@pytest.mark.parametrize("name", sorted(set(RESERVED_NAMES) - AUTHORABLE))
def test_a_member_named_like_a_reserved_name_is_refused_naming_the_clash(kind: str, name: str) -> None:
    what = "child Module" if kind == "child" else kind
    with pytest.raises(ModuleDefinitionError, match=rf"@module Owner: {what} '{name}' takes the reserved name "
                                                    rf"'{name}' \(.+\); every Module, LoadedModule and twin answers"):
        _make(kind, name)


@pytest.mark.parametrize("kind", ["function", "child", "method"])
def test_a_member_named_module_is_authored_spec_1_1(kind: str) -> None:
    owner = _make(kind, "module")  # the spec lets an authored Module name one; @runtime_module refuses its twin
    assert owner.lookup("module") is not None


def test_a_reserved_name_in_a_class_body_is_refused_at_decoration() -> None:
    with pytest.raises(ModuleDefinitionError, match=r"function 'load' takes the reserved name 'load'"):
        @module
        class Loader:
            @func
            def load(x: Tensor[(2,), "f32"]):
                return x

    with pytest.raises(ModuleDefinitionError, match=r"method 'weights' takes the reserved name"):
        @module
        class Weights:
            @func
            def f(x: Tensor[(2,), "f32"]):
                return x

            def weights(self):
                return 1


@pytest.mark.parametrize("kind", ["function", "child"])
def test_forward_is_only_a_method(kind: str) -> None:
    with pytest.raises(ModuleDefinitionError, match=r"may not be named 'forward'"):
        _make(kind, "forward")


@pytest.mark.parametrize("name", ["_walk", "_child", "_lookup", "_child_reading", "_validate"])
def test_a_member_named_like_an_internal_helper_is_refused(name: str) -> None:
    with pytest.raises(ModuleDefinitionError, match=rf"'{name}' clashes with the internal attribute"):
        _make("method", name)


def test_former_helper_names_are_free_and_resolve_alike_everywhere() -> None:
    """child, trace_all, walk, find: a function, a child and methods; the same member on all three sides."""

    @module(entry="scale")
    class Scaler:
        @func
        def scale(x: Tensor[(2,), "f32"], g: ConstTensor[(2,), "f32"]):
            return x * g

    @module
    class Host:
        trace_all = Scaler

        @func
        def child(x: Tensor[(2,), "f32"], w: ConstTensor[(2,), "f32"]):
            return x + w

        def walk(self, x):
            return self.trace_all(self.child(x))

        def find(self):
            return "find"

        def forward(self, x):
            return self.walk(x)

    @runtime_module(Scaler)
    class ScalerTwin:
        @runtime_func
        def scale(self, x, g):
            return x * g

    @runtime_module(Host)
    class HostTwin:
        trace_all = ScalerTwin

        @runtime_func
        def child(self, x, w):
            return x + w

    data = {"w": torch.tensor([1.0, 2.0]), "trace_all.g": torch.tensor([3.0, 4.0])}
    reading = Host.load(DictResource(data))
    twin = HostTwin().load(DictResource(data))
    x = torch.tensor([1.0, 1.0])
    want = (x + data["w"]) * data["trace_all.g"]
    assert Host.child is Host.functions["child"] and Host.trace_all.name == "trace_all"
    assert Host.walk.__func__ is Host.methods["walk"] and Host.find() == "find"
    assert reading.child.function is Host.functions["child"] and isinstance(reading.trace_all, LoadedModule)
    assert isinstance(twin.trace_all, RuntimeModule) and twin.find() == "find"
    for side in (reading, twin):
        assert torch.equal(side.walk(x), want) and torch.equal(side(x), want)
    assert [p for p, _ in Host._walk()] == ["", "trace_all"]


def test_a_class_body_defining_call_is_refused() -> None:
    with pytest.raises(ModuleDefinitionError, match=r"@module Callable: the class body defines __call__, which has "
                                                    r"no effect: .* define forward\(self, \.\.\.\) instead"):
        @module
        class Callable:
            @func
            def f(x: Tensor[(2,), "f32"]):
                return x

            def __call__(self, x):
                return self.f(x)


# -- converters calling a child's function, on its prepared weights -----------------------------------------------


def _converting_tree():  # noqa: ANN202
    @module(entry="proj")
    class Proj:
        @func
        def proj(x: Tensor[(3, 4), "f32"], w: ConstTensor[(4, 4), "f32"]):
            return tf.matmul(x, w)

        @func
        def bias_of(x: Tensor[(3, 4), "f32"], b: ConstTensor[(4,), "f32"]):
            return x + b

        @proj.converter("w")
        def w_from_raw(w_t: ConstTensor[(4, 4), "f32"]):  # the checkpoint stores it transposed
            return tf.transpose(w_t, (1, 0))

    @module(entry="top")
    class Top:
        inner = Proj

        @func
        def top(x: Tensor[(3, 4), "f32"], table: ConstTensor[(3, 4), "f32"]):
            return inner(x) + table

        @top.converter("table")
        def table_from_raw(seed: ConstTensor[(3, 4), "f32"]):
            # Bare child name: its entry, on the child's converted weight; child.function: another function.
            return inner.bias_of(inner(seed))

    return Top


def test_a_converter_calls_a_child_on_its_prepared_weights(tmp_path: Path) -> None:
    Top = _converting_tree()
    g = torch.Generator().manual_seed(5)
    raw = {"inner.w_t": torch.randn(4, 4, generator=g), "inner.b": torch.randn(4, generator=g),
           "seed": torch.randn(3, 4, generator=g)}
    Top.prepare(DictResource(raw), str(tmp_path / "out"))
    prepared = SafetensorsResource(str(tmp_path / "out"), device="cpu")
    w = raw["inner.w_t"].t()
    assert torch.equal(prepared.load("inner.w").contiguous(), w)
    # f32 matmuls on differently laid-out operands may round differently: a few ulp.
    torch.testing.assert_close(prepared.load("table"), raw["seed"] @ w + raw["inner.b"], rtol=1e-6, atol=1e-6)
    reading = Top.load(prepared)
    x = torch.randn(3, 4, generator=g)
    torch.testing.assert_close(reading(x), x @ w + raw["seed"] @ w + raw["inner.b"], rtol=1e-6, atol=1e-6)


# -- a hand-built reading lacking a constant -----------------------------------------------------------------------


def test_a_hand_built_reading_whose_reached_child_lacks_a_constant_names_path_and_weight() -> None:
    Top = _converting_tree()
    inner = Top.inner
    empty_child = LoadedModule(inner, {}, ())
    reading = LoadedModule(Top, {"table": torch.zeros(3, 4)}, (empty_child,))
    with pytest.raises(MissingWeightError, match=r"Top.inner.w: the reading of Top.inner holds no constant 'w', "
                                                 r"which proj needs \(it holds: none\)") as info:
        reading(torch.zeros(3, 4))
    assert isinstance(info.value, KeyError)
    no_child = LoadedModule(Top, {"table": torch.zeros(3, 4)}, ())
    with pytest.raises(MissingWeightError, match=r"Top.inner: the reading of Top holds no reading of its child "
                                                 r"'inner'"):
        no_child(torch.zeros(3, 4))
    with pytest.raises(MissingWeightError, match=r"LoadedModule 'inner'.proj needs the weight w"):
        empty_child.proj(torch.zeros(3, 4))

"""@module authoring: members, refusals, forward dispatch, attribute access, converters, Mesh."""

from __future__ import annotations

import pytest
import torch

from tilefoundry import func, module
from tilefoundry.dsl import ConstTensor, DimVar, Mesh, Tensor, Topology, tf
from tilefoundry.ir.core import IRTypeError, Module, ModuleDefinitionError

n = DimVar("n", 1, 64)


@module
class Scale:
    @func
    def scale(x: Tensor[(n, 4), "f32"], g: ConstTensor[(4,), "f32"]):
        return x * g


def _double_module():
    @module(entry="double")
    class Doubler:
        @func
        def double(x: Tensor[(n, 4), "f32"]):
            return x + x

    return Doubler


def test_function_takes_every_declared_param_and_evaluates() -> None:
    x, g = torch.randn(3, 4), torch.randn(4)
    assert torch.equal(Scale.scale(x, g), x * g)
    with pytest.raises(TypeError, match=r"activations alone.*mod.load\(resource\).scale"):
        Scale.scale(x)
    with pytest.raises(TypeError, match=r"scale takes 2 arguments \(x, g\), got 3"):
        Scale.scale(x, g, g)


def test_module_is_bound_to_the_class_name_with_members() -> None:
    assert isinstance(Scale, Module)
    assert Scale.name == "Scale"
    assert list(Scale.functions) == ["scale"]
    assert Scale.weights["g"].shape == (4,)


def test_forward_runs_entry_then_method_then_refuses() -> None:
    d = _double_module()
    x = torch.randn(2, 4)
    assert torch.equal(d(x), x + x)
    assert torch.equal(d.forward(x), x + x)

    @module
    class WithForward:
        @func
        def neg(x: Tensor[(n, 4), "f32"]):
            return -x

        def forward(self, x):
            return self.neg(x) * 3

    assert torch.equal(WithForward(x), -x * 3)
    with pytest.raises(TypeError, match=r"neither a forward method nor an entry.*functions scale"):
        Scale(x, torch.ones(4))


def test_children_from_attributes_and_tuples_with_methods_bound() -> None:
    d = _double_module()

    @module
    class Block:
        inner = d
        layers = tuple(Scale.renamed(f"layer{i}") for i in range(3))

        def forward(self, x, g):
            for layer in self.layers_list():
                x = layer.scale(x, g)
            return self.inner(x)

        def layers_list(self):
            return [getattr(self, f"layer{i}") for i in range(3)]

    assert [m.name for m in Block.modules] == ["inner", "layer0", "layer1", "layer2"]
    assert Block.inner.name == "inner" and d.name == "Doubler", "the child is a renamed copy"
    x, g = torch.randn(2, 4), torch.randn(4)
    assert torch.equal(Block(x, g), 2 * (x * g * g * g))
    assert Block._lookup("layer1") is Block.layer1
    assert Block._lookup("layer1.scale") is Scale.functions["scale"]
    assert Block._lookup("inner.double") is d.functions["double"]
    with pytest.raises(KeyError, match="no member 'nope'"):
        Block._lookup("layer1.nope")
    assert [p for p, _ in Block._walk()] == ["", "inner", "layer0", "layer1", "layer2"]


def test_refuses_empty_body() -> None:
    with pytest.raises(ModuleDefinitionError, match="empty"):

        @module
        class Empty:
            """Nothing here."""


def test_refuses_member_of_other_kind() -> None:
    with pytest.raises(ModuleDefinitionError, match=r"member 'eps' is a float"):

        @module
        class Bad:
            eps = 1e-5

            @func
            def f(x: Tensor[(4,), "f32"]):
                return x

    with pytest.raises(ModuleDefinitionError, match=r"layers\[1\] is int, not a Module"):

        @module
        class BadTuple:
            layers = (Scale, 3)


def test_refuses_entry_naming_no_function() -> None:
    with pytest.raises(ModuleDefinitionError, match=r"entry='main' names no function; functions: f"):

        @module(entry="main")
        class NoMain:
            @func
            def f(x: Tensor[(4,), "f32"]):
                return x


def test_refuses_duplicate_names_at_one_level() -> None:
    with pytest.raises(ModuleDefinitionError, match=r"'layer' is used twice"):

        @module
        class Dup:
            layers = (Scale.renamed("layer"), Scale.renamed("layer"))

    with pytest.raises(ModuleDefinitionError, match=r"'proj' is used twice at one level \(function and child"):

        @module
        class Clash:
            layers = (Scale.renamed("proj"),)

            @func
            def proj(x: Tensor[(4,), "f32"]):
                return x


def test_refuses_same_weight_name_with_two_types() -> None:
    with pytest.raises(ModuleDefinitionError, match=r"weight 'w' is declared"):

        @module
        class TwoW:
            @func
            def a(x: Tensor[(4,), "f32"], w: ConstTensor[(4,), "f32"]):
                return x * w

            @func
            def b(x: Tensor[(4,), "f32"], w: ConstTensor[(4,), "bf16"]):
                return x


def test_child_module_call_inside_func_is_recorded() -> None:
    d = _double_module()

    @module(entry="run")
    class Outer:
        inner = d

        @func
        def run(x: Tensor[(n, 4), "f32"]):
            return inner(x) * 2.0  # noqa: F821 - the child, reached by its attribute name

    node = Outer.run.graph.nodes[0]
    assert node.op == "call_module" and node.attrs["child"] == "inner"


def test_converter_registration_and_refusals() -> None:
    @module
    class Conv:
        @func
        def proj(x: Tensor[(2, 4), "f32"], w: ConstTensor[(4, 3), "f32"]):
            return tf.matmul(x, w)

        @proj.converter("w")
        def _w(raw_w: Tensor[(3, 4), "f32"]):
            return tf.transpose(raw_w, (1, 0))

    assert set(Conv.proj.converters) == {"w"}
    assert [p.name for p in Conv.proj.converters["w"].params] == ["raw_w"]
    with pytest.raises(ModuleDefinitionError, match="registered twice"):
        Conv.proj.converter("w")
    with pytest.raises(ModuleDefinitionError, match=r"declares no ConstTensor 'v'"):
        Conv.proj.converter("v")


def test_mesh_scope_is_recorded_on_nodes_and_changes_no_value() -> None:
    @func(topologies=(Topology("cta", 8), Topology("thread", 128)))
    def placed(x: Tensor[(8, 128), "f32"]):
        with Mesh(("cta",), layout=(8,), names=("row",)) as m:
            y = tf.exp(x)
        assert m.row.extent == 8
        return y + 1.0

    assert isinstance(placed, Module) and placed.entry == "placed"
    nodes = placed.placed.graph.nodes
    assert nodes[0].mesh is not None and nodes[0].mesh.names == ("row",)
    assert nodes[-1].mesh is None
    x = torch.randn(8, 128)
    assert torch.equal(placed(x), torch.exp(x) + 1.0)


def test_type_error_in_module_names_op_and_line() -> None:
    with pytest.raises(IRTypeError) as info:

        @module
        class Wrong:
            @func
            def f(x: Tensor[(4, 8), "f32"], w: ConstTensor[(4,), "f32"]):
                return x * w  # line under test

    msg = str(info.value)
    assert msg.startswith("mul: shapes do not broadcast")
    assert "Tensor[(4, 8), f32]" in msg and "Tensor[(4,), f32]" in msg
    assert "test_module.py" in msg and "return x * w  # line under test" in msg

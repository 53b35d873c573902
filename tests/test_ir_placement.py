"""The IR made ready to lower: shard layouts and the N @ mesh.axis shorthand, nested mesh scopes, placement
through typing, validated topologies and their inheritance, op attribute schemas and compute dtypes."""

from __future__ import annotations

import pytest
import torch

from tilefoundry import func, module
from tilefoundry.dsl import ConstTensor, DimVar, Mesh, Tensor, Topology, tf
from tilefoundry.ir.core.errors import IRTypeError, ModuleDefinitionError
from tilefoundry.ir.core.op import OPS, op_def
from tilefoundry.ir.core.tracer import emit
from tilefoundry.ir.types import B, S
from tilefoundry.ir.types.dtype import bf16, f16, f32, i32
from tilefoundry.ir.types.shard import ShardLayout, Split
from tilefoundry.ir.types.storage import Storage

CTA = Mesh(("cta",), layout=(4,), names=("block",))
TOPO = (Topology("cta", 4), Topology("thread", 1))


# -- N @ mesh.axis ----------------------------------------------------------------------------------------

def test_a_split_larger_than_the_axis_is_canonicalised() -> None:
    entry = 168 @ CTA.block
    assert entry == (Split(4, CTA.block), 42)
    assert 4 @ CTA.block == Split(4, CTA.block)
    shape, layout = ShardLayout.from_shape((entry, 64))
    assert shape == (168, 64)
    assert layout.layout == ((Split(4, CTA.block), 42), 64)
    assert layout.attrs == (S(0),) and layout.mesh == CTA.spec
    assert layout.modes() == (4, 42, 64) and layout.axis_modes() == ((0, 1), (2,))


@pytest.mark.parametrize("n", [170, 2, 6])
def test_a_split_that_is_no_multiple_is_refused_naming_both_numbers(n: int) -> None:
    with pytest.raises(ValueError, match=rf"^{n} @ block\(4\): mesh axis block has extent 4, and {n} is neither 4 "
                                         "nor a multiple of 4"):
        _ = n @ CTA.block


def test_a_split_needs_a_static_extent() -> None:
    with pytest.raises(TypeError, match="must be a static int"):
        _ = DimVar("n", 1, 9) @ CTA.block


def test_a_split_annotation_gives_a_global_shape_and_a_layout() -> None:
    @func
    def placed(x: Tensor[(168 @ CTA.block, 64), "f32"]):
        return x

    t = placed.params[0].type
    assert t.shape == (168, 64) and isinstance(t.layout, ShardLayout) and t.layout.attrs == (S(0),)
    assert "layout=ShardLayout(((4 @ block, 42), 64), [S(0)], Mesh(cta: block=4))" in str(t)


def test_reshard_spreads_over_the_nested_scopes_and_keeps_the_global_shape() -> None:
    @func(topologies=TOPO)
    def f(x: Tensor[(8, 64), "f32"]):
        with Mesh(("cta",), layout=(4,), names=("blk",)) as m:
            with Mesh(("thread",), layout=(1,), names=("lane",)) as t:
                xs = tf.reshard(x, (8 @ m.blk, 64 @ t.lane), "rmem")
                y = tf.exp(xs)
        return y

    nodes = f.f.graph.nodes
    assert [m.names for m in nodes[0].meshes] == [("blk",), ("lane",)]  # the nested scopes, whole
    assert nodes[0].mesh.names == ("lane",)
    layout = nodes[0].outputs[0].type.layout
    assert layout.mesh.names == ("blk", "lane") and layout.mesh.topologies == ("cta", "thread")
    assert layout.attrs == (S(0), S(2))
    assert nodes[1].outputs[0].type.storage is Storage.rmem and nodes[1].outputs[0].type.layout == layout
    x = torch.randn(8, 64)
    assert torch.equal(f(x), torch.exp(x))


def test_reshard_to_another_global_shape_is_refused() -> None:
    with pytest.raises(IRTypeError, match=r"reshard keeps the global shape \(8, 64\); the layout describes "):
        @func
        def f(x: Tensor[(8, 64), "f32"]):
            return tf.reshard(x, (16 @ CTA.block, 64))


# -- placement through typing ------------------------------------------------------------------------------

def test_placement_survives_elementwise_ops_casts_and_norms() -> None:
    @func
    def f(x: Tensor[(4, 8), "bf16"], w: ConstTensor[(8,), "bf16"]):
        r = tf.reshard(x, None, "rmem")
        a = tf.exp(r) * w + 1.0
        b = tf.cast(a, "f32")
        c = tf.rms_norm(tf.cast(b, "bf16"), w, 1e-6)
        return a, b, c, tf.softmax(b), r > 0.0

    for t in f.output_types:
        assert t.storage is Storage.rmem, t


def test_a_reduction_over_a_split_axis_broadcasts_its_result() -> None:
    @func(topologies=TOPO)
    def f(x: Tensor[(8, 64), "f32"]):
        with Mesh(("cta",), layout=(4,), names=("blk",)) as m:
            xs = tf.reshard(x, (8 @ m.blk, 64), "rmem")
            rows = tf.reduce(xs, axes=(-1,), kind="sum")
            cols = tf.reduce(xs, axes=(0,), keepdim=False, kind="max")
        return rows, cols

    rows, cols = f.f.output_types
    assert rows.layout.layout == ((Split(4, rows.layout.mesh.axis("blk")), 2), 1) and rows.layout.attrs == (S(0),)
    assert cols.layout.layout == (64,) and cols.layout.attrs == (B(),)
    assert rows.storage is Storage.rmem is cols.storage


def test_operands_placed_differently_are_refused() -> None:
    with pytest.raises(IRTypeError, match="operands are placed differently .* reshard one of them"):
        @func
        def f(x: Tensor[(4, 8), "f32"]):
            return tf.reshard(x, None, "rmem") + tf.reshard(x, None, "smem")


# -- topologies -------------------------------------------------------------------------------------------

def test_topologies_must_be_topology_instances_with_distinct_names() -> None:
    with pytest.raises(TypeError, match=r"topologies= holds \('cta', 4\), not a Topology"):
        @func(topologies=(("cta", 4),))
        def f(x: Tensor[(4,), "f32"]):
            return x
    with pytest.raises(ValueError, match="topology 'cta' is declared twice"):
        @func(topologies=(Topology("cta", 4), Topology("cta", 8)))
        def g(x: Tensor[(4,), "f32"]):
            return x


def test_a_mesh_must_fit_the_hierarchy() -> None:
    with pytest.raises(ModuleDefinitionError, match=r"the cta axes \('blk',\) multiply to 8, but the cta size is 4"):
        @func(topologies=TOPO)
        def f(x: Tensor[(8,), "f32"]):
            with Mesh(("cta",), layout=(8,), names=("blk",)):
                y = tf.exp(x)
            return y
    with pytest.raises(ModuleDefinitionError, match="places topology 'thread', which the hierarchy .* does not"):
        @func(topologies=(Topology("cta", 4),))
        def g(x: Tensor[(8,), "f32"]):
            with Mesh(("thread",), layout=(2,), names=("lane",)):
                y = tf.exp(x)
            return y


def _child_kernel() -> object:
    @module(entry="k")
    class Child:
        @func
        def k(x: Tensor[(8,), "f32"]):
            with Mesh(("cta",), layout=(4,), names=("blk",)):
                y = tf.exp(x)
            return y

    return Child


def test_a_child_inherits_its_owners_hierarchy_and_is_checked_against_it() -> None:
    child = _child_kernel()
    assert child._effective_topologies() is None

    @module
    class Owner:
        part = child

    assert Owner.part._effective_topologies() is None

    @module(topologies=TOPO)
    class Placed:
        part = child

    assert Placed.part._effective_topologies() == TOPO
    assert child._effective_topologies() is None  # the owner holds its own copy
    with pytest.raises(ModuleDefinitionError, match=r"cta axes \('blk',\) multiply to 4, but the cta size is 2"):
        @module(topologies=(Topology("cta", 2),))
        class Wrong:
            part = child


def test_a_child_of_two_owners_with_different_hierarchies_is_refused() -> None:
    child = _child_kernel().renamed("shared")

    @module(topologies=TOPO)
    class First:
        parts = (child,)

    with pytest.raises(ModuleDefinitionError, match=r"owned by First .* and Second .*; declare its own topologies="):
        @module(topologies=(Topology("cta", 4), Topology("thread", 2)))
        class Second:
            parts = (child,)


# -- attribute schemas and compute dtypes ------------------------------------------------------------------

def test_every_op_has_an_attribute_schema() -> None:
    op_def("add")
    assert all(op.schema is not None for op in OPS.values())


def test_an_unknown_attribute_is_refused_naming_what_the_op_takes() -> None:
    with pytest.raises(IRTypeError, match=r"unknown attribute 'axis'; reduce takes axes \(an int or a tuple of ints\), "
                                          r"keepdim \(a bool\), kind"):
        @func
        def f(x: Tensor[(4, 8), "f32"]):
            return emit("reduce", (x,), {"axis": 1})


def test_defaults_are_filled_and_values_checked() -> None:
    @func
    def f(x: Tensor[(4, 8), "bf16"]):
        return emit("reduce", (x,), {}), tf.gelu(x), tf.reduce(x, axes=1, kind="max")

    total, gelu, largest = f.graph.nodes
    assert total.attrs == {"axes": (1,), "keepdim": True, "kind": "sum", "acc_dtype": f32}
    assert gelu.attrs == {"approximate": "none"}
    assert largest.attrs["axes"] == (1,)
    with pytest.raises(IRTypeError, match=r"attribute keepdim takes a bool, got 1"):
        @func
        def g(x: Tensor[(4, 8), "f32"]):
            return tf.reduce(x, keepdim=1)


def test_composites_carry_their_compute_dtype_and_reductions_their_accumulator() -> None:
    @func
    def f(x: Tensor[(4, 8), "bf16"], y: Tensor[(4, 8), "f32"], n: Tensor[(4, 8), "i32"], w: ConstTensor[(8,), "bf16"]):
        return (tf.rms_norm(x, w, 1e-6), tf.softmax(x), tf.softmax(y), tf.reduce(n, kind="sum"),
                tf.matmul(x, tf.transpose(x, (1, 0))))

    nodes = {n.op: n for n in f.graph.nodes}
    assert nodes["rms_norm"].attrs["compute_dtype"] == f32
    softmaxes = [n for n in f.graph.nodes if n.op == "softmax"]
    assert [n.attrs["compute_dtype"] for n in softmaxes] == [f32, f32]
    assert nodes["reduce"].attrs["acc_dtype"] == i32
    assert nodes["matmul"].attrs["acc_dtype"] == f32


def test_the_evaluator_computes_in_the_dtype_the_attribute_names() -> None:
    @func
    def in_f16(x: Tensor[(4, 64), "bf16"], w: ConstTensor[(64,), "bf16"]):
        return emit("rms_norm", (x, w), {"eps": 1e-6, "compute_dtype": "f16"})

    assert in_f16.graph.nodes[0].attrs["compute_dtype"] == f16
    x = torch.randn(4, 64).bfloat16() * 3
    w = torch.randn(64).bfloat16()
    xh = x.half()
    normed = xh * torch.rsqrt(xh.square().mean(-1, keepdim=True) + 1e-6)  # in f16, as the attribute says
    want = normed.to(torch.bfloat16) * w  # rounded to the weight's dtype before the multiply
    assert torch.equal(in_f16(x, w), want)
    in_f32 = (x.float() * torch.rsqrt(x.float().square().mean(-1, keepdim=True) + 1e-6)).to(torch.bfloat16) * w
    assert not torch.equal(want, in_f32)
    assert bf16.bits == 16

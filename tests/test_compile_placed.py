"""Explicit placement honoured by the compiler: ``with Mesh(...)`` scopes and ``reshard`` (and layouts in
annotations) decide where each value lives and which CTA computes what; the kernels run on the CPU
target (one thread per CTA) and must agree with the evaluator."""

from __future__ import annotations

import pytest
import torch

from tilefoundry import func, jit, lower
from tilefoundry.dsl import ConstTensor, Mesh, Tensor, Topology, tf
from tilefoundry.lower import LoweringError
from tilefoundry.runtime.check import allclose, check

pytestmark = pytest.mark.usefixtures("compile_cache")

TOPO = (Topology("cta", 4), Topology("thread", 1))
BLOCKS = Mesh(("cta",), layout=(4,), names=("block",))
F32 = allclose(atol=1e-6, rtol=1e-5)


@func(topologies=TOPO)
def rows_over_ctas(x: Tensor[(8, 64), "f32"], w: ConstTensor[(64,), "f32"]):
    with Mesh(("cta",), layout=(4,), names=("blk",)) as m:
        xs = tf.reshard(x, (8 @ m.blk, 64), "rmem")
        y = tf.exp(xs) * w
        s = tf.reduce(y, axes=(-1,), kind="sum")
        out = y / s
    return out, s


@func(topologies=TOPO)
def nested_scopes(x: Tensor[(8, 64), "bf16"]):
    with Mesh(("cta",), layout=(4,), names=("blk",)) as m:
        with Mesh(("thread",), layout=(1,), names=("lane",)) as t:
            xs = tf.reshard(x, (8 @ m.blk, 64 @ t.lane), "rmem")
            largest = tf.reduce(xs, axes=(-1,), kind="max")
            shifted = tf.cast(xs, "f32") - tf.cast(largest, "f32")
    return shifted, largest


@func(topologies=TOPO)
def through_smem(x: Tensor[(8, 32), "f32"]):
    with Mesh(("cta",), layout=(4,), names=("blk",)) as m:
        staged = tf.reshard(x, (8 @ m.blk, 32), "smem")
        y = tf.where(staged > 0.0, staged, staged * 0.5)
        mean = tf.reduce(y, axes=(-1,), keepdim=False, kind="mean")
    return y, mean


@func(topologies=TOPO)
def annotated(x: Tensor[(16 @ BLOCKS.block, 8), "f32"], y: Tensor[(16, 8), "f32"]):
    return tf.sigmoid(x) + tf.reshard(y, (16 @ BLOCKS.block, 8))


@func(topologies=TOPO)
def placed_composites(x: Tensor[(8, 64), "f32"], w: ConstTensor[(64,), "f32"]):
    """Composites inside a mesh scope expand into ops placed as the written-out math would be."""
    with Mesh(("cta",), layout=(4,), names=("blk",)) as m:
        xs = tf.reshard(x, (8 @ m.blk, 64), "rmem")
        probs = tf.softmax(xs, axis=-1)
        normed = tf.rms_norm(xs, w, 1e-6)
    return probs, normed


CASES = {
    rows_over_ctas: lambda: (torch.randn(8, 64), torch.rand(64) + 0.5),  # a positive w keeps the sum s off 0
    nested_scopes: lambda: (torch.randn(8, 64).bfloat16(),),
    through_smem: lambda: (torch.randn(8, 32),),
    annotated: lambda: (torch.randn(16, 8), torch.randn(16, 8)),
    placed_composites: lambda: (torch.randn(8, 64) * 4.0, torch.randn(64)),
}


@pytest.mark.parametrize("kernel", list(CASES), ids=lambda k: k.name)
def test_a_placed_kernel_matches_the_evaluator(kernel: object) -> None:
    compiled = jit(kernel, target="cpu")
    inputs = CASES[kernel]()
    outs = kernel.functions[kernel.entry].output_types
    expect = {f"output[{i}]": [F32] for i in range(len(outs))} if isinstance(outs, tuple) else {"output": [F32]}
    report = check(compiled, kernel, inputs, expect=expect)
    assert report.passed, str(report)


def test_placement_is_printed_in_the_tir_and_the_source() -> None:
    tir = lower(rows_over_ctas, "cpu")
    fn = tir.functions["rows_over_ctas"]
    assert fn.schedule.placement == "mesh" and fn.schedule.grid == 4 and fn.schedule.threads_per_cta == 1
    text = str(tir)
    assert "mesh cta(blk=4)" in text and "[S<1>] over mesh" in text
    compiled = jit(rows_over_ctas, target="cpu")
    assert "make_mesh<TopologyScope::cta>" in compiled.source
    assert "TILEFOUNDRY_STATIC_PROGRAM_SHAPE(cta, 4);" in compiled.source
    assert "ops::reduce<ops::sum_op, cute::seq<2>>" in compiled.source
    smem = jit(through_smem, target="cpu").source
    assert "ops::sync<ops::SyncKind::cta>();" in smem


def test_a_reduction_across_ctas_is_refused() -> None:
    @func(topologies=TOPO)
    def across(x: Tensor[(8, 64), "f32"]):
        with Mesh(("cta",), layout=(4,), names=("blk",)) as m:
            xs = tf.reshard(x, (8 @ m.blk, 64), "rmem")
            total = tf.reduce(xs, axes=(0,), kind="sum")
        return total

    with pytest.raises(LoweringError, match=r"cannot compile reduce in across: it reduces axis 0, which mesh axis blk "
                                            r"splits across CTAs") as info:
        lower(across, "cpu")
    assert "total = tf.reduce(xs, axes=(0,)" in str(info.value)


def test_more_than_one_thread_per_cta_is_refused_on_the_cpu() -> None:
    @func(topologies=(Topology("cta", 4), Topology("thread", 32)))
    def lanes(x: Tensor[(4, 32), "f32"]):
        with Mesh(("cta", "thread"), layout=(4, 32), names=("blk", "lane")) as m:
            y = tf.exp(tf.reshard(x, (4 @ m.blk, 32 @ m.lane), "rmem"))
        return y

    with pytest.raises(LoweringError, match="the CPU target runs each CTA on one host thread"):
        lower(lanes, "cpu")
    assert lower(lanes, "cuda").functions["lanes"].schedule.threads_per_cta == 32


def test_an_operand_in_another_instances_registers_is_refused() -> None:
    @func(topologies=TOPO)
    def moved(x: Tensor[(8, 8), "f32"]):
        with Mesh(("cta",), layout=(4,), names=("blk",)) as m:
            rows = tf.reshard(x, (8 @ m.blk, 8), "rmem")
            cols = tf.reshard(rows, (8, 8 @ m.blk), "rmem")
        return cols

    with pytest.raises(LoweringError, match=r"cannot compile reshard in moved: operand rows is placed differently"):
        lower(moved, "cpu")

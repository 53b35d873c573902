"""Elementwise ops after a matmul run in its epilogue: jitted for the CPU against the evaluator, built with nvcc
(tests/test_compile_cuda_build.py).

A residual added to ``x @ w.T``, a bias broadcast over the rows, a scalar scale, an activation, a cast, a
``where``, and chains of them compile as one matmul kernel that applies them to each result before storing it
(``lower/epilogue.py``): no temporary holds the matmul's result. Where the result is also returned, or an op
after it is no elementwise op, the ops stay a stage of their own, and the function is as correct.

Tolerances: each op rounds as its unfused form does (``ops::scalar``), so results differ from the evaluator's
only in the order of the matmul's sum: f32 to 1e-5, bf16 to 2**-7 relative plus 2**-7 absolute (one bf16 ulp
of values of magnitude ~1, where an f32 sum landing near a rounding boundary tips the rounding).
"""

from __future__ import annotations

import pytest
import torch

from tests.compile_kernels import compiled_only
from tilefoundry import func, jit, lower, module
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, tf
from tilefoundry.runtime.check import allclose, check

pytestmark = pytest.mark.usefixtures("compile_cache")

M = DimVar("m", 1, 257)
F32 = allclose(atol=1e-5, rtol=1e-5)
BF16 = allclose(atol=2**-7, rtol=2**-7)


def _linear(x, w):
    return tf.matmul(x, tf.transpose(w, (1, 0)))


@module(entry="residual")
class Epilogues:
    @func
    def residual(x: Tensor[(M, 40), "bf16"], r: Tensor[(M, 24), "bf16"], wh: ConstTensor[(24, 40), "bf16"]):
        return r + _linear(x, wh)

    @func
    def bias_scale_relu(x: Tensor[(M, 40), "f32"], w: ConstTensor[(24, 40), "f32"], b: ConstTensor[(24,), "f32"]):
        return tf.relu((_linear(x, w) + b) * 0.5)

    @func
    def swish_gate(x: Tensor[(M, 40), "bf16"], up: Tensor[(M, 24), "bf16"], wh: ConstTensor[(24, 40), "bf16"]):
        """silu of the matmul times another tensor, then cast to f32: three ops in the epilogue."""
        return tf.cast(tf.silu(_linear(x, wh)) * up, "f32")

    @func
    def masked(x: Tensor[(M, 40), "f32"], keep: Tensor[(M, 1), "bool"], w: ConstTensor[(24, 40), "f32"]):
        return tf.where(keep, _linear(x, w), 0.0)

    @func
    def batched(x: Tensor[(3, M, 40), "f32"], r: Tensor[(3, M, 24), "f32"], wb: ConstTensor[(3, 24, 40), "f32"],
                b: ConstTensor[(24,), "f32"]):
        """A batch of products: each element's own residual, one bias every element reads."""
        return r + tf.matmul(x, tf.transpose(wb, (0, 2, 1))) + b

    @func
    def batch_broadcast(x: Tensor[(3, M, 40), "f32"], w: ConstTensor[(24, 40), "f32"]):
        """One weight for every batch element (the operands' batch axes differ): not fused."""
        return tf.exp(tf.matmul(x, tf.transpose(w, (1, 0))))

    @func
    def also_returned(x: Tensor[(M, 40), "f32"], w: ConstTensor[(24, 40), "f32"]):
        """The matmul's result is a result too: not fused."""
        y = _linear(x, w)
        return y, tf.exp(y)

    @func
    def then_reduced(x: Tensor[(M, 40), "f32"], w: ConstTensor[(24, 40), "f32"]):
        """A reduction after the add: not elementwise, not fused."""
        y = _linear(x, w) + 1.0
        return tf.reduce(y, axes=(-1,), keepdim=True, kind="sum")


def _inputs(name: str, m: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(m)
    fn = Epilogues.functions[name]
    out = []
    for p in fn.params:
        shape = tuple(d if isinstance(d, int) else m for d in p.type.shape)
        t = torch.rand(shape, generator=g) < 0.5 if p.type.dtype.is_bool else torch.randn(shape, generator=g)
        if p.name in ("w", "wh", "wb"):
            t = t / shape[-1] ** 0.5
        out.append(t.to(p.type.dtype.torch_dtype))
    return tuple(out)


@pytest.mark.parametrize("name", sorted(Epilogues.functions))
def test_an_epilogue_matches_the_evaluator(name: str) -> None:
    compiled = jit(Epilogues, target="cpu").functions[name]
    fn = Epilogues.functions[name]
    outs = fn.output_types
    types = outs if isinstance(outs, tuple) else (outs,)
    paths = [f"output[{i}]" for i in range(len(types))] if isinstance(outs, tuple) else ["output"]
    expect = {p: [BF16 if t.dtype.name == "bf16" or name == "swish_gate" else F32] for p, t in zip(paths, types)}
    for m in (1, 3, 17, 64, 256):
        report = check(compiled_only(compiled), fn, _inputs(name, m), expect=expect)
        assert report.passed, f"{name} at M = {m}:\n{report}"


def test_the_ops_after_a_matmul_run_in_its_kernel() -> None:
    tir = lower(Epilogues, "cpu")
    for name in ("residual", "bias_scale_relu", "swish_gate", "masked", "batched"):
        fn = tir.functions[name]
        assert [s.fn.schedule.placement for s in fn.stages] == ["matmul"] and not fn.temps, name
    assert "epilogue(matmul:bf16; add = binary<add_op>(r_tile, matmul):bf16 -> add)" in str(tir.functions["residual"])
    for name in ("also_returned", "then_reduced", "batch_broadcast"):
        assert [s.fn.schedule.placement for s in tir.functions[name].stages] == ["matmul", "rows"], name


def test_a_residual_passed_as_its_own_output_is_updated_in_place() -> None:
    """The epilogue reads each residual element where it writes the result: the caller may pass the residual as
    the output (the residual stream updated in place); an output merely overlapping it is refused."""
    fn = Epilogues.functions["residual"]
    assert lower(fn, "cpu").functions["residual"].aliases == (("out", "r"),)
    compiled = jit(fn, target="cpu")
    x, r, wh = _inputs("residual", 5)
    want = fn(x, r, wh)
    stream = r.clone()
    got = compiled(x, stream, wh, stream)
    assert got is stream
    assert torch.allclose(stream.float(), want.float(), rtol=2**-7, atol=2**-7)
    memory = torch.zeros(2 * r.numel() + 1, dtype=r.dtype)
    with pytest.raises(ValueError, match=r"residual: output out overlaps input r without being it"):
        compiled(x, memory[:r.numel()].view_as(r), wh, memory[1:r.numel() + 1].view_as(r))


def test_an_input_read_elsewhere_is_not_updated_in_place() -> None:
    @func
    def twice(x: Tensor[(M, 40), "f32"], r: Tensor[(M, 24), "f32"], w: ConstTensor[(24, 40), "f32"]):
        return r + _linear(x, w), r * 2.0

    assert lower(twice, "cpu").functions["twice"].aliases == ()

"""An RMSNorm before a projection runs in the matmul's prologue: jitted for the CPU against the evaluator, built
with nvcc in tests/test_compile_cuda_build.py.

``rms_norm(x, g, eps) @ w.T`` compiles as one matmul kernel reading ``x`` through the norm
(``lower/prologue.py``): each row's scale from the sum of its squares, each element normed as it is read, so no
temporary holds the normed rows and no second kernel launches. Several projections of one normed input (q, k, v;
gate and up) each read it so, and an epilogue after the matmul still fuses. Where the normed rows are also
returned, or read by an op that is no matmul, the norm stays a stage of its own, and the function is as correct.

Tolerances: each element rounds as the unfused ops round (``expand.py``); results differ from the evaluator's only
in the order of the sums (the row's squares, the matmul's products): f32 to 1e-5, bf16 to 2**-7 relative plus
2**-7 absolute (one bf16 ulp of values near 1, where a sum landing near a rounding boundary tips the rounding).
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
EPS = 1e-6


def _linear(x, w):
    return tf.matmul(x, tf.transpose(w, (1, 0)))


@module(entry="projection")
class Prologues:
    @func
    def projection(x: Tensor[(M, 40), "bf16"], g: ConstTensor[(40,), "bf16"], w: ConstTensor[(24, 40), "bf16"]):
        return _linear(tf.rms_norm(x, g, EPS), w)

    @func
    def odd_width(x: Tensor[(M, 37), "f32"], g37: ConstTensor[(37,), "f32"], w37: ConstTensor[(20, 37), "f32"]):
        """K = 37: no 16-byte groups, the element-by-element path."""
        return _linear(tf.rms_norm(x, g37, EPS), w37)

    @func
    def three_heads(x: Tensor[(M, 48), "bf16"], g48: ConstTensor[(48,), "bf16"], wq: ConstTensor[(32, 48), "bf16"],
                    wk: ConstTensor[(16, 48), "bf16"], wv: ConstTensor[(16, 48), "bf16"]):
        """q, k and v of one normed input: each projection reads it through its own prologue."""
        h = tf.rms_norm(x, g48, EPS)
        return _linear(h, wq), _linear(h, wk), _linear(h, wv)

    @func
    def gated(x: Tensor[(M, 40), "bf16"], g: ConstTensor[(40,), "bf16"], wg: ConstTensor[(24, 40), "bf16"],
              wu: ConstTensor[(24, 40), "bf16"]):
        """The MLP's gate and up: prologues before, silu(gate) * up after."""
        h = tf.rms_norm(x, g, EPS)
        return tf.silu(_linear(h, wg)) * _linear(h, wu)

    @func
    def with_residual(x: Tensor[(M, 40), "f32"], r: Tensor[(M, 24), "f32"], gf: ConstTensor[(40,), "f32"],
                      wf: ConstTensor[(24, 40), "f32"]):
        """A prologue and an epilogue in one kernel."""
        return r + _linear(tf.rms_norm(x, gf, EPS), wf)

    @func
    def also_returned(x: Tensor[(M, 40), "bf16"], g: ConstTensor[(40,), "bf16"], w: ConstTensor[(24, 40), "bf16"]):
        """The normed rows are a result too: the norm stays a stage of its own."""
        h = tf.rms_norm(x, g, EPS)
        return h, _linear(h, w)

    @func
    def also_added(x: Tensor[(M, 24), "f32"], ga: ConstTensor[(24,), "f32"], wa: ConstTensor[(24, 24), "f32"]):
        """The normed rows are read by an add too: not fused."""
        h = tf.rms_norm(x, ga, EPS)
        return h + _linear(h, wa)


def _inputs(name: str, m: int) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(m)
    fn = Prologues.functions[name]
    out = []
    for p in fn.params:
        shape = tuple(d if isinstance(d, int) else m for d in p.type.shape)
        t = torch.randn(shape, generator=gen) * (3.0 if p.name == "x" else 1.0)
        if p.name.startswith("w"):
            t = t / shape[-1] ** 0.5
        elif p.name.startswith("g"):
            t = 1.0 + 0.25 * t
        out.append(t.to(p.type.dtype.torch_dtype))
    return tuple(out)


@pytest.mark.parametrize("name", sorted(Prologues.functions))
def test_a_prologue_matches_the_evaluator(name: str) -> None:
    compiled = jit(Prologues, target="cpu").functions[name]
    fn = Prologues.functions[name]
    outs = fn.output_types
    types = outs if isinstance(outs, tuple) else (outs,)
    paths = [f"output[{i}]" for i in range(len(types))] if isinstance(outs, tuple) else ["output"]
    expect = {p: [BF16 if t.dtype.name == "bf16" else F32] for p, t in zip(paths, types)}
    for m in (1, 3, 17, 64, 200):
        report = check(compiled_only(compiled), fn, _inputs(name, m), expect=expect)
        assert report.passed, f"{name} at M = {m}:\n{report}"


def test_the_norm_before_a_matmul_runs_in_its_kernel() -> None:
    tir = lower(Prologues, "cpu")
    for name, matmuls in (("projection", 1), ("odd_width", 1), ("three_heads", 3), ("gated", 1),
                          ("with_residual", 1)):  # gated: gate and up one kernel, a pair (lower/pairs.py)
        fn = tir.functions[name]
        assert [s.fn.schedule.placement for s in fn.stages] == ["matmul"] * matmuls, name
        assert not [t for t in fn.temps if "rms_norm" in t.name], name  # the normed rows never reach memory
        assert str(fn).count("prologue(rms_norm<f32>(a, g") == matmuls, name
    assert "epilogue(" in str(tir.functions["with_residual"])
    for name in ("also_returned", "also_added"):
        fn = tir.functions[name]
        assert fn.stages[0].fn.schedule.placement == "rows" and "prologue(" not in str(fn), name



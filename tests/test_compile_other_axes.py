"""Rows read across a transpose, and the ops that pick or normalise along an axis other than the last, compile.

A row-wise op reads a transposed view through the stride of its last axis (no copy; one element at a time where
that stride is not 1), so ``exp(transpose(x))`` and a reshape of a transposed view (copied first, through those
strides) compile. ``softmax`` and ``layer_norm`` along another axis reduce across rows (lower/reduce_axis.py) and
run the rest row-wise (layer_norm's weight and bias reshaped to stand along the axis); ``argmax`` and ``topk`` along
another axis pick along the last axis of a transposed view (lower/move_axis.py), topk's results transposed back;
``index_select`` and ``repeat_interleave`` along the last axis gather along a leading axis into a copy
(lower/gather_last.py). Jitted for the CPU against the evaluator (the compiled code alone: the evaluator patched to
raise, outputs handed in filled with NaN), at several row counts of one build. The same functions built with nvcc in
tests/test_compile_cuda_build.py and run on the H200 in tests/gpu/test_compile_stages.py.

Tolerances: exact where nothing is rounded; exp within 1e-6 relative (torch's vectorised exp and the runtime's may
differ in the last bit); softmax's sums differ from the evaluator's in order only (f32: 1e-6; bf16: one unit in the
last place of the 16-bit result, 2**-7 relative: the float before the cast may fall on the other side of a rounding
boundary, as one element of 6240 did on the H200 at 2**-8); layer_norm's likewise.
"""

from __future__ import annotations

import pytest
import torch

from tests.compile_kernels import compiled_only, output_paths
from tilefoundry import func, jit, lower, module
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, tf
from tilefoundry.runtime.check import allclose, check, equal

pytestmark = pytest.mark.usefixtures("compile_cache")

S = DimVar("s", 1, 300)
T = DimVar("t", 3, 300)  # rows topk picks k = 3 from: at least 3 of them


@module(entry="columns")
class OtherAxes:
    @func
    def columns(x: Tensor[(S, 8), "f32"]):
        """exp of the columns: rows read 8 elements apart."""
        return tf.exp(tf.transpose(x, (1, 0)))

    @func
    def flattened_columns(x: Tensor[(S, 8), "f32"]):
        """A reshape no strides express, of a transposed view: its copy reads the view through its strides."""
        return tf.reshape(tf.transpose(x, (1, 0)), (8 * S,)) * 2.0

    @func
    def wide_columns(x: Tensor[(S, 4096), "bf16"], y: Tensor[(4096, S), "bf16"]):
        """A long bf16 row read across a transpose beside one read in order (the vector path for y alone)."""
        return tf.transpose(x, (1, 0)) + y

    @func
    def softmax_columns(x: Tensor[(S, 24), "f32"]):
        return tf.softmax(x, axis=0)

    @func
    def softmax_middle(x: Tensor[(3, S, 16), "bf16"]):
        return tf.softmax(x, axis=1)

    @func
    def argmax_columns(x: Tensor[(S, 8), "f32"]):
        return tf.argmax(x, axis=0)

    @func
    def argmax_middle(x: Tensor[(2, S, 8), "f32"]):
        return tf.argmax(x, axis=1)

    @func
    def topk_columns(x: Tensor[(T, 8), "f32"]):
        return tf.topk(x, 3, axis=0)

    @func
    def topk_middle(x: Tensor[(2, T, 5), "f32"]):
        return tf.topk(x, 2, axis=1, largest=False)

    @func
    def layer_norm_columns(x: Tensor[(S, 16), "f32"], g: ConstTensor[(S,), "f32"], b: ConstTensor[(S,), "f32"]):
        """layer_norm along the first axis: its weight and bias stand along it."""
        return tf.layer_norm(x, g, b, axis=0)

    @func
    def layer_norm_middle(x: Tensor[(2, S, 16), "bf16"], gain: ConstTensor[(S,), "bf16"],
                          shift: ConstTensor[(S,), "bf16"]):
        return tf.layer_norm(x, gain, shift, axis=1)

    @func
    def repeat_columns(x: Tensor[(S, 8), "f32"]):
        """Each element of the row repeated 3 times in place (a broadcast of a column, copied into rows of its own)."""
        return tf.exp(tf.repeat_interleave(x, 3, 1))

    @func
    def repeat_vector(v: Tensor[(8,), "bf16"]):
        return tf.repeat_interleave(v, 2, 0)

    @func
    def gather_columns(x: Tensor[(S, 16), "f32"], idx: Tensor[(5,), "i64"]):
        """x[:, idx] (positions repeated): a gather along the last axis, copied into rows of its own."""
        return tf.index_select(x, 1, idx) * 2.0

    @func
    def gather_vector(v: Tensor[(16,), "bf16"], idx: Tensor[(S,), "i32"]):
        """v[idx] of a vector, at a DimVar count of positions."""
        return tf.index_select(v, idx) + 1.0


def _distinct(shape: tuple[int, ...], dtype: torch.dtype, seed: int) -> torch.Tensor:
    """Distinct values (a random permutation, scaled), so that every pick has one answer."""
    n = 1
    for d in shape:
        n *= d
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).to(torch.float32)
    return (perm / n * 8 - 4).reshape(shape).to(dtype)


def _inputs(name: str, s: int, seed: int) -> tuple[torch.Tensor, ...]:
    fn = OtherAxes.functions[name]
    out = []
    for i, p in enumerate(fn.params):
        shape = tuple(d if isinstance(d, int) else s for d in p.type.shape)
        if p.name == "idx":  # positions into the gathered axis (16 long), some repeated
            g = torch.Generator().manual_seed(seed + i)
            out.append(torch.randint(0, 16, shape, generator=g).to(p.type.dtype.torch_dtype))
        else:
            out.append(_distinct(shape, p.type.dtype.torch_dtype, seed + i))
    return tuple(out)


EXPECT = {"columns": allclose(atol=0, rtol=1e-6), "repeat_columns": allclose(atol=0, rtol=1e-6),
          "softmax_columns": allclose(atol=1e-6, rtol=1e-6),
          "softmax_middle": allclose(atol=0, rtol=2**-7), "layer_norm_columns": allclose(atol=1e-6, rtol=1e-6),
          "layer_norm_middle": allclose(atol=1e-6, rtol=2**-7)}
ROWS = {"topk_columns": (3, 7, 130), "topk_middle": (3, 7, 130)}


@pytest.mark.parametrize("name", sorted(OtherAxes.functions))
def test_other_axes_match_the_evaluator(name: str) -> None:
    fn = OtherAxes.functions[name]
    compiled = jit(OtherAxes, target="cpu").functions[name]
    paths = output_paths(fn)
    for s in ROWS.get(name, (1, 7, 130)):
        report = check(compiled_only(compiled), fn, _inputs(name, s, s),
                       expect={p: [EXPECT.get(name, equal())] for p in paths})
        assert report.passed, f"{name} at {s}:\n{report}"


def test_rows_read_across_a_transpose_are_strided_views_not_copies() -> None:
    fn = lower(OtherAxes, "cpu").functions["columns"]
    assert len(fn.stages) == 1 and not fn.temps
    assert "view transpose: gmem f32[s] (1, 1, s):(8, 8, 8)" in str(fn), str(fn)  # x's columns, 8 elements apart



def test_a_column_position_outside_the_row_is_refused_before_the_kernel_runs() -> None:
    compiled = jit(OtherAxes, target="cpu").functions["gather_columns"]
    with pytest.raises(ValueError, match=r"argument idx holds the position 16 \(element 2\), outside the 16"):
        compiled(torch.zeros(3, 16), torch.tensor([0, 3, 16, 1, 2]))

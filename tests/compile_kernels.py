"""The kernels the compile-path tests jit (for the CPU here, for CUDA on the GPU), defined once so that a test
session builds each once, and what the tests feed them and expect back.

Row counts are DimVars (``rows`` from 0), so one build serves every row count a test runs, a row count
that is a multiple of nothing (7, 13) and no rows at all included; ``reductions`` and ``softmax_any_width``
also have a DimVar last axis (``cols`` from 0), so an empty reduction is one call away and a row's length
is known only at launch. ``row_kernels(hidden)`` are the bf16 row kernels the GPU bench times (RMSNorm,
residual add + RMSNorm, softmax, SwiGLU at a static hidden size).

Tolerances (``expectations``): outputs whose computation the evaluator and the kernel perform in the same
order with the same roundings (casts, bf16 elementwise ops rounding once per op, rms_norm in f32 to one bf16
rounding) still differ where torch's vectorised kernels round differently (a pairwise sum, a SLEEF exp); bf16
outputs are compared to two bf16 ulps (2**-6 relative: rms_norm rounds twice, before and after the weight
multiply, and a sum in another order may tip either rounding) plus an absolute floor, f32 outputs to 1e-5
relative (a few ulps accumulated over a row of at most 96 elements) plus 1e-6 absolute for values near 0.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from tilefoundry import func
from tilefoundry.dsl import ConstTensor, DimVar, Mesh, Tensor, Topology, tf
from tilefoundry.evaluator import registry
from tilefoundry.ir.core.function import Function
from tilefoundry.ir.core.module import Module
from tilefoundry.runtime import CompiledModule
from tilefoundry.runtime.check import allclose, equal

ROWS = DimVar("rows", 0, 1 << 20)
COLS = DimVar("cols", 0, 4096)
HIDDEN = 96
FFN = 80


@func
def rms_norm(x: Tensor[(ROWS, HIDDEN), "bf16"], weight: ConstTensor[(HIDDEN,), "bf16"]):
    y = tf.rms_norm(x, weight, 1e-6)
    return y


@func
def rms_norm_written_out(x: Tensor[(ROWS, HIDDEN), "f32"], weight: ConstTensor[(HIDDEN,), "f32"]):
    mean_square = tf.reduce(x * x, axes=(-1,), keepdim=True, kind="mean")
    y = x * tf.rsqrt(mean_square + 1e-5) * weight
    return y


@func
def softmax(x: Tensor[(2, ROWS, HIDDEN), "f32"]):
    y = tf.softmax(x, axis=-1)
    return y


@func
def softmax_written_out(x: Tensor[(ROWS, HIDDEN), "bf16"]):
    xf = tf.cast(x, "f32")
    e = tf.exp(xf - tf.reduce(xf, axes=(-1,), kind="max"))
    p = e / tf.reduce(e, axes=(-1,), kind="sum")
    return tf.cast(p, "bf16")


@func
def swiglu(gate: Tensor[(ROWS, FFN), "bf16"], up: Tensor[(ROWS, FFN), "bf16"]):
    h = tf.silu(gate) * up
    return h


@func
def residual_rms_norm(x: Tensor[(ROWS, HIDDEN), "bf16"], residual: Tensor[(ROWS, HIDDEN), "bf16"],
                      weight: ConstTensor[(HIDDEN,), "bf16"]):
    h = x + residual
    y = tf.rms_norm(h, weight, 1e-6)
    return y, h


@func
def reductions(x: Tensor[(ROWS, COLS), "f32"]):
    total = tf.reduce(x, axes=(-1,), keepdim=False, kind="sum")
    largest = tf.reduce(x, axes=(-1,), keepdim=True, kind="max")
    mean = tf.reduce(x, axes=(-1,), keepdim=False, kind="mean")
    return total, largest, mean


@func
def cast_chain(x: Tensor[(ROWS, HIDDEN), "f32"]):
    narrow = tf.cast(tf.cast(x, "bf16"), "f16")
    back = tf.cast(narrow, "f32") * 3.0
    whole = tf.cast(tf.cast(back, "i32"), "f32")
    return back, whole, tf.cast(x, "bf16")


@func
def elementwise(x: Tensor[(ROWS, HIDDEN), "f32"], y: Tensor[(ROWS, HIDDEN), "f32"]):
    positive = x > 0.0
    leaky = tf.where(positive, x, x * 0.125)
    bounded = tf.clamp(leaky + tf.tanh(y), -1.5, 2.0)
    mixed = tf.max(bounded, tf.gelu(y, approximate="tanh")) - tf.abs(tf.min(x, y)) / (tf.exp(y) + 1.0)
    return mixed, positive, tf.sigmoid(x) * tf.sqrt(tf.square(y) + 1.0)


@func
def softmax_any_width(x: Tensor[(ROWS, COLS), "f32"]):
    y = tf.softmax(x, axis=-1)
    return y


@func
def scaled_segments(x: Tensor[(ROWS, 2048), "bf16"], weight: ConstTensor[(2048,), "bf16"],
                    scale: Tensor[(ROWS, 1), "f32"]):
    """No reduction: on CUDA each row is cut into segments (CTAs) of its own; the weight is read at the
    segment's place in the row, the per-row scale at the segment's row."""
    y = tf.cast(tf.cast(x, "f32") * tf.cast(weight, "f32") * scale, "bf16")
    return y


@func
def masked_softmax(x: Tensor[(ROWS, HIDDEN), "f32"], keep: Tensor[(ROWS, HIDDEN), "bool"]):
    """Infinite literals: -inf where the mask drops a score, and the +inf a one-sided clamp leaves as its upper
    bound (CUDA builds once refused both)."""
    scores = tf.where(keep, x, float("-inf"))
    return tf.softmax(scores, axis=-1), tf.clamp(x, min_val=0.0)


@func
def rounding_and_division(x: Tensor[(ROWS, HIDDEN), "f32"], y: Tensor[(ROWS, HIDDEN), "f32"],
                          xb: Tensor[(ROWS, HIDDEN), "bf16"], yb: Tensor[(ROWS, HIDDEN), "bf16"],
                          a: Tensor[(ROWS, HIDDEN), "i32"], b: Tensor[(ROWS, HIDDEN), "i32"],
                          c: Tensor[(ROWS, HIDDEN), "i64"], d: Tensor[(ROWS, HIDDEN), "i64"]):
    """floor_div, mod, ceil, floor and round on f32, bf16 and integers (exact: torch computes the same)."""
    return (x // y, x % y, tf.ceil(x), tf.floor(x), tf.round(x),
            xb // yb, xb % yb, tf.ceil(xb), tf.floor(xb), tf.round(xb),
            a // b, a % b, tf.ceil(a), tf.round(a), c // d, c % d, tf.floor(c))


@func
def exp2_log2_softplus_logical(x: Tensor[(ROWS, HIDDEN), "f32"], xb: Tensor[(ROWS, HIDDEN), "bf16"]):
    """exp2, log2 and softplus (its threshold crossed by the larger inputs) in f32 and bf16; the logical ops."""
    positive, small = x > 0.0, tf.abs(x) < 2.0
    return (tf.exp2(x), tf.log2(tf.abs(x)), tf.softplus(x, beta=2.0, threshold=3.0), tf.softplus(x),
            tf.exp2(xb), tf.log2(tf.abs(xb)), tf.softplus(xb, beta=0.5, threshold=4.0),
            tf.logical_and(positive, small), tf.logical_or(positive, small), tf.logical_not(positive))


@func
def argmax_rows(x: Tensor[(ROWS, HIDDEN), "f32"], n: Tensor[(ROWS, HIDDEN), "i32"]):
    """argmax along the row: NaN wins (the first one), ties go to the first position."""
    return tf.argmax(x, axis=-1), tf.argmax(n)


@func
def argmax_wide(x: Tensor[(2, ROWS, 2048), "bf16"]):
    """argmax of a bf16 row spread over 128 threads on CUDA (pairs exchanged across warps)."""
    return tf.argmax(x, axis=-1)


WIDTH = DimVar("width", 8, 4096)  # topk's row length known at launch: at least the k = 8 it picks


@func
def topk_rows(x: Tensor[(ROWS, HIDDEN), "f32"], xb: Tensor[(ROWS, HIDDEN), "bf16"]):
    """topk along the row, f32 and bf16: the 8 largest, the largest, the 2 smallest, in order (NaN counts as the
    largest; equal values come in the order of their positions)."""
    return (*tf.topk(x, 8), *tf.topk(x, 1), *tf.topk(x, 2, largest=False),
            *tf.topk(xb, 2), *tf.topk(xb, 8, largest=False))


@func
def topk_any_width(x: Tensor[(ROWS, WIDTH), "f32"], xb: Tensor[(ROWS, WIDTH), "bf16"]):
    """topk along a row whose length is known only at launch (on CUDA padded over a CTA of 256 threads)."""
    return (*tf.topk(x, 2), *tf.topk(xb, 8, largest=False))


@func
def topk_wide(x: Tensor[(2, ROWS, 2048), "bf16"]):
    """topk of a bf16 row spread over 128 threads on CUDA (each pass's pick exchanged across warps)."""
    return (*tf.topk(x, 8), *tf.topk(x, 1, largest=False))


TOPK = (topk_rows, topk_any_width, topk_wide)

ACCEPTANCE = (rms_norm, rms_norm_written_out, softmax, softmax_written_out, swiglu, residual_rms_norm,
              reductions, cast_chain, elementwise, softmax_any_width, scaled_segments, masked_softmax,
              rounding_and_division, exp2_log2_softplus_logical, argmax_rows, argmax_wide, *TOPK)



@func(topologies=(Topology("cta", 4), Topology("thread", 128)))
def placed_rows(x: Tensor[(8, 256), "f32"]):
    """Its own placement: two rows a CTA staged in shared memory over 128 threads (4 warps), a mean across them."""
    with Mesh(("cta",), layout=(4,), names=("blk",)) as m:
        with Mesh(("thread",), layout=(128,), names=("lane",)) as t:
            staged = tf.reshard(x, (8 @ m.blk, 256 @ t.lane), "smem")
            y = tf.where(staged > 0.0, staged, staged * 0.5)
            mean = tf.reduce(y, axes=(-1,), keepdim=False, kind="mean")
    return y, mean


BENCH_HIDDEN = (2048, 8192)


def row_kernels(hidden: int) -> tuple[Function, ...]:
    """RMSNorm, residual add + RMSNorm, softmax and SwiGLU on bf16 rows of ``hidden`` elements (any number
    of rows), named ``<kernel>_<hidden>``."""

    def rms_norm(x: Tensor[(ROWS, hidden), "bf16"], weight: ConstTensor[(hidden,), "bf16"]):
        return tf.rms_norm(x, weight, 1e-6)

    def add_rms_norm(x: Tensor[(ROWS, hidden), "bf16"], residual: Tensor[(ROWS, hidden), "bf16"],
                     weight: ConstTensor[(hidden,), "bf16"]):
        h = x + residual
        return tf.rms_norm(h, weight, 1e-6), h

    def softmax(x: Tensor[(ROWS, hidden), "bf16"]):
        return tf.softmax(x, axis=-1)

    def swiglu(gate: Tensor[(ROWS, hidden), "bf16"], up: Tensor[(ROWS, hidden), "bf16"]):
        return tf.silu(gate) * up

    scope = {"hidden": hidden}
    return tuple(Function(f, name=f"{f.__name__}_{hidden}", localns=scope)
                 for f in (rms_norm, add_rms_norm, softmax, swiglu))


# -- what the tests feed the kernels and expect back -----------------------------------------------------

BF16 = allclose(atol=1e-3, rtol=2**-6)
F32 = allclose(atol=1e-6, rtol=1e-5)


def rand(shape: tuple[int, ...], dtype: torch.dtype, seed: int, device: str | torch.device = "cpu") -> torch.Tensor:
    """Normal random numbers of ``dtype`` from ``seed`` (drawn on the CPU, so every device sees the same)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(dtype).to(device)


def inputs_for(kernel: Any, rows: int, device: str | torch.device = "cpu", cols: int = 33) -> tuple[torch.Tensor, ...]:
    """The inputs of an acceptance or row kernel at ``rows`` rows (``cols``: the DimVar width)."""
    bf, f = torch.bfloat16, torch.float32
    h, ffn = HIDDEN, FFN

    def r(shape: tuple[int, ...], dtype: torch.dtype, seed: int, scale: float = 1.0) -> torch.Tensor:
        return rand(shape, dtype, seed, device) * scale

    name, _, width = kernel.name.rpartition("_")
    if width.isdigit():  # a row kernel
        w = int(width)
        return {
            "rms_norm": lambda: (r((rows, w), bf, 1), r((w,), bf, 2)),
            "add_rms_norm": lambda: (r((rows, w), bf, 3), r((rows, w), bf, 4), r((w,), bf, 5)),
            "softmax": lambda: (r((rows, w), bf, 6, 4.0),),
            "swiglu": lambda: (r((rows, w), bf, 7), r((rows, w), bf, 8)),
        }[name]()
    return {
        "rms_norm": lambda: (r((rows, h), bf, 1), r((h,), bf, 2)),
        "rms_norm_written_out": lambda: (r((rows, h), f, 3), r((h,), f, 4)),
        "softmax": lambda: (r((2, rows, h), f, 5, 4.0),),
        "softmax_written_out": lambda: (r((rows, h), bf, 6, 4.0),),
        "swiglu": lambda: (r((rows, ffn), bf, 7), r((rows, ffn), bf, 8)),
        "residual_rms_norm": lambda: (r((rows, h), bf, 9), r((rows, h), bf, 10), r((h,), bf, 11)),
        "reductions": lambda: (r((rows, cols), f, 12),),
        "cast_chain": lambda: (r((rows, h), f, 13, 100.0),),
        "elementwise": lambda: (r((rows, h), f, 14), r((rows, h), f, 15)),
        "softmax_any_width": lambda: (r((rows, cols), f, 16, 4.0),),
        "scaled_segments": lambda: (r((rows, 2048), bf, 18), r((2048,), bf, 19), r((rows, 1), f, 20)),
        "placed_rows": lambda: (r((8, 256), f, 17),),
        "masked_softmax": lambda: (r((rows, h), f, 21, 4.0), _keep(rows, h, 22, device)),
        "rounding_and_division": lambda: _rounding_inputs(rows, h, device),
        "exp2_log2_softplus_logical": lambda: (r((rows, h), f, 23, 6.0), r((rows, h), bf, 24, 12.0)),
        "argmax_rows": lambda: _argmax_inputs(rows, h, device),
        "argmax_wide": lambda: (_argmax_wide_input(rows, device),),
        "topk_rows": lambda: distinct_rows((rows, h), 28, device),
        "topk_any_width": lambda: distinct_rows((rows, max(cols, 8)), 29, device),
        "topk_wide": lambda: distinct_rows((2, rows, 2048), 30, device)[1:],
    }[kernel.name]()


def _rounding_inputs(rows: int, cols: int, device: str | torch.device) -> tuple[torch.Tensor, ...]:
    """Operands of rounding_and_division: .5 ties, signed zeros, negative operands and divisors, exact multiples,
    float divisors of 0 (inf and NaN, as torch), the lowest integer over -1 (it wraps, as in torch); no integer
    divisor is 0 (torch raises there: test_compile_elementwise.py checks the kernel's defined 0)."""
    g = torch.Generator().manual_seed(25)
    x = torch.randn((rows, cols), generator=g) * 8.0
    y = torch.randn((rows, cols), generator=g) * 3.0
    if rows:
        ties = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.0, -0.0, 7.0, -7.0, 6.0, -6.0, 1e30, -3.0])
        x[0, :len(ties)] = ties
        y[0, :len(ties)] = torch.tensor([2.0, -2.0, 0.5, 2.0, -0.5, 3.0, -2.0, 2.0, 0.0, 0.0, -3.0, 3.0, 7.0, 0.0])
    a = torch.randint(-1000, 1000, (rows, cols), generator=g, dtype=torch.int32)
    b = torch.randint(1, 12, (rows, cols), generator=g, dtype=torch.int32)
    b = torch.where(torch.rand((rows, cols), generator=g) < 0.5, -b, b)
    c = torch.randint(-(1 << 40), 1 << 40, (rows, cols), generator=g, dtype=torch.int64)
    d = torch.randint(1, 1 << 20, (rows, cols), generator=g, dtype=torch.int64) * torch.where(b < 0, -1, 1).long()
    if rows:
        a[0, :3] = torch.tensor([-(1 << 31), 7, -7], dtype=torch.int32)
        b[0, :3] = torch.tensor([-1, -1, 1], dtype=torch.int32)
        c[0, :2] = torch.tensor([-(1 << 63), -5])
        d[0, :2] = torch.tensor([-1, 5])
    return tuple(t.to(device) for t in (x, y, x.bfloat16(), y.bfloat16(), a, b, c, d))


def _argmax_inputs(rows: int, cols: int, device: str | torch.device) -> tuple[torch.Tensor, ...]:
    """Rows with two NaNs (the first wins), all equal, a tie of the largest, all -inf; integers with many ties."""
    g = torch.Generator().manual_seed(26)
    x = torch.randn((rows, cols), generator=g)
    if rows > 4:
        x[1, 50], x[1, 5] = float("nan"), float("nan")
        x[2, :] = 0.25
        x[3, 80], x[3, 7] = 9.0, 9.0
        x[4, :] = float("-inf")
    n = torch.randint(-4, 4, (rows, cols), generator=g, dtype=torch.int32)
    return x.to(device), n.to(device)


def _argmax_wide_input(rows: int, device: str | torch.device) -> torch.Tensor:
    """bf16 rows whose picks lie in other warps than the first: NaN at 1500 and 1800, the largest last, a tie at
    100 and 1900, a row all equal."""
    x = torch.randn((2, rows, 2048), generator=torch.Generator().manual_seed(27)).bfloat16()
    if rows > 3:
        x[0, 0, 1800], x[0, 0, 1500] = float("nan"), float("nan")
        x[0, 1, 2047] = 100.0
        x[1, 2, 1900], x[1, 2, 100] = 50.0, 50.0
        x[1, 3, :] = -1.0
    return x.to(device)


def distinct_rows(shape: tuple[int, ...], seed: int, device: str | torch.device = "cpu") -> tuple[torch.Tensor, ...]:
    """f32 and bf16 rows of ``shape`` in which no value occurs twice (so that a top-k has one answer, positions
    included: torch leaves the order of equal values open), with one NaN, an inf and a -inf in some rows. The
    bf16 values are distinct bit patterns, half of them negative."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g)
    cols = shape[-1]
    magnitudes = torch.arange(0x3000, 0x3000 + cols, dtype=torch.int32)  # finite, nonzero, distinct
    pool = torch.cat((magnitudes, magnitudes | 0x8000))
    choice = torch.argsort(torch.rand((*shape[:-1], 2 * cols), generator=g), dim=-1)[..., :cols]
    xb = pool[choice].to(torch.int16).view(torch.bfloat16)
    if x.numel() and x.shape[-2] > 3:
        for t in (x, xb):
            row = t.reshape(-1, cols)
            row[1, cols // 2] = float("nan")  # the largest: the first pick of largest, never one of smallest
            row[2, 3], row[2, cols - 1] = float("inf"), float("-inf")
            row[3, 0] = float("-inf")
    return x.to(device), xb.to(device)


def topk_disagreements(x: torch.Tensor, values: torch.Tensor, indices: torch.Tensor, k: int,
                       largest: bool) -> list[str]:
    """How a compiled top-k of ``x``'s rows differs from torch.topk (sorted): its values must equal torch's (NaN
    where torch has NaN), its indices must pick those values from ``x``, no position twice, equal values in the
    order of their positions (the order the compiled kernels state), and where a value occurs once in its
    row, its index must be torch's."""
    ref_values, ref_indices = torch.topk(x.float(), k, dim=-1, largest=largest)
    x, values, indices = x.cpu().float(), values.cpu().float(), indices.cpu()
    ref_values, ref_indices = ref_values.cpu(), ref_indices.cpu()
    problems = []
    if not torch.equal(values.isnan(), ref_values.isnan()) or not torch.equal(
            values.nan_to_num(0.0), ref_values.nan_to_num(0.0)):
        problems.append("values differ from torch.topk's")
    if indices.numel() and (indices.min() < 0 or indices.max() >= x.shape[-1]):
        return [*problems, f"indices outside the row: {indices}"]
    picked = x.gather(-1, indices)
    if not torch.equal(picked.isnan(), values.isnan()) or not torch.equal(picked.nan_to_num(0.0),
                                                                           values.nan_to_num(0.0)):
        problems.append("the indices do not pick the values")
    if k > 1 and indices.numel():
        taken = indices.sort(dim=-1).values
        if (taken[..., 1:] == taken[..., :-1]).any():
            problems.append("a position is picked twice")
        same = (values[..., 1:] == values[..., :-1]) | (values[..., 1:].isnan() & values[..., :-1].isnan())
        if (same & (indices[..., 1:] < indices[..., :-1])).any():
            problems.append("equal values are not in the order of their positions")
    counts = (x.unsqueeze(-1) == ref_values.unsqueeze(-2)).sum(-2)  # how often each picked value is in its row
    counts = torch.where(ref_values.isnan(), x.isnan().sum(-1, keepdim=True), counts)
    once = counts == 1
    if not torch.equal(indices[once], ref_indices[once]):
        problems.append("an index of a value that occurs once in its row differs from torch.topk's")
    return problems


def _keep(rows: int, cols: int, seed: int, device: str | torch.device) -> torch.Tensor:
    """A random mask keeping about 70% of a row, its first column always (no row is dropped whole)."""
    keep = torch.rand((rows, cols), generator=torch.Generator().manual_seed(seed)) > 0.3
    keep[:, 0] = True
    return keep.to(device)


def expectations(kernel: Any) -> dict[str, list]:
    """``check``'s expectations per output of ``kernel`` (see the module docstring for the tolerances)."""
    fn = kernel.functions[kernel.entry] if isinstance(kernel, Module) else kernel
    ref = fn.output_types
    leaves = ref if isinstance(ref, tuple) else (ref,)
    paths = ["output"] if not isinstance(ref, tuple) else [f"output[{i}]" for i in range(len(leaves))]
    out = {}
    for path, t in zip(paths, leaves):
        if t.dtype.name == "bool" or not t.dtype.is_float:
            out[path] = [equal()]
        elif kernel.name == "rounding_and_division" and path == "output[5]":
            # bf16 floor_div: the exact floor, computed in f32 and rounded once; torch's CPU kernel rounds each step
            # to bf16, which may give the floor of a quotient rounded past an integer (one less: -91 for
            # 4.97 // -0.0557 = floor(-89.26)), or move a large quotient by a bf16 ulp
            out[path] = [allclose(atol=1.0, rtol=2**-7, equal_nan=True)]
        elif kernel.name == "rounding_and_division":
            out[path] = [equal(equal_nan=True)]  # exact in the compute type, rounded once, as torch computes
        elif kernel.name in {k.name for k in TOPK}:
            out[path] = [equal(equal_nan=True)]  # values picked from the input, as they are
        elif kernel.name == "cast_chain":
            out[path] = [equal()]  # conversions and one multiply by 3 round identically
        else:
            out[path] = [BF16 if t.dtype.name == "bf16" else F32]
    return out


@contextmanager
def evaluator_refuses() -> Iterator[None]:
    """Every evaluator handler raises while the block runs: whatever answers, it is not the evaluator."""
    saved = dict(registry.HANDLERS)

    def refuse(node: Any, *args: Any) -> Any:
        raise AssertionError(f"the evaluator ran {node.op} inside a compiled call")

    try:
        registry.HANDLERS.update({op: refuse for op in saved})
        yield
    finally:
        registry.HANDLERS.clear()
        registry.HANDLERS.update(saved)


def output_templates(compiled: CompiledModule, inputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    """The outputs the entry allocates for ``inputs`` (auto-alloc: shapes, dtypes and device from its ABI)."""
    with evaluator_refuses():
        made = compiled(*inputs)
    return made if isinstance(made, tuple) else (made,)


def poisoned_like(t: torch.Tensor) -> torch.Tensor:
    """A tensor like ``t`` holding what no kernel computes: NaN, or -7 / True for integers and booleans."""
    if t.dtype.is_floating_point:
        return torch.full_like(t, float("nan"))
    return torch.full_like(t, True if t.dtype == torch.bool else -7)


def output_paths(fn: Function) -> list[str]:
    """The paths ``check`` names ``fn``'s outputs by: ``output``, or ``output[i]`` for each of a tuple."""
    outs = fn.output_types
    return [f"output[{i}]" for i in range(len(outs))] if isinstance(outs, tuple) else ["output"]


def compiled_only(compiled: CompiledModule) -> Callable[..., Any]:
    """The compiled entry, called pre-alloc with poisoned outputs (all of which must be overwritten), the
    evaluator refusing to run meanwhile."""

    def call(*inputs: torch.Tensor) -> Any:
        outs = [poisoned_like(t) for t in output_templates(compiled, inputs)]
        with evaluator_refuses():
            result = compiled(*inputs, *outs)
        return result

    return call


def caches_in_place(compiled: CompiledModule, fn: Any, args: tuple[torch.Tensor, ...]) -> tuple[Any, Any, list]:
    """``compiled`` called with ``fn``'s ``cache_k`` and ``cache_v`` passed as their own outputs (clones of those in
    ``args``) and its first output poisoned, the evaluator refusing to run meanwhile. Returns what it returned, what
    ``fn`` returns for ``args``, and the two caches it was given."""
    want = fn(*args)
    names = [p.name for p in fn.params]
    inputs = list(args)
    caches = [args[names.index(n)].clone() for n in ("cache_k", "cache_v")]
    inputs[names.index("cache_k")], inputs[names.index("cache_v")] = caches
    with evaluator_refuses():
        got = compiled(*inputs, poisoned_like(want[0]), *caches)
    return got, want, caches

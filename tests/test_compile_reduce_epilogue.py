"""An argmax, or a sum, mean, maximum, minimum or largest magnitude, of a matmul's rows runs inside the matmul: each
CTA's part of every row found in the matmul's kernel, the parts merged by a second kernel of one CTA
(``lower/reduce_epilogue.py``), jitted for the CPU against torch and the evaluator, built with nvcc
(tests/test_compile_cuda_build.py), run on the H200 in tests/gpu/test_compile_stages.py.

The result is torch.argmax's: the first largest element of each row, a NaN counting as larger than any number
(the first NaN wins). Weights and activations of small integers make every sum exact in f32 and bf16 (so the
compiled kernel and torch compare whole rows of exact ties, across the CTAs' column tiles); where a norm or an
epilogue makes values inexact, each row's largest logit is planted well clear of the rest, and the compiled
function is checked against the evaluator (outputs poisoned with NaN, the evaluator refusing to run inside the
compiled call).
"""

from __future__ import annotations

import pytest
import torch

from tests.compile_kernels import compiled_only
from tilefoundry import func, jit, lower, module
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, tf
from tilefoundry.runtime.check import allclose, check, equal
from tilefoundry.target import CudaTarget

pytestmark = pytest.mark.usefixtures("compile_cache")

VOCAB = 1000  # on the CPU, 8 CTAs of 125 columns
K = 40
M = DimVar("m", 1, 64)


def _linear(x, w):
    return tf.matmul(x, tf.transpose(w, (1, 0)))


@module(entry="choose_f32")
class Argmaxes:
    @func
    def choose_f32(x: Tensor[(3, K), "f32"], w: ConstTensor[(VOCAB, K), "f32"]):
        return tf.argmax(_linear(x, w), axis=-1)

    @func
    def choose_bf16(x: Tensor[(3, K), "bf16"], wh: ConstTensor[(VOCAB, K), "bf16"]):
        return tf.argmax(_linear(x, wh), axis=-1)

    @func
    def normed_head(x: Tensor[(1, K), "bf16"], norm: ConstTensor[(K,), "bf16"], wh: ConstTensor[(VOCAB, K), "bf16"]):
        """Greedy decoding's head: the final norm as the matmul's prologue, the choice as its epilogue."""
        return tf.argmax(_linear(tf.rms_norm(x, norm, 1e-6), wh), axis=-1)

    @func
    def scaled(x: Tensor[(2, K), "f32"], w: ConstTensor[(VOCAB, K), "f32"], b: ConstTensor[(VOCAB,), "f32"]):
        """Elementwise ops between the matmul and the argmax: its epilogue, then the choice."""
        return tf.argmax((_linear(x, w) + b) * 0.5, axis=-1)

    @func
    def logits_too(x: Tensor[(2, K), "bf16"], wh: ConstTensor[(VOCAB, K), "bf16"]):
        """The logits returned as well: stored to the caller's output, the choice read from them."""
        logits = _linear(x, wh)
        return logits, tf.argmax(logits, axis=-1)

    @func
    def vocab_head(x: Tensor[(1, 128), "bf16"], wv: ConstTensor[(131072, 128), "bf16"]):
        """A head whose weight (32 MiB) takes CUDA's streamed schedule: the parts follow the ring's matmul."""
        return tf.argmax(_linear(x, wv), axis=-1)

    @func
    def any_rows(x: Tensor[(M, K), "f32"], w: ConstTensor[(VOCAB, K), "f32"]):
        """A row count known only at launch: the argmax stays a row-wise stage of its own."""
        return tf.argmax(_linear(x, w), axis=-1)

    @func
    def many_rows(x: Tensor[(17, K), "f32"], w: ConstTensor[(VOCAB, K), "f32"]):
        """More rows than a fused argmax takes (16): a row-wise stage of its own."""
        return tf.argmax(_linear(x, w), axis=-1)


def _small_integers(shape: tuple[int, ...], g: torch.Generator, dtype: torch.dtype) -> torch.Tensor:
    return torch.randint(-1, 2, shape, generator=g).to(dtype)


def _exact_case(name: str, rows: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    dtype = torch.bfloat16 if "bf16" in name else torch.float32
    g = torch.Generator().manual_seed(seed)
    return _small_integers((rows, K), g, dtype), _small_integers((VOCAB, K), g, dtype)


def _torch_choice(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.argmax(x.double() @ w.double().t(), dim=-1)


def test_the_argmax_runs_in_the_matmuls_kernel_and_a_merge() -> None:
    tir = lower(Argmaxes, "cpu")
    for name in ("choose_f32", "choose_bf16", "normed_head", "scaled", "logits_too", "vocab_head"):
        fn = tir.functions[name]
        assert [s.fn.schedule.placement for s in fn.stages] == ["matmul", "reductions"], name
        text = str(fn)
        assert "reduce_parts<>(argmax_op" in text and "reduce_merges<>(argmax_op" in text, name
    # each CTA writes one pair a row: 8 CTAs of 125 columns here
    parts = {t.name: tuple(t.type.shape) for t in tir.functions["choose_f32"].temps}
    assert sorted(parts.values()) == [(3, VOCAB), (8, 3), (8, 3)], parts
    # the logits returned: stored to the caller's output, no temporary for them
    assert {tuple(t.type.shape) for t in tir.functions["logits_too"].temps} == {(8, 2)}
    for name in ("any_rows", "many_rows"):
        assert [s.fn.schedule.placement for s in tir.functions[name].stages] == ["matmul", "rows"], name


def test_on_cuda_the_parts_follow_the_streamed_matmul_without_a_wait_of_their_own() -> None:
    """CUDA's streamed schedule (a ring of bulk copies, 256 CTAs of 512 columns here) then each CTA's part; the
    kernel waits for the one before it inside ops::matmul (after its weights' prefetch) only, the part reading
    what the CTA's matmul wrote."""
    from tilefoundry.codegen import generate

    fn = lower(Argmaxes.functions["vocab_head"], CudaTarget()).functions["vocab_head"]
    mm, merge = (s.fn for s in fn.stages)
    assert (mm.schedule.grid, merge.schedule.grid) == (256, 1)
    assert "ring" in str(mm) and "reduce_parts<>(argmax_op" in str(mm) and "reduce_merges<>(argmax_op" in str(merge)
    source = generate(lower(Argmaxes.functions["vocab_head"], CudaTarget())).source
    kernel = source[source.index("vocab_head_stage0_kernel("):source.index("vocab_head_stage0_argmax_kernel(")]
    assert "wait_for_earlier_kernels();" not in kernel
    assert "ops::reduce_parts(wv_tile" not in kernel  # the part reads the result's tile
    assert "ops::reduce_parts(" in kernel and "ops::part_of<ops::argmax_op>(" in kernel


@pytest.mark.parametrize("name", ["choose_f32", "choose_bf16"])
def test_exact_ties_choose_the_first_largest_across_the_ctas(name: str) -> None:
    compiled = jit(Argmaxes, target="cpu").functions[name]
    ties = 0
    for seed in range(6):
        x, w = _exact_case(name, 3, seed)
        want = _torch_choice(x, w)
        out = torch.full((3,), -7, dtype=torch.int64)
        compiled(x, w, out)
        assert torch.equal(out, want), (seed, out, want)
        logits = x.double() @ w.double().t()
        ties += int((logits == logits.max(dim=-1, keepdim=True).values).sum() - 3)
    assert ties > 0  # rows whose largest value is found in several columns, so the first one was chosen


def test_a_row_whose_largest_repeats_in_every_cta_takes_the_first() -> None:
    compiled = jit(Argmaxes, target="cpu").functions["choose_f32"]
    x = torch.ones(3, K)
    w = torch.zeros(VOCAB, K)
    for col in (997, 130, 612, 131, 250):  # the largest value in several CTAs' tiles, the first in the second
        w[col] = 1.0
    out = torch.empty(3, dtype=torch.int64)
    compiled(x, w, out)
    assert out.tolist() == [130, 130, 130]


@pytest.mark.parametrize("name", ["choose_f32", "choose_bf16"])
def test_nan_counts_as_the_largest_and_the_first_nan_wins(name: str) -> None:
    compiled = jit(Argmaxes, target="cpu").functions[name]
    x, w = _exact_case(name, 3, 11)
    w[870, 5] = float("nan")  # columns 870 and 333 are NaN in every row (NaN times 0 is NaN)
    w[333, 9] = float("nan")
    x[1, 2] = float("nan")  # row 1 is NaN everywhere: its first column
    out = torch.empty(3, dtype=torch.int64)
    compiled(x, w, out)
    assert out.tolist() == [333, 0, 333]
    assert torch.equal(out, torch.argmax(x.float() @ w.float().t(), dim=-1))


def test_infinite_logits_are_ordered_as_numbers() -> None:
    compiled = jit(Argmaxes, target="cpu").functions["choose_f32"]
    x, w = _exact_case("choose_f32", 3, 5)
    w[:, 0], x[:, 0] = float("-inf"), 1.0  # every logit -inf ...
    w[400, 0] = float("inf")  # ... but column 400's, +inf
    x[2, 0] = -1.0  # row 2 negated: column 400 the one -inf, every other +inf
    out = torch.empty(3, dtype=torch.int64)
    compiled(x, w, out)
    assert out.tolist() == [400, 400, 0]
    assert torch.equal(out, torch.argmax(x @ w.t(), dim=-1))


def _planted(name: str, seed: int) -> tuple[torch.Tensor, ...]:
    """Inputs whose every row has one logit well clear of the rest, each in a different CTA's columns."""
    fn = Argmaxes.functions[name]
    g = torch.Generator().manual_seed(seed)
    out = []
    for p in fn.params:
        shape = tuple(p.type.shape)
        t = torch.randn(shape, generator=g)
        if p.name == "norm":
            t = 0.75 + 0.5 * torch.rand(shape, generator=g)  # positive: the planted sign pattern survives it
        out.append(t)
    x = out[0]
    w = next(t for t, p in zip(out, fn.params) if p.name in ("w", "wh", "wv"))
    w.div_(w.shape[-1] ** 0.5)
    middle = (w.shape[0] - VOCAB) // 2  # vocab_head's planted columns in its middle CTAs
    for r in range(x.shape[0]):  # a logit of about 2 * |x|_1 (an rms-normed x: about 1.6 K), the others about N(0, 1)
        w[middle + 150 * r + 77] = torch.sign(x[r]) * 2.0
    return tuple(t.to(p.type.dtype.torch_dtype) for t, p in zip(out, fn.params))


@pytest.mark.parametrize("name", ["normed_head", "scaled", "logits_too", "vocab_head"])
def test_a_choice_after_a_norm_or_an_epilogue_matches_the_evaluator(name: str) -> None:
    compiled = jit(Argmaxes, target="cpu").functions[name]
    fn = Argmaxes.functions[name]
    expect = {"output": [equal()]}
    if name == "logits_too":
        expect = {"output[0]": [allclose(atol=2**-6, rtol=2**-6)], "output[1]": [equal()]}
    for seed in range(3):
        inputs = _planted(name, seed)
        report = check(compiled_only(compiled), fn, inputs, expect=expect)
        assert report.passed, f"{name}, seed {seed}:\n{report}"


@pytest.mark.parametrize("rows", [1, 5, 16, 17, 40])
def test_an_argmax_not_fused_is_as_correct(rows: int) -> None:
    compiled = jit(Argmaxes, target="cpu").functions["any_rows"]
    x, w = _exact_case("choose_f32", rows, rows)
    out = torch.empty(rows, dtype=torch.int64)
    compiled(x, w, out)
    assert torch.equal(out, _torch_choice(x, w))
    if rows == 17:
        fixed = jit(Argmaxes, target="cpu").functions["many_rows"]
        again = torch.empty(rows, dtype=torch.int64)
        fixed(x, w, again)
        assert torch.equal(again, out)


@func
def vocab_any(x: Tensor[(2, K), "f32"], w: Tensor[(DimVar("v", 1, 100000), K), "f32"]):
    return tf.argmax(_linear(x, w), axis=-1)


@func
def integer_logits(x: Tensor[(2, K), "i32"], w: ConstTensor[(300, K), "i32"]):
    return tf.argmax(_linear(x, w), axis=-1)


def test_a_vocabulary_known_at_launch_is_one_tile_and_integer_results_stay_unfused() -> None:
    """A DimVar N: one CTA's tile, one part a row. An integer result keeps the argmax a row-wise stage (the parts
    fold values as float, which not every integer survives)."""
    assert [s.fn.schedule.placement for s in lower(vocab_any, "cpu").functions["vocab_any"].stages] == [
        "matmul", "reductions"]
    assert [s.fn.schedule.placement for s in lower(integer_logits, "cpu").functions["integer_logits"].stages] == [
        "matmul", "rows"]
    compiled = jit(vocab_any, target="cpu")
    g = torch.Generator().manual_seed(4)
    for vocab in (1, 7, 5000):
        x, w = _small_integers((2, K), g, torch.float32), _small_integers((vocab, K), g, torch.float32)
        out = torch.empty(2, dtype=torch.int64)
        compiled(x, w, out)
        assert torch.equal(out, _torch_choice(x, w)), vocab
    big = jit(integer_logits, target="cpu")
    x = torch.zeros(2, K, dtype=torch.int32)
    x[:, 0], x[:, 1] = 1 << 12, 1
    w = torch.zeros(300, K, dtype=torch.int32)
    w[2, 0] = w[205, 0] = 1 << 12  # column 2: 2**24; column 205: 2**24 + 1, the same float
    w[205, 1] = 1
    out = torch.empty(2, dtype=torch.int64)
    big(x, w, out)
    assert out.tolist() == [205, 205]


@module(entry="greedy")
class Reductions:
    @func
    def greedy(x: Tensor[(1, K), "bf16"], norm: ConstTensor[(K,), "bf16"], wh: ConstTensor[(VOCAB, K), "bf16"]):
        """Greedy decoding's whole choice (the engine's choose slot): the logits, the token, and whether every logit
        is finite, from the row's largest and smallest (a NaN wins both; x - x is 0 for a finite x only), that last
        test a row-wise stage after the merge."""
        logits = _linear(tf.rms_norm(x, norm, 1e-6), wh)
        hi = tf.reduce(logits, axes=(-1,), keepdim=False, kind="max")
        lo = tf.reduce(logits, axes=(-1,), keepdim=False, kind="min")
        finite = tf.cast(tf.eq((hi - hi) + (lo - lo), 0.0), "i64")
        return logits, tf.argmax(logits, axis=-1), finite

    @func
    def stats(x: Tensor[(3, K), "f32"], w: ConstTensor[(VOCAB, K), "f32"]):
        """Every kind a reduce has, of one matmul's rows, keeping the reduced axis or not."""
        y = _linear(x, w)
        return (tf.reduce(y, axes=(-1,), keepdim=True, kind="sum"), tf.reduce(y, axes=(1,), keepdim=False, kind="mean"),
                tf.reduce(y, (-1,), False, "max"), tf.reduce(y, (-1,), False, "min"),
                tf.reduce(y, (-1,), True, "abs_max"))

    @func
    def capped(x: Tensor[(2, K), "bf16"], wh: ConstTensor[(VOCAB, K), "bf16"]):
        """Soft-capped logits (the matmul's epilogue), their sum and their argmax fused after it."""
        y = tf.tanh(_linear(x, wh) * 0.1) * 30.0
        return tf.reduce(y, (-1,), False, "sum"), tf.argmax(y, axis=-1)

    @func
    def partly(x: Tensor[(2, K), "f32"], w: ConstTensor[(VOCAB, K), "f32"]):
        """An argmax of the logits fuses; a sum of twice them reads another value: a row-wise stage after it,
        reading the logits from memory."""
        y = _linear(x, w)
        return tf.argmax(y, axis=-1), tf.reduce(y * 2.0, (-1,), False, "sum")


def test_reductions_of_a_matmuls_rows_run_in_its_kernel_and_a_merge() -> None:
    tir = lower(Reductions, "cpu")
    stages = {name: [s.fn.schedule.placement for s in fn.stages] for name, fn in tir.functions.items()}
    assert stages == {"greedy": ["matmul", "reductions", "rows"], "stats": ["matmul", "reductions"],
                      "capped": ["matmul", "reductions"], "partly": ["matmul", "reductions", "rows"]}, stages
    text = str(tir.functions["stats"])
    # one call folds every reduction's part in one pass over the tile, one merges them all
    kinds = "sum_op, mean_op, max_op, min_op, absmax_op"
    assert text.count(f"reduce_parts<>({kinds}, matmul_tile") == 1, text
    assert text.count("reduce_parts<") == 1 and text.count(f"reduce_merges<>({kinds}, ") == 1, text
    # one float a row a CTA for each reduction (8 CTAs of 125 columns), the logits' temporary
    parts = sorted(tuple(t.type.shape) for t in tir.functions["stats"].temps)
    assert parts == [(3, VOCAB)] + [(8, 3)] * 5, parts


def _inputs(fn, seed: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for p in fn.params:
        t = torch.randn(tuple(p.type.shape), generator=g)
        if p.name == "norm":
            t = 0.75 + 0.5 * t.abs().clamp(max=1)
        out.append(t.to(p.type.dtype.torch_dtype))
    return tuple(out)


@pytest.mark.parametrize("name", ["stats", "capped", "partly"])
def test_fused_reductions_match_the_evaluator(name: str) -> None:
    compiled = jit(Reductions, target="cpu").functions[name]
    fn = Reductions.functions[name]
    close = allclose(atol=1e-3, rtol=1e-4) if name != "capped" else allclose(atol=0.5, rtol=2**-6)
    expect = {f"output[{i}]": [close] for i in range(5)}
    if name == "partly":
        expect = {"output[0]": [equal()], "output[1]": [close]}
    for seed in range(3):
        inputs = _inputs(fn, seed)
        if name == "capped":  # each row's largest logit planted well clear of the rest
            inputs[1][300 + 7 * seed] = torch.sign(inputs[0][0]).to(torch.bfloat16) * 2
            inputs[1][700 - 7 * seed] = torch.sign(inputs[0][1]).to(torch.bfloat16) * 2
            expect["output[1]"] = [equal()]
        report = check(compiled_only(compiled), fn, inputs, expect={k: v for k, v in expect.items()
                                                                    if k in _outputs(name)})
        assert report.passed, f"{name}, seed {seed}:\n{report}"


def _outputs(name: str) -> set[str]:
    count = {"stats": 5, "capped": 2, "partly": 2}[name]
    return {f"output[{i}]" for i in range(count)}


def test_a_nan_wins_the_largest_and_the_smallest_as_in_torch() -> None:
    compiled = jit(Reductions, target="cpu").functions["stats"]
    x, w = _exact_case("choose_f32", 3, 2)
    w[612, 4] = float("nan")  # column 612 NaN in every row ...
    x[2, 4] = 0.0  # ... but row 2's (0 * NaN is NaN still): every row
    w[100, 0], x[1, 0] = float("-inf"), 1.0  # row 1: one -inf too
    outs = [torch.full((3, 1), 5.0), torch.full((3,), 5.0), torch.full((3,), 5.0), torch.full((3,), 5.0),
            torch.full((3, 1), 5.0)]
    compiled(x, w, *outs)
    assert all(bool(o.isnan().all()) for o in outs), outs


def test_greedy_choice_token_and_finiteness_on_the_device_path() -> None:
    compiled = jit(Reductions, target="cpu").functions["greedy"]
    fn = Reductions.functions["greedy"]
    expect = {"output[0]": [allclose(atol=2**-6, rtol=2**-6)], "output[1]": [equal()], "output[2]": [equal()]}
    x, norm, wh = _inputs(fn, 3)
    wh[411] = torch.sign(x[0]).to(torch.bfloat16) * 2  # the token, well clear of the rest
    report = check(compiled_only(compiled), fn, (x, norm, wh), expect=expect)
    assert report.passed, str(report)

    def run(x: torch.Tensor, wh: torch.Tensor) -> tuple[int, int]:
        logits, token, finite = (torch.empty(1, VOCAB, dtype=torch.bfloat16), torch.empty(1, dtype=torch.int64),
                                 torch.full((1,), 7, dtype=torch.int64))
        compiled(x, norm, wh, logits, token, finite)
        return int(token), int(finite)

    assert run(x, wh) == (411, 1)
    for value, token in ((float("inf"), 250), (float("-inf"), 411), (float("nan"), 250)):
        bad = wh.clone()
        bad[250] = 0
        bad[250, 3] = value * torch.sign(x[0, 3]).item() if value == value else value
        assert run(x, bad) == (token, 0), value


@func
def mean_any(x: Tensor[(2, K), "f32"], w: Tensor[(DimVar("v", 1, 100000), K), "f32"]):
    return tf.reduce(_linear(x, w), (-1,), False, "mean")


def test_a_mean_over_a_vocabulary_known_at_launch_divides_by_its_length() -> None:
    assert [s.fn.schedule.placement for s in lower(mean_any, "cpu").functions["mean_any"].stages] == [
        "matmul", "reductions"]
    compiled = jit(mean_any, target="cpu")
    g = torch.Generator().manual_seed(9)
    for vocab in (1, 7, 5000):
        x, w = torch.randn(2, K, generator=g), torch.randn(vocab, K, generator=g)
        out = torch.full((2,), float("nan"))
        compiled(x, w, out)
        torch.testing.assert_close(out, (x.double() @ w.double().t()).mean(-1).float(), atol=1e-4, rtol=1e-4)


RAGGED = 151936  # Qwen3's vocabulary, 2^7 x 1187
PRIME = 65537  # a prime vocabulary: no divisor of it makes a tile, its shifted last tile starts at an odd column
RK = 128


@module(entry="ragged_greedy")
class RaggedHeads:
    """Heads over vocabularies of more CUDA dot-product tiles than one wave of CTAs (lower/matmul.py): with
    reductions fused after them that may see a column twice, one wave of wider tiles covers the vocabulary, the last
    one shifted back to end at its end; else (a sum, an epilogue reading memory, the logits alone) the tiles divide
    the vocabulary."""

    @func
    def ragged_greedy(x: Tensor[(1, RK), "bf16"], norm: ConstTensor[(RK,), "bf16"],
                      wr: ConstTensor[(RAGGED, RK), "bf16"]):
        """Greedy decoding's head at Qwen3's vocabulary: the logits, the token, the largest and smallest logit."""
        logits = _linear(tf.rms_norm(x, norm, 1e-6), wr)
        return (logits, tf.argmax(logits, axis=-1), tf.reduce(logits, (-1,), False, "max"),
                tf.reduce(logits, (-1,), False, "min"))

    @func
    def ragged_odd(x: Tensor[(2, RK), "f32"], wp: ConstTensor[(PRIME, RK), "f32"]):
        """Two rows of f32 over a prime vocabulary: the token and the largest magnitude."""
        y = _linear(x, wp)
        return tf.argmax(y, axis=-1), tf.reduce(y, (-1,), True, "abs_max")

    @func
    def ragged_logits(x: Tensor[(1, RK), "bf16"], wr: ConstTensor[(RAGGED, RK), "bf16"]):
        """The sampling head: the logits alone, no reduction after them: tiles that divide the vocabulary."""
        return _linear(x, wr)

    @func
    def ragged_sum(x: Tensor[(1, RK), "bf16"], wr: ConstTensor[(RAGGED, RK), "bf16"]):
        """A sum would count the shared columns twice: not shifted."""
        y = _linear(x, wr)
        return tf.reduce(y, (-1,), False, "sum"), tf.argmax(y, axis=-1)

    @func
    def ragged_bias(x: Tensor[(1, RK), "bf16"], wr: ConstTensor[(RAGGED, RK), "bf16"],
                    bias: ConstTensor[(RAGGED,), "bf16"]):
        """An epilogue reading memory (a residual added in place would be added twice): not shifted."""
        return tf.argmax(_linear(x, wr) + bias, axis=-1)


def ragged_inputs(name: str, seed: int) -> tuple[torch.Tensor, ...]:
    """Inputs of a RaggedHeads function, each row's largest logit planted well clear of the rest in the columns the
    last two tiles share (row 0) and in the vocabulary's last column (row 1)."""
    fn = RaggedHeads.functions[name]
    g = torch.Generator().manual_seed(seed)
    out = {}
    for p in fn.params:
        t = torch.randn(tuple(p.type.shape), generator=g)
        if p.name == "norm":
            t = 0.75 + 0.5 * torch.rand(tuple(p.type.shape), generator=g)
        out[p.name] = t
    x, w = out["x"], out["wp" if "wp" in out else "wr"]
    w.div_(RK ** 0.5)
    at = (w.shape[0] - 20 - 13 * seed, w.shape[0] - 1)
    for r in range(x.shape[0]):
        w[at[r]] = torch.sign(x[r]) * 2.0
    return tuple(out[p.name].to(p.type.dtype.torch_dtype) for p in fn.params)


def test_a_vocabulary_of_many_tiles_takes_one_wave_of_wider_ones_where_columns_may_repeat() -> None:
    from tilefoundry.codegen import generate

    def first_stage(name: str):
        return lower(RaggedHeads.functions[name], CudaTarget()).functions[name].stages[0].fn

    # 1056 tiles of 144 columns (a multiple of 16) cover 151936 in one wave; the last starts 128 columns early
    mm = first_stage("ragged_greedy")
    assert mm.schedule.grid == 1056 and "ring" not in str(mm)
    assert "(row % 1056) * 18432 - (row / 1055) * 16384" in str(mm), str(mm)  # 144 and 128 rows of 128
    # a prime vocabulary: 1025 tiles of 64 columns (ceil(65537 / 1056) = 63, rounded up to 16), the last one's
    # first 63 columns shared, its logits' tile and its part's first column shifted back as its weight rows are
    odd = str(first_stage("ragged_odd"))
    assert "grid=1025 " in odd and "wp[(row % 1025) * 8192 - (row / 1024) * 8064:]" in odd, odd
    assert "matmul_tmp[(row % 1025) * 64 - (row / 1024) * 63:]" in odd and "[row * 64 - (row / 1024) * 63]" in odd
    source = generate(lower(RaggedHeads.functions["ragged_greedy"], CudaTarget())).source
    assert "- (row / 1055) * 16384" in source and "- (row / 1055) * 128" in source
    # a sum, or an epilogue reading memory, or no reduction fused after it (the logits alone, measured faster in
    # tiles of 16 columns on the H200): tiles of 16 columns, which divide the vocabulary
    for name in ("ragged_sum", "ragged_bias", "ragged_logits"):
        mm = first_stage(name)
        assert mm.schedule.grid == RAGGED // 16, (name, mm.schedule.grid)


@pytest.mark.parametrize("name", ["ragged_odd", "ragged_sum"])
def test_ragged_heads_match_the_evaluator_on_the_cpu(name: str) -> None:
    compiled = jit(RaggedHeads.functions[name], target="cpu")
    fn = RaggedHeads.functions[name]
    close = allclose(atol=1e-2, rtol=1e-3)
    expect = {"output[0]": [equal()], "output[1]": [close]} if name == "ragged_odd" else {
        "output[0]": [allclose(atol=0.5, rtol=2**-6)], "output[1]": [equal()]}
    report = check(compiled_only(compiled), fn, ragged_inputs(name, 0), expect=expect)
    assert report.passed, f"{name}:\n{report}"


@func
def one_hot_choice(x: Tensor[(M, 16), "f32"], w: ConstTensor[(4, 16), "f32"]):
    """The argmax fused after its matmul, then a one-hot of it built from an arange (an op of no input)."""
    y = tf.matmul(x, tf.transpose(w, (1, 0)))
    hot = tf.cast(tf.reshape(tf.arange(4), (1, 4)) == tf.reshape(tf.argmax(y, -1), (M, 1)), "f32")
    return y * hot


def test_an_op_of_no_input_in_the_stage_after_a_fused_argmax_matches_the_evaluator() -> None:
    """The fusion's scan of the stage after the matmul passes over an arange (it once read its first input)."""
    compiled = jit(one_hot_choice, target="cpu")
    g = torch.Generator().manual_seed(5)
    for m in (1, 7, 40):
        # small integers: every product exact in f32, so the argmax has one answer (the first of equal maxima)
        x = torch.randint(-3, 4, (m, 16), generator=g).float()
        w = torch.randint(-3, 4, (4, 16), generator=g).float()
        report = check(compiled_only(compiled), one_hot_choice, (x, w), expect={"output": [equal()]})
        assert report.passed, f"{m} rows:\n{report}"

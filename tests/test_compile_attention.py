"""Attention as the families write it compiles as one fused attention: jitted for the CPU against the evaluator.

``matmul(q, keys) * scale``, a ``where`` mask from positions, ``softmax`` and ``matmul(probs, vals)`` are
recognised (``lower/fuse_attention.py``) and lowered as the keys' slices and their combine
(``lower/attention.py``): no kernel writes the score matrix. The variants a user writes compile the same way
(no mask, no scale, a division by the scale, the comparison either way round, the mask inverted, grouped key
heads, one head, f32 and bf16, a head_dim of no power of two, sixteen key heads of 64); a pattern whose scores
or probabilities are read elsewhere is left as written, op by op, and is as correct. Contexts up to 200 keys cut
into several slices (four on the CPU), short ones leaving slices empty; a query that sees no key gets NaN, as
softmax over only -inf does in the evaluator.

Tolerances: the fused softmax sums its exponentials in another order than torch's (online, slice by slice),
and in bf16 skips the rounding of the probabilities to bf16 before the second matmul that the unfused ops
perform: f32 to 1e-5, bf16 to 2**-6 relative plus 2**-6 absolute (two bf16 ulps of outputs of magnitude ~1).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch

from tests.compile_kernels import compiled_only, output_paths
from tilefoundry import func, jit, lower, module
from tilefoundry.codegen import generate
from tilefoundry.dsl import DimVar, Tensor, tf
from tilefoundry.runtime.check import allclose, check

pytestmark = pytest.mark.usefixtures("compile_cache")

S = DimVar("s", 1, 65)
C = DimVar("c", 1, 4097)
H, KV, D = 4, 2, 16
F32 = allclose(atol=1e-5, rtol=1e-5)
BF16 = allclose(atol=2**-6, rtol=2**-6)
SCALE = 1 / math.sqrt(D)


def _grouped(keys, vals, heads: int, kv: int):
    keys = tf.repeat_interleave(tf.transpose(keys, (1, 2, 0)), heads // kv, 0)  # (H, D, C)
    vals = tf.repeat_interleave(tf.transpose(vals, (1, 0, 2)), heads // kv, 0)  # (H, C, D)
    return keys, vals


@module(entry="causal")
class Attention:
    @func
    def causal(q: Tensor[(S, H, D), "f32"], keys: Tensor[(C, KV, D), "f32"], vals: Tensor[(C, KV, D), "f32"],
               pos: Tensor[(S,), "i64"], kv_pos: Tensor[(C,), "i64"]):
        k, v = _grouped(keys, vals, H, KV)
        scores = tf.matmul(tf.transpose(q, (1, 0, 2)), k) * SCALE
        visible = tf.reshape(kv_pos, (1, C)) <= tf.reshape(pos, (S, 1))
        probs = tf.softmax(tf.where(visible, scores, float("-inf")))
        return tf.reshape(tf.transpose(tf.matmul(probs, v), (1, 0, 2)), (S, H * D))

    @func
    def causal_bf16(q: Tensor[(S, H, D), "bf16"], keys: Tensor[(C, KV, D), "bf16"],
                    vals: Tensor[(C, KV, D), "bf16"], pos: Tensor[(S,), "i64"], kv_pos: Tensor[(C,), "i64"]):
        k, v = _grouped(keys, vals, H, KV)
        scores = tf.matmul(tf.transpose(q, (1, 0, 2)), k) * SCALE
        visible = tf.reshape(kv_pos, (1, C)) <= tf.reshape(pos, (S, 1))
        probs = tf.softmax(tf.where(visible, scores, float("-inf")))
        return tf.reshape(tf.transpose(tf.matmul(probs, v), (1, 0, 2)), (S, H * D))

    @func
    def flipped(q: Tensor[(S, H, D), "f32"], keys: Tensor[(C, KV, D), "f32"], vals: Tensor[(C, KV, D), "f32"],
                pos: Tensor[(S,), "i64"], kv_pos: Tensor[(C,), "i64"]):
        """The comparison written the other way round, the mask inverted, the scale a division."""
        k, v = _grouped(keys, vals, H, KV)
        scores = tf.matmul(tf.transpose(q, (1, 0, 2)), k) / math.sqrt(D)
        hidden = tf.reshape(pos, (S, 1)) < tf.reshape(kv_pos, (1, C))
        probs = tf.softmax(tf.where(hidden, float("-inf"), scores), axis=-1)
        return tf.transpose(tf.matmul(probs, v), (1, 0, 2))

    @func
    def cache(q: Tensor[(S, H, D), "f32"], keys: Tensor[(C, KV, D), "f32"], vals: Tensor[(C, KV, D), "f32"],
              pos: Tensor[(S,), "i64"]):
        """The keys a cache in position order (key n at position n): the key positions an ``arange``."""
        k, v = _grouped(keys, vals, H, KV)
        scores = tf.matmul(tf.transpose(q, (1, 0, 2)), k) * SCALE
        visible = tf.reshape(tf.arange(C), (1, C)) <= tf.reshape(pos, (S, 1))
        probs = tf.softmax(tf.where(visible, scores, float("-inf")))
        return tf.reshape(tf.transpose(tf.matmul(probs, v), (1, 0, 2)), (S, H * D))

    @func
    def cache_strict_bf16(q: Tensor[(S, H, D), "bf16"], keys: Tensor[(C, KV, D), "bf16"],
                          vals: Tensor[(C, KV, D), "bf16"], pos: Tensor[(S,), "i64"]):
        """... the comparison strict and written the other way round: key n seen by a query past n."""
        k, v = _grouped(keys, vals, H, KV)
        scores = tf.matmul(tf.transpose(q, (1, 0, 2)), k) * SCALE
        visible = tf.reshape(pos + 1, (S, 1)) > tf.reshape(tf.arange(0, C), (1, C))
        probs = tf.softmax(tf.where(visible, scores, float("-inf")))
        return tf.reshape(tf.transpose(tf.matmul(probs, v), (1, 0, 2)), (S, H * D))

    @func
    def unmasked(q: Tensor[(H, S, D), "f32"], k: Tensor[(H, D, C), "f32"], v: Tensor[(H, C, D), "f32"]):
        """Every head its own keys, no mask, no scale."""
        return tf.matmul(tf.softmax(tf.matmul(q, k)), v)

    @func
    def one_head(q: Tensor[(S, 24), "f32"], k: Tensor[(C, 24), "f32"], v: Tensor[(C, 40), "f32"]):
        """No head axis; a head_dim of no power of two, values wider than keys."""
        return tf.matmul(tf.softmax(tf.matmul(q, tf.transpose(k, (1, 0))) * 0.2), v)

    @func
    def wide_rows(q: Tensor[(S, 16, 64), "f32"], keys: Tensor[(C, 16, 64), "f32"], vals: Tensor[(C, 16, 64), "f32"],
                  pos: Tensor[(S,), "i64"], kv_pos: Tensor[(C,), "i64"]):
        """Sixteen key heads of 64: value rows 1024 floats apart (the CPU copies them for a prompt's many
        row groups, reads them in place for a step's few) and two vectors of value columns at a time."""
        scores = tf.matmul(tf.transpose(q, (1, 0, 2)), tf.transpose(keys, (1, 2, 0))) * 0.125
        visible = tf.reshape(kv_pos, (1, C)) <= tf.reshape(pos, (S, 1))
        probs = tf.softmax(tf.where(visible, scores, float("-inf")))
        return tf.transpose(tf.matmul(probs, tf.transpose(vals, (1, 0, 2))), (1, 0, 2))

    @func
    def probs_returned(q: Tensor[(H, S, D), "f32"], k: Tensor[(H, D, C), "f32"], v: Tensor[(H, C, D), "f32"]):
        """The probabilities are a result too: not fused, compiled op by op."""
        probs = tf.softmax(tf.matmul(q, k) * SCALE)
        return tf.matmul(probs, v), probs


def _inputs(name: str, s: int, c: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(s * 1000 + c)
    fn = Attention.functions[name]
    extents = {"s": s, "c": c}
    out = []
    for p in fn.params:
        shape = tuple(d if isinstance(d, int) else extents[d.name] for d in p.type.shape)
        if p.name == "pos":
            out.append(torch.arange(c - s, c))  # the last s of c tokens
        elif p.name == "kv_pos":
            out.append(torch.arange(c))
        else:
            out.append(torch.randn(shape, generator=g).to(p.type.dtype.torch_dtype))
    return tuple(out)


CASES = [(1, 1), (1, 7), (1, 200), (7, 7), (7, 130), (17, 64), (64, 64)]


@pytest.mark.parametrize("name", sorted(Attention.functions))
def test_attention_matches_the_evaluator(name: str) -> None:
    compiled = jit(Attention, target="cpu").functions[name]
    fn = Attention.functions[name]
    expect = BF16 if name.endswith("bf16") else F32
    paths = output_paths(fn)
    for s, c in CASES:
        report = check(compiled_only(compiled), fn, _inputs(name, s, c), expect={p: [expect] for p in paths})
        assert report.passed, f"{name} at {s} queries over {c} keys:\n{report}"


def test_the_pattern_is_fused_and_the_scores_never_reach_memory() -> None:
    tir = lower(Attention, "cpu")
    for name in ("causal", "causal_bf16", "flipped", "cache", "cache_strict_bf16", "unmasked", "one_head",
                 "wide_rows"):
        fn = tir.functions[name]
        kinds = [s.fn.schedule.placement for s in fn.stages]
        assert kinds.count("attention") == 2 and "matmul" not in kinds, (name, kinds)
        assert all(t.type.shape[-1] != C for t in fn.temps), [str(t) for t in fn.temps]  # no (.., s, c) scores
    kinds = [s.fn.schedule.placement for s in tir.functions["probs_returned"].stages]
    assert "attention" not in kinds and kinds.count("matmul") == 2


@pytest.mark.parametrize("name", ["cache", "cache_strict_bf16"])
def test_a_cache_in_position_order_is_read_up_to_the_last_query(name: str) -> None:
    """The whole cache passed (capacity 200), the entries past the step's positions holding garbage (finite: the
    evaluator multiplies their zero probabilities by their values): only the queries' positions, read on the
    device, bound the keys (one launch serves every context length)."""
    compiled = jit(Attention, target="cpu").functions[name]
    fn = Attention.functions[name]
    lines = [line for line in generate(lower(Attention, "cpu")).source.splitlines() if "ops::attention<" in line]
    assert sum("_op{}" in line and "kpos" not in line for line in lines) == 2  # no key positions are read
    capacity = 200
    for s, ctx in [(1, 1), (1, 37), (1, 200), (5, 64), (17, 130)]:
        q, keys, vals = _inputs(name, s, capacity)[:3]
        keys[ctx:], vals[ctx:] = 1e30, -1e30  # not written yet
        pos = torch.arange(ctx - s, ctx)
        expect = BF16 if name.endswith("bf16") else F32
        report = check(compiled_only(compiled), fn, (q, keys, vals, pos), expect={"output": [expect]})
        assert report.passed, f"{name} at {s} queries, context {ctx} of {capacity}:\n{report}"


def test_grouped_key_heads_are_read_once_per_key_head() -> None:
    slices = lower(Attention, "cpu").functions["causal"].stages
    first = next(s.fn for s in slices if s.fn.name.endswith("_slices"))
    splits = 4  # CPU: at most 4 slices (of at least 32 keys)
    assert first.schedule.grid == KV * splits  # a CTA per key head and slice, its G = 2 query heads together


def test_on_a_gpu_with_clusters_a_key_heads_slices_merge_in_their_own_kernel() -> None:
    splits = 16  # CUDA: a slice of at least 64 keys, at most 16 a key head
    (merged,) = lower(Attention, "cuda:sm_90a").functions["causal"].stages
    assert merged.fn.schedule.grid == KV * splits and merged.fn.schedule.cluster == splits
    assert [p.name for p in merged.fn.params if p.is_output] == list(merged.args[-2:])  # the states, the result
    source = generate(lower(Attention, "cuda:sm_90a")).source
    assert source.count(f"launch.start_in_clusters(causal_stage0_merged_kernel, ctas, {splits}, 128, ") == 1
    assert "ops::attention_combine(" in source and f"int64_t((row % {splits})), int64_t({splits}));" in source
    # before sm_90 (no clusters) the combine is a second kernel, a CTA a key head
    slices, combine = lower(Attention, "cuda:sm_80").functions["causal"].stages
    assert slices.fn.schedule.grid == KV * splits and combine.fn.schedule.grid == KV
    assert slices.fn.schedule.cluster == combine.fn.schedule.cluster == 1
    assert "start_in_clusters" not in generate(lower(Attention, "cuda:sm_80")).source


def test_a_prompts_many_query_rows_run_in_blocks_through_the_tensor_cores_on_a_gpu() -> None:
    """At 17 query rows or more (the entry's prompt variant), 16-bit operands of a head_dim that is a multiple of 16,
    sm_80 and later: one kernel, a CTA for each 64 of a key head's G x M query rows, writing them whole
    (ops::attention_rows: no temporary of the slices' states, no combine); the decode variant keeps its slices of
    the keys, as do f32 operands, the CPU target and a GPU before sm_80."""
    tir = lower(Attention, "cuda:sm_90a")
    for name in ("causal_bf16", "cache_strict_bf16"):
        cases = [(c.lo, c.function) for c in tir.dispatches[name].cases]
        assert cases == [(1, f"{name}_few_rows"), (17, f"{name}_many_rows")], name
        stages = tir.functions[f"{name}_many_rows"].stages
        (rows,) = [st for st in stages if st.fn.schedule.placement == "attention"]
        blocks = "(2*s + 63)//(64)"  # G = 2 query heads a key head, s tokens: 64 rows a CTA
        assert str(rows.fn.schedule.grid) == f"{KV}*{blocks}" and rows.fn.schedule.threads_per_cta == 128, name
        assert [p.name for p in rows.fn.params if p.is_output] == list(rows.args[-1:]), name  # the result alone
        (few,) = [st for st in tir.functions[f"{name}_few_rows"].stages if st.fn.schedule.placement == "attention"]
        assert few.fn.schedule.cluster > 1, name  # the keys' slices, merged in clusters
    source = generate(tir).source
    assert source.count("ops::attention_rows<float>(") == 2
    assert "causal_many_rows" not in tir.functions  # f32: one body, its keys in slices
    for target in ("cpu", "cuda:sm_75"):
        assert "ops::attention_rows" not in generate(lower(Attention, target)).source, target


@pytest.mark.parametrize("head_dim, ring", [(128, True), (64, False)])
def test_a_prompts_blocks_take_a_ring_of_dynamic_shared_memory_on_wgmma(head_dim: int, ring: bool) -> None:
    """At a head_dim of 128 on sm_90a the blocks' kernel gives ops::attention_rows a ring of dynamic shared memory
    (q, the keys, two stages of values: the wgmma tier's tiles, CUDA_ATTENTION_RING_BYTES), the host entry raising
    the kernel's limit for it; other head_dims keep mma.sync's static shared memory. Either way the kernel is built
    for three CTAs an SM."""
    from tilefoundry.engine.compiled_kernels import SlotShapes, slot_functions
    from tilefoundry.engine.decoder import DecoderSpec
    from tilefoundry.lower.attention import CUDA_ATTENTION_RING_BYTES

    spec = DecoderSpec(hidden=4 * head_dim, heads=4, kv_heads=2, head_dim=head_dim, vocab=64, eps=1e-6,
                       max_positions=2048)
    fn = slot_functions(SlotShapes(spec, "bf16", 0, False, False))["attention"]
    source = generate(lower(fn, "cuda:sm_90a", split_rows=True)).source
    (call,) = [line for line in source.splitlines() if "ops::attention_rows<float>(" in line]
    assert call.rstrip().endswith(", ring);") == ring
    assert (f"static_cast<std::size_t>({CUDA_ATTENTION_RING_BYTES})" in source) == ring
    assert ("make_attention_ring" in source) == ring
    assert "__launch_bounds__(128, 3) attention_many_rows" in source


def test_a_query_that_sees_no_key_gets_nan_as_in_the_evaluator() -> None:
    compiled = jit(Attention, target="cpu").functions["causal"]
    q, keys, vals, _, kv_pos = _inputs("causal", 2, 9)
    pos = torch.tensor([-1, 8])  # the first query sees no key (every kv_pos > -1)
    got = compiled_only(compiled)(q, keys, vals, pos, kv_pos)
    want = Attention.functions["causal"](q, keys, vals, pos, kv_pos)
    assert torch.isnan(got[0]).all() and torch.isnan(want[0]).all()
    torch.testing.assert_close(got[1], want[1], rtol=1e-5, atol=1e-5)


def check_far_query_positions(compiled: Callable[..., Any], name: str, device: str = "cpu") -> None:
    """Query positions far outside a cache's key indices (i64) compare as the evaluator compares them: past every
    key (2**40, 2**31 + 5) a query sees all of them, before every key (-2**40, -5) none (NaN, as in the
    evaluator). ops::attention counts key indices in int where the cache's extent is one (key_index_t)."""
    fn = Attention.functions[name]
    q, keys, vals = _inputs(name, 5, 40)[:3]
    pos = torch.tensor([2**40, -(2**40), 2**31 + 5, -5, 3])
    got = compiled_only(compiled)(*(t.to(device) for t in (q, keys, vals, pos))).cpu().view(5, H, D).float()
    want = fn(q, keys, vals, pos).view(5, H, D).float()
    assert torch.isnan(got[[1, 3]]).all() and torch.isnan(want[[1, 3]]).all()
    tol = 2e-2 if name.endswith("bf16") else 1e-5
    torch.testing.assert_close(got[[0, 2, 4]], want[[0, 2, 4]], rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["cache", "cache_strict_bf16"])
def test_query_positions_beyond_any_key_index_compare_as_they_are(name: str) -> None:
    check_far_query_positions(jit(Attention, target="cpu").functions[name], name)

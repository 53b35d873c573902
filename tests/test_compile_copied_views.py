"""Views an op's kernel cannot read are copied first: jitted for the CPU against the evaluator.

A matmul reads its operands through strides, so rows picked by positions (``index_select``) in its first operand, or
picked along a weight's rows or columns, are no layout it can take; nor are the keys of an attention picked by
positions (a paged cache's slots). Such an operand is copied by a row-wise stage of its own, which reads the view
through its strides and positions, into contiguous memory the op then reads (``lower/stages.py``: ``_unreadable``).
An embedding's rows normed before a projection (a model's first layer written in one function) keep the norm as that
row-wise stage instead of fusing it into the matmul (``lower/prologue.py``). Rows picked from picked rows, or picked
rows sliced or reshaped (views no strides express over positions read on the device), read a copy of the picked rows
too, and so does a row-wise op whose rows run along the picked axis (a softmax over it, through a transpose).
Positions read from a slice of a tensor are copied into a plain one for index_select, index_add and index_copy; a
single source row of index_copy, and a static single token's embedding row, come from and go to their positions (the
row-wise kernel once dropped the position of an axis of extent 1: row 0 was read or written instead). A decoder
written as one function (embedding to head, as a model source outside the families may) compiles that way too.
Tolerances: f32 sums in another order than torch's, to 1e-5.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from tests.compile_kernels import compiled_only
from tilefoundry import func, jit, lower, module
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, tf
from tilefoundry.runtime.check import allclose, check, equal

pytestmark = pytest.mark.usefixtures("compile_cache")

S = DimVar("s", 1, 257)
C = DimVar("c", 1, 129)
VOCAB, HIDDEN, OUT, H, D = 50, 24, 20, 2, 8
F32 = allclose(atol=1e-5, rtol=1e-5)


@module(entry="picked_rows")
class CopiedViews:
    @func
    def picked_rows(x: Tensor[(40, HIDDEN), "f32"], rows: Tensor[(S,), "i64"], w: ConstTensor[(OUT, HIDDEN), "f32"]):
        """Rows of the activations picked by positions, then projected."""
        return tf.matmul(tf.index_select(x, rows, 0), tf.transpose(w, (1, 0)))

    @func
    def first_layer(emb: ConstTensor[(VOCAB, HIDDEN), "f32"], ids: Tensor[(S,), "i64"],
                    g: ConstTensor[(HIDDEN,), "f32"], w: ConstTensor[(OUT, HIDDEN), "f32"]):
        """A model's first layer in one function: embedding rows, their RMSNorm, the projection."""
        return tf.matmul(tf.rms_norm(tf.index_select(emb, ids, 0), g, 1e-6), tf.transpose(w, (1, 0)))

    @func
    def vocab_subset(x: Tensor[(S, HIDDEN), "f32"], head: ConstTensor[(VOCAB, HIDDEN), "f32"],
                     tokens: Tensor[(7,), "i64"]):
        """The logits of a few tokens: the head's rows picked, read as the product's columns."""
        return tf.matmul(x, tf.transpose(tf.index_select(head, tokens, 0), (1, 0)))

    @func
    def picked_twice(x: Tensor[(40, HIDDEN), "f32"], rows: Tensor[(S,), "i64"], again: Tensor[(S,), "i64"]):
        """Rows picked from rows already picked (a view no strides express: the first pick is copied)."""
        return tf.exp(tf.index_select(tf.index_select(x, rows, 0), again, 0))

    @func
    def picked_then_viewed(x: Tensor[(40, HIDDEN), "f32"], rows: Tensor[(S,), "i64"]):
        """Picked rows, then their columns sliced and swapped and their rows reshaped into heads."""
        h = tf.index_select(x, rows, 0)
        swapped = tf.concat([tf.slice(h, (0, HIDDEN // 2), (S, HIDDEN // 2)), tf.slice(h, (0, 0), (S, HIDDEN // 2))], 1)
        heads = tf.reshape(swapped, (S, 2, HIDDEN // 2))
        return tf.reduce(heads, axes=(-1,), keepdim=False, kind="sum")

    @func
    def softmax_over_picked(x: Tensor[(40, HIDDEN), "f32"], rows: Tensor[(S,), "i64"]):
        """A softmax over the picked rows' axis, through a transpose (rows of the view a position apart)."""
        return tf.transpose(tf.softmax(tf.transpose(tf.index_select(x, rows, 0), (1, 0))), (1, 0))

    @func
    def positions_sliced(x: Tensor[(40, HIDDEN), "f32"], ids: Tensor[(8,), "i64"], small: Tensor[(4,), "i64"]):
        """index_select, index_add and index_copy reading their positions from slices of tensors (copied into
        plain ones first), the last writing one row."""
        picked = tf.index_select(x, tf.slice(ids, (2,), (5,)), 0)
        added = tf.index_add(picked, 0, tf.slice(small, (1,), (3,)), tf.slice(picked, (0, 0), (3, HIDDEN)))
        return tf.index_copy(added, 0, tf.slice(small, (0,), (1,)), tf.slice(x, (0, 0), (1, HIDDEN)) * 2.0)

    @func
    def one_token(emb: ConstTensor[(VOCAB, HIDDEN), "f32"], token: Tensor[(1,), "i64"]):
        """A decode step's embedding with a static single token: the row at its id, not row 0."""
        return tf.index_select(emb, token, 0) * 2.0

    @func
    def paged_keys(q: Tensor[(S, H, D), "f32"], k_cache: Tensor[(128, H, D), "f32"],
                   v_cache: Tensor[(128, H, D), "f32"], slots: Tensor[(C,), "i64"], pos: Tensor[(S,), "i64"],
                   kv_pos: Tensor[(C,), "i64"]):
        """Causal attention over keys and values picked from a cache by their slots (a paged cache)."""
        keys = tf.transpose(tf.index_select(k_cache, slots, 0), (1, 2, 0))  # (H, D, C)
        vals = tf.transpose(tf.index_select(v_cache, slots, 0), (1, 0, 2))  # (H, C, D)
        scores = tf.matmul(tf.transpose(q, (1, 0, 2)), keys) * (1 / math.sqrt(D))
        visible = tf.reshape(kv_pos, (1, C)) <= tf.reshape(pos, (S, 1))
        probs = tf.softmax(tf.where(visible, scores, float("-inf")))
        return tf.reshape(tf.transpose(tf.matmul(probs, vals), (1, 0, 2)), (S, H * D))


CAP, KVH, INTER = 128, 1, 40  # the whole layer's cache capacity, key-value heads (GQA: H // KVH), MLP width


@func
def whole_layer(ids: Tensor[(S,), "i64"], pos_ids: Tensor[(S,), "i64"], kv_pos: Tensor[(C,), "i64"],
                cos: Tensor[(CAP, D), "f32"], sin: Tensor[(CAP, D), "f32"], cache_k: Tensor[(1, CAP, KVH, D), "f32"],
                cache_v: Tensor[(1, CAP, KVH, D), "f32"], cur_pos: Tensor[(), "i64"], n_new: Tensor[(), "i64"],
                emb: ConstTensor[(VOCAB, HIDDEN), "f32"], n1: ConstTensor[(HIDDEN,), "f32"],
                wq: ConstTensor[(H * D, HIDDEN), "f32"], wk: ConstTensor[(KVH * D, HIDDEN), "f32"],
                wv: ConstTensor[(KVH * D, HIDDEN), "f32"], wo: ConstTensor[(HIDDEN, H * D), "f32"],
                n2: ConstTensor[(HIDDEN,), "f32"], wg: ConstTensor[(INTER, HIDDEN), "f32"],
                wu: ConstTensor[(INTER, HIDDEN), "f32"], wd: ConstTensor[(HIDDEN, INTER), "f32"],
                nf: ConstTensor[(HIDDEN,), "f32"]):
    """A decoder written as one function, as a model source outside the families may: the embedding's rows straight
    into the first norm and projections, rope, both cache writes, grouped causal attention, the MLP, the final norm
    and the tied head with its argmax."""
    def linear(x: Any, w: Any) -> Any:
        return tf.matmul(x, tf.transpose(w, (1, 0)))

    x = tf.index_select(emb, ids, 0)
    h = tf.rms_norm(x, n1, 1e-6)
    q = tf.reshape(linear(h, wq), (S, H, D))
    k = tf.reshape(linear(h, wk), (S, KVH, D))
    v = tf.reshape(linear(h, wv), (S, KVH, D))
    q, k = tf.rope(q, k, cos, sin, pos_ids)
    cache_k = tf.cache_update(cache_k, cur_pos, n_new, tf.reshape(k, (1, S, KVH, D)))
    cache_v = tf.cache_update(cache_v, cur_pos, n_new, tf.reshape(v, (1, S, KVH, D)))
    keys = tf.reshape(tf.slice(cache_k, (0, 0, 0, 0), (1, C, KVH, D)), (C, KVH, D))
    vals = tf.reshape(tf.slice(cache_v, (0, 0, 0, 0), (1, C, KVH, D)), (C, KVH, D))
    keys = tf.repeat_interleave(tf.transpose(keys, (1, 2, 0)), H // KVH, 0)  # (H, D, C)
    vals = tf.repeat_interleave(tf.transpose(vals, (1, 0, 2)), H // KVH, 0)  # (H, C, D)
    scores = tf.matmul(tf.transpose(q, (1, 0, 2)), keys) * (1 / math.sqrt(D))
    visible = tf.reshape(kv_pos, (1, C)) <= tf.reshape(pos_ids, (S, 1))
    probs = tf.softmax(tf.where(visible, scores, float("-inf")))
    x = x + linear(tf.reshape(tf.transpose(tf.matmul(probs, vals), (1, 0, 2)), (S, H * D)), wo)
    h2 = tf.rms_norm(x, n2, 1e-6)
    x = x + linear(tf.silu(linear(h2, wg)) * linear(h2, wu), wd)
    logits = linear(tf.rms_norm(x, nf, 1e-6), emb)
    return tf.argmax(logits, -1), logits, cache_k, cache_v


def _layer_inputs(s: int, start: int) -> tuple[Any, ...]:
    """``s`` new tokens at positions ``start``, ... of a cache whose first ``start`` rows are filled."""
    g = torch.Generator().manual_seed(100 * s + start)

    def r(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g) * 0.3

    angles = torch.arange(CAP)[:, None] / 10000 ** (torch.arange(D)[None] / D)
    return (torch.randint(0, VOCAB, (s,), generator=g), torch.arange(start, start + s), torch.arange(start + s),
            torch.cos(angles), torch.sin(angles), r(1, CAP, KVH, D), r(1, CAP, KVH, D), torch.tensor(start),
            torch.tensor(s), r(VOCAB, HIDDEN), 1 + r(HIDDEN), r(H * D, HIDDEN), r(KVH * D, HIDDEN),
            r(KVH * D, HIDDEN), r(HIDDEN, H * D), 1 + r(HIDDEN), r(INTER, HIDDEN), r(INTER, HIDDEN),
            r(HIDDEN, INTER), 1 + r(HIDDEN))


def _inputs(name: str, s: int) -> tuple[Any, ...]:
    g = torch.Generator().manual_seed(s)

    def r(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g)

    def ids(n: int, high: int) -> torch.Tensor:
        return torch.randint(0, high, (n,), generator=g)

    if name == "picked_rows":
        return r(40, HIDDEN), ids(s, 40), r(OUT, HIDDEN)
    if name == "picked_twice":
        return r(40, HIDDEN), ids(s, 40), ids(s, s)
    if name in ("picked_then_viewed", "softmax_over_picked"):
        return r(40, HIDDEN), ids(s, 40)
    if name == "one_token":
        return r(VOCAB, HIDDEN), ids(1, VOCAB) if s > 1 else torch.tensor([VOCAB - 1])
    if name == "positions_sliced":
        return r(40, HIDDEN), ids(8, 40), ids(4, 5)
    if name == "first_layer":
        return r(VOCAB, HIDDEN), ids(s, VOCAB), r(HIDDEN), r(OUT, HIDDEN)
    if name == "vocab_subset":
        return r(s, HIDDEN), r(VOCAB, HIDDEN), ids(7, VOCAB)
    c = min(s + 5, 128)  # the context: the s new tokens are its last positions
    slots = torch.randperm(128, generator=g)[:c]
    kv_pos = torch.arange(c)
    return r(s, H, D), r(128, H, D), r(128, H, D), slots, kv_pos[c - s:] if s <= c else kv_pos, kv_pos


@pytest.mark.parametrize("name", ["picked_rows", "first_layer", "vocab_subset", "paged_keys", "picked_twice",
                                  "picked_then_viewed", "softmax_over_picked", "positions_sliced", "one_token"])
def test_an_operand_its_kernel_cannot_read_is_copied_and_matches_the_evaluator(name: str) -> None:
    compiled = jit(CopiedViews, target="cpu").functions[name]
    fn = CopiedViews.functions[name]
    for s in (1, 7, 17, 64, 200) if name != "paged_keys" else (1, 7, 17, 64, 123):
        report = check(compiled_only(compiled), fn, _inputs(name, s), expect={"output": [F32]})
        assert report.passed, f"{name} at s = {s}:\n{report}"


def test_a_decoder_written_as_one_function_matches_the_evaluator() -> None:
    """A prompt from position 0, a decode step and a chunk after a filled prefix: the token choices exactly, the
    logits and both caches within 1e-4 (sums of several products and exponentials in another order)."""
    compiled = jit(whole_layer, target="cpu")
    near = allclose(atol=1e-4, rtol=1e-4)
    for s, start in ((7, 0), (1, 7), (20, 3), (64, 60)):
        expect = {"output[0]": [equal()], "output[1]": [near], "output[2]": [near], "output[3]": [near]}
        report = check(compiled_only(compiled), whole_layer, _layer_inputs(s, start), expect=expect)
        assert report.passed, f"{s} tokens from {start}:\n{report}"


def test_the_copy_is_a_row_wise_stage_before_the_op() -> None:
    """The picked view is read once, by a stage of its own writing a temporary; the op reads the temporary."""
    tir = lower(CopiedViews, "cpu")
    for name, op in (("picked_rows", "matmul"), ("first_layer", "matmul"), ("vocab_subset", "matmul"),
                     ("paged_keys", "attention")):
        fn = tir.functions[name]
        placements = [s.fn.schedule.placement for s in fn.stages]
        assert placements[0] == "rows" and op in placements, (name, placements)
        assert any(t.name.endswith("_contiguous_tmp") or "rms_norm" in t.name for t in fn.temps), (name, fn.temps)

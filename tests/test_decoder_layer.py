"""A Llama-style decoder layer authored as a @module evaluates equal to hand-written torch."""

from __future__ import annotations

import math

import pytest
import torch

from tilefoundry import func, module
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, tf

HID, H, KV, D, INTER, MAXLEN, EPS = 64, 4, 2, 16, 96, 32, 1e-5
seq = DimVar("seq", 1, MAXLEN + 1)


def _layer(dt: str):
    @module(entry="layer")
    class DecoderLayer:
        @func
        def attention(
            x: Tensor[(seq, HID), dt],
            attn_norm: ConstTensor[(HID,), dt],
            wq: ConstTensor[(HID, H * D), dt],
            wk: ConstTensor[(HID, KV * D), dt],
            wv: ConstTensor[(HID, KV * D), dt],
            wo: ConstTensor[(H * D, HID), dt],
            cos: Tensor[(MAXLEN, D), dt],
            sin: Tensor[(MAXLEN, D), dt],
            pos_ids: Tensor[(seq,), "i64"],
            cache_k: Tensor[(1, MAXLEN, KV, D), dt],
            cache_v: Tensor[(1, MAXLEN, KV, D), dt],
            cur_pos: Tensor[(), "i64"],
            n_new: Tensor[(), "i64"],
        ):
            h = tf.rms_norm(x, attn_norm, EPS)
            q = tf.reshape(tf.matmul(h, wq), (seq, H, D))
            k = tf.reshape(tf.matmul(h, wk), (seq, KV, D))
            v = tf.reshape(tf.matmul(h, wv), (1, seq, KV, D))
            q, k = tf.rope(q, k, cos, sin, pos_ids)
            q = tf.transpose(q, (1, 0, 2))
            k_new = tf.reshape(k, (1, seq, KV, D))
            cache_k = tf.cache_update(cache_k, cur_pos, n_new, k_new)
            cache_v = tf.cache_update(cache_v, cur_pos, n_new, v)
            keys = tf.repeat_interleave(tf.transpose(tf.reshape(cache_k, (MAXLEN, KV, D)), (1, 2, 0)), H // KV, 0)
            vals = tf.repeat_interleave(tf.transpose(tf.reshape(cache_v, (MAXLEN, KV, D)), (1, 0, 2)), H // KV, 0)
            scores = tf.matmul(q, keys) * (1.0 / math.sqrt(D))
            visible = tf.reshape(tf.arange(MAXLEN), (1, MAXLEN)) <= tf.reshape(pos_ids, (seq, 1))
            probs = tf.softmax(tf.where(visible, scores, float("-inf")))
            o = tf.reshape(tf.transpose(tf.matmul(probs, vals), (1, 0, 2)), (seq, H * D))
            return x + tf.matmul(o, wo), cache_k, cache_v

        @func
        def mlp(
            x: Tensor[(seq, HID), dt],
            mlp_norm: ConstTensor[(HID,), dt],
            w_gate: ConstTensor[(HID, INTER), dt],
            w_up: ConstTensor[(HID, INTER), dt],
            w_down: ConstTensor[(INTER, HID), dt],
        ):
            h = tf.rms_norm(x, mlp_norm, EPS)
            return x + tf.matmul(tf.silu(tf.matmul(h, w_gate)) * tf.matmul(h, w_up), w_down)

        @func
        def layer(
            x: Tensor[(seq, HID), dt],
            attn_norm: ConstTensor[(HID,), dt],
            wq: ConstTensor[(HID, H * D), dt],
            wk: ConstTensor[(HID, KV * D), dt],
            wv: ConstTensor[(HID, KV * D), dt],
            wo: ConstTensor[(H * D, HID), dt],
            mlp_norm: ConstTensor[(HID,), dt],
            w_gate: ConstTensor[(HID, INTER), dt],
            w_up: ConstTensor[(HID, INTER), dt],
            w_down: ConstTensor[(INTER, HID), dt],
            cos: Tensor[(MAXLEN, D), dt],
            sin: Tensor[(MAXLEN, D), dt],
            pos_ids: Tensor[(seq,), "i64"],
            cache_k: Tensor[(1, MAXLEN, KV, D), dt],
            cache_v: Tensor[(1, MAXLEN, KV, D), dt],
            cur_pos: Tensor[(), "i64"],
            n_new: Tensor[(), "i64"],
        ):
            h, cache_k, cache_v = attention(  # noqa: F821 - a sibling @func, reached by bare name
                x, attn_norm, wq, wk, wv, wo, cos, sin, pos_ids, cache_k, cache_v, cur_pos, n_new
            )
            return mlp(h, mlp_norm, w_gate, w_up, w_down), cache_k, cache_v  # noqa: F821

    return DecoderLayer


def _weights(dt: torch.dtype, gen: torch.Generator) -> dict[str, torch.Tensor]:
    def r(*shape: int, scale: float = 0.1) -> torch.Tensor:
        return (torch.randn(*shape, generator=gen) * scale).to(dt)

    return {
        "attn_norm": 1 + r(HID), "wq": r(HID, H * D), "wk": r(HID, KV * D), "wv": r(HID, KV * D),
        "wo": r(H * D, HID), "mlp_norm": 1 + r(HID), "w_gate": r(HID, INTER), "w_up": r(HID, INTER),
        "w_down": r(INTER, HID),
    }


def _rope_tables(dt: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    inv = 1.0 / (10000 ** (torch.arange(0, D, 2, dtype=torch.float32) / D))
    angles = torch.outer(torch.arange(MAXLEN, dtype=torch.float32), inv)
    emb = torch.cat((angles, angles), dim=-1)
    return emb.cos().to(dt), emb.sin().to(dt)


def _torch_layer(w, x, cos, sin, pos, cache_k, cache_v, cur, n):
    """The same math written directly in torch, f32 where the DSL says f32."""
    dt = x.dtype

    def rms(t, g):
        tf32 = t.float()
        return (tf32 * torch.rsqrt(tf32.pow(2).mean(-1, keepdim=True) + EPS) * g.float()).to(dt)

    def rot(t):
        return torch.cat((-t[..., D // 2:], t[..., : D // 2]), dim=-1)

    s = x.shape[0]
    h = rms(x, w["attn_norm"])
    q = (h @ w["wq"]).view(s, H, D).transpose(0, 1)
    k = (h @ w["wk"]).view(s, KV, D).transpose(0, 1)
    v = (h @ w["wv"]).view(s, KV, D)
    c, sn = cos.float()[pos], sin.float()[pos]
    q = (q.float() * c + rot(q.float()) * sn).to(dt)
    k = (k.float() * c + rot(k.float()) * sn).to(dt)
    ck, cv = cache_k.clone(), cache_v.clone()
    ck[0, cur:cur + n] = k.transpose(0, 1)[:n]
    cv[0, cur:cur + n] = v[:n]
    keys = ck[0].permute(1, 2, 0).repeat_interleave(H // KV, 0)
    vals = cv[0].permute(1, 0, 2).repeat_interleave(H // KV, 0)
    scores = (q @ keys) * torch.tensor(1.0 / math.sqrt(D), dtype=dt)
    mask = torch.arange(MAXLEN)[None, :] <= pos[:, None]
    probs = torch.softmax(scores.masked_fill(~mask, float("-inf")).float(), -1).to(dt)
    o = (probs @ vals).transpose(0, 1).reshape(s, H * D)
    h = x + o @ w["wo"]
    m = rms(h, w["mlp_norm"])
    out = h + (torch.nn.functional.silu(m @ w["w_gate"]) * (m @ w["w_up"])) @ w["w_down"]
    return out, ck, cv


@pytest.mark.parametrize("dt,tol", [(torch.float32, 0.0), (torch.bfloat16, 2e-2)])
def test_decoder_layer_prefill_then_decode_matches_torch(dt: torch.dtype, tol: float) -> None:
    layer = _layer({torch.float32: "f32", torch.bfloat16: "bf16"}[dt])
    gen = torch.Generator().manual_seed(0)
    w = _weights(dt, gen)
    cos, sin = _rope_tables(dt)
    ck = torch.zeros(1, MAXLEN, KV, D, dtype=dt)
    cv = torch.zeros(1, MAXLEN, KV, D, dtype=dt)
    order = ["attn_norm", "wq", "wk", "wv", "wo", "mlp_norm", "w_gate", "w_up", "w_down"]
    cur = 0
    for s in (5, 1, 1, 3):  # prefill, then decode steps: seq is bound to several extents
        x = (torch.randn(s, HID, generator=gen)).to(dt)
        pos = torch.arange(cur, cur + s)
        args = (x, *[w[n] for n in order], cos, sin, pos, ck, cv, torch.tensor(cur), torch.tensor(s))
        ck_before, cv_before = ck.clone(), cv.clone()
        got = layer(*args)
        want = _torch_layer(w, x, cos, sin, pos, ck, cv, cur, s)
        assert torch.equal(ck, ck_before) and torch.equal(cv, cv_before), "a step mutated the cache it was given"
        for g, e in zip(got, want):
            assert g.dtype == e.dtype and g.shape == e.shape
            if tol == 0.0:
                torch.testing.assert_close(g, e, rtol=0, atol=0)
            else:
                rel = (g.float() - e.float()).norm() / e.float().norm().clamp_min(1e-30)
                assert rel <= tol, f"relative L2 error {rel:.3g} above {tol}"
        ck, cv = got[1], got[2]
        cur += s


def test_decoder_layer_records_sibling_calls_not_inlined() -> None:
    layer = _layer("f32")
    ops = [n.op for n in layer.layer.graph.nodes]
    assert ops == ["call", "call"]
    assert [n.callee.name for n in layer.layer.graph.nodes] == ["attention", "mlp"]
    assert layer.weights.keys() == {"attn_norm", "wq", "wk", "wv", "wo", "mlp_norm", "w_gate", "w_up", "w_down"}

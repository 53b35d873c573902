"""rope against Hugging Face's apply_rotary_pos_emb, rms_norm's rounding, and reductions over empty axes."""

from __future__ import annotations

import math

import pytest
import torch
from transformers.models.llama.modeling_llama import LlamaRMSNorm
from transformers.models.qwen3.modeling_qwen3 import Qwen3RMSNorm, apply_rotary_pos_emb

from tilefoundry import func
from tilefoundry.dsl import ConstTensor, DimVar, ReduceKind, Tensor, tf

# -- rope ------------------------------------------------------------------------------------------------------


def _tables(max_pos: int, d: int, dt: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
    ang = torch.arange(max_pos, dtype=torch.float32)[:, None] * inv[None]
    emb = torch.cat((ang, ang), -1)
    return emb.cos().to(dt), emb.sin().to(dt)


def _rope_fn(q_shape, k_shape, max_pos, d, dt, seq):  # noqa: ANN001, ANN202
    @func
    def rotate(q: Tensor[q_shape, dt], k: Tensor[k_shape, dt], cos: Tensor[(max_pos, d), dt],
               sin: Tensor[(max_pos, d), dt], pos: Tensor[(seq,), "i64"]):
        return tf.rope(q, k, cos, sin, pos)

    return rotate


# (batch, seq, heads, kv heads, head_dim): S != H, S == H (the 3x3 case), no batch axis
SHAPES = [(2, 5, 4, 2, 8), (1, 3, 3, 3, 8), (None, 6, 4, 1, 16), (None, 3, 3, 3, 8)]


@pytest.mark.parametrize("b,s,h,kv,d", SHAPES, ids=[f"B{b}-S{s}-H{h}" for b, s, h, _, d in SHAPES])
def test_rope_equals_hugging_face_apply_rotary_pos_emb_in_f32(b, s, h, kv, d) -> None:  # noqa: ANN001
    lead = () if b is None else (b,)
    g = torch.Generator().manual_seed(s * 10 + h)
    q, k = torch.randn(*lead, s, h, d, generator=g), torch.randn(*lead, s, kv, d, generator=g)
    cos, sin = _tables(32, d, torch.float32)
    pos = torch.tensor([7, 0, 31, 2, 9, 4][:s])
    got_q, got_k = _rope_fn(q.shape, k.shape, 32, d, "f32", s)(q, k, cos, sin, pos)
    # Hugging Face: cos / sin rows at the positions, unsqueezed on the heads axis of [..., S, H, D].
    want_q, want_k = apply_rotary_pos_emb(q, k, cos[pos], sin[pos], unsqueeze_dim=1)
    assert torch.equal(got_q, want_q) and torch.equal(got_k, want_k)
    if b is not None:
        want_q2, _ = apply_rotary_pos_emb(q, k, cos[pos][None], sin[pos][None], unsqueeze_dim=2)
        assert torch.equal(got_q, want_q2)


def test_rope_in_bf16_rotates_in_f32_and_rounds_once() -> None:
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, 4, 4, 8, generator=g).bfloat16()
    k = torch.randn(1, 4, 2, 8, generator=g).bfloat16()
    cos, sin = _tables(16, 8, torch.bfloat16)
    pos = torch.tensor([3, 4, 5, 6])
    got_q, got_k = _rope_fn(q.shape, k.shape, 16, 8, "bf16", 4)(q, k, cos, sin, pos)
    assert got_q.dtype == got_k.dtype == torch.bfloat16
    f32_q, f32_k = apply_rotary_pos_emb(q.float(), k.float(), cos[pos].float(), sin[pos].float(), unsqueeze_dim=1)
    assert torch.equal(got_q, f32_q.bfloat16()) and torch.equal(got_k, f32_k.bfloat16())
    # Hugging Face in bf16 rounds both products and their sum: within those three roundings of the terms.
    hf_q, _ = apply_rotary_pos_emb(q, k, cos[pos], sin[pos], unsqueeze_dim=1)
    c, s = cos[pos].float()[:, None], sin[pos].float()[:, None]
    qf = q.float()
    terms = qf.abs() * c.abs() + torch.cat((qf[..., 4:], qf[..., :4]), -1).abs() * s.abs()
    assert ((got_q.float() - hf_q.float()).abs() <= 2**-7 * terms).all()


def test_rope_on_a_dimvar_sequence_as_a_decoder_writes_it() -> None:
    seq = DimVar("seq", 1, 32)
    hid, h, kv, d = 32, 4, 2, 8

    @func
    def qk(x: Tensor[(1, seq, hid), "f32"], wq: ConstTensor[(hid, h * d), "f32"],
           wk: ConstTensor[(hid, kv * d), "f32"], cos: Tensor[(32, d), "f32"], sin: Tensor[(32, d), "f32"],
           pos: Tensor[(seq,), "i64"]):
        return tf.rope(tf.reshape(x @ wq, (1, seq, h, d)), tf.reshape(x @ wk, (1, seq, kv, d)), cos, sin, pos)

    cos, sin = _tables(32, d, torch.float32)
    g = torch.Generator().manual_seed(1)
    wq, wk = torch.randn(hid, h * d, generator=g), torch.randn(hid, kv * d, generator=g)
    for s in (1, 4, 7):
        x, pos = torch.randn(1, s, hid, generator=g), torch.arange(10, 10 + s)
        got_q, got_k = qk(x, wq, wk, cos, sin, pos)
        want_q, want_k = apply_rotary_pos_emb((x @ wq).view(1, s, h, d), (x @ wk).view(1, s, kv, d), cos[pos][None],
                                              sin[pos][None], unsqueeze_dim=2)
        assert torch.equal(got_q, want_q) and torch.equal(got_k, want_k)


def test_rope_positions_outside_the_caches_are_refused() -> None:
    q = torch.zeros(2, 1, 8)
    cos, sin = _tables(4, 8, torch.float32)
    with pytest.raises(ValueError, match=r"rope at .*pos_ids \[1, 4\] out of range for 4 cache rows"):
        _rope_fn(q.shape, q.shape, 4, 8, "f32", 2)(q, q, cos, sin, torch.tensor([1, 4]))


# -- rms_norm --------------------------------------------------------------------------------------------------


def _rms_fn(x_dt: str, w_dt: str, eps: float):  # noqa: ANN202
    @func
    def norm(x: Tensor[(3, 5, 64), x_dt], w: ConstTensor[(64,), w_dt]):
        return tf.rms_norm(x, w, eps)

    return norm


@pytest.mark.parametrize("hf_norm", [LlamaRMSNorm, Qwen3RMSNorm])
def test_rms_norm_bf16_weight_on_bf16_equals_hugging_face_bit_for_bit(hf_norm) -> None:  # noqa: ANN001
    g = torch.Generator().manual_seed(2)
    x = (torch.randn(3, 5, 64, generator=g) * 3).bfloat16()
    norm = hf_norm(64, eps=1e-6).to(torch.bfloat16)
    with torch.no_grad():
        norm.weight.copy_((torch.randn(64, generator=g) * 0.5 + 1).bfloat16())
        want = norm(x)
    got = _rms_fn("bf16", "bf16", 1e-6)(x, norm.weight.detach())
    assert got.dtype == torch.bfloat16 and torch.equal(got, want)


def test_rms_norm_f32_weight_on_bf16_stays_f32_through_the_multiply() -> None:
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(3, 5, 64, generator=g) * 3).bfloat16()
    w = torch.randn(64, generator=g) * 0.5 + 1
    xf = x.float()
    normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)
    got = _rms_fn("bf16", "f32", 1e-5)(x, w)
    assert got.dtype == torch.bfloat16
    assert torch.equal(got, (normed * w).bfloat16())
    # Rounding before the multiply (what a bf16 weight does) gives another result here.
    assert not torch.equal(got, (normed.bfloat16().float() * w).bfloat16())


def test_rms_norm_f16_weight_on_f32_rounds_to_the_weight_dtype() -> None:
    g = torch.Generator().manual_seed(4)
    x = torch.randn(3, 5, 64, generator=g)
    w = (torch.randn(64, generator=g) + 1).half()
    normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    got = _rms_fn("f32", "f16", 1e-6)(x, w)
    assert got.dtype == torch.float32 and torch.equal(got, (normed.half() * w).float())


# -- reduce over an empty axis -----------------------------------------------------------------------------------

CTX = DimVar("ctx_len", 0, 8)
DTYPES = ["f32", "f16", "bf16", "fp8e4m3", "fp8e5m2", "i8", "i32", "i64"]


def _identity(kind: str, dt: torch.dtype) -> float:
    if kind in ("sum", "abs_max"):
        return 0.0
    if kind == "mean":
        return math.nan
    if not dt.is_floating_point:
        info = torch.iinfo(dt)
        return float(info.min if kind == "max" else info.max)
    if dt == torch.float8_e4m3fn:  # no infinity: the finite extremes
        return -448.0 if kind == "max" else 448.0
    return -math.inf if kind == "max" else math.inf


# mean is defined on floats only (its type rule refuses integers)
COMBOS = [(dt, kind) for dt in DTYPES for kind in ("sum", "mean", "max", "min", "abs_max")
          if not (kind == "mean" and dt.startswith("i"))]


@pytest.mark.parametrize("dt,kind", COMBOS)
@pytest.mark.parametrize("keepdim", [True, False])
def test_reduce_over_an_empty_axis_is_the_identity(dt: str, kind: str, keepdim: bool) -> None:
    @func
    def scores(x: Tensor[(2, 3, CTX), dt]):
        return tf.reduce(x, axes=(-1,), keepdim=keepdim, kind=ReduceKind[kind])

    from tilefoundry.evaluator.value import to_torch_dtype

    tdt = to_torch_dtype(dt)
    out = scores(torch.zeros(2, 3, 0).to(tdt))
    assert out.dtype == tdt and tuple(out.shape) == ((2, 3, 1) if keepdim else (2, 3))
    want = _identity(kind, tdt)
    values = out.float()
    if math.isnan(want):
        assert values.isnan().all()
    else:
        assert (values == want).all(), (values, want)
    if kind in ("sum", "mean") and tdt in (torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32):
        torch_fn = torch.sum if kind == "sum" else torch.mean
        assert torch.equal(out.float().nan_to_num(7.0),
                           torch_fn(torch.zeros(2, 3, 0).to(tdt), -1, keepdim=keepdim).float().nan_to_num(7.0))


def test_an_online_softmax_merge_over_an_empty_cache_is_the_plain_softmax() -> None:
    @func
    def merged(cache_scores: Tensor[(2, CTX), "f32"], new_scores: Tensor[(2, 3), "f32"]):
        m_c = tf.reduce(cache_scores, axes=-1, kind="max")
        m_n = tf.reduce(new_scores, axes=-1, kind="max")
        m = tf.maximum(m_c, m_n)
        l_c = tf.reduce(tf.exp(cache_scores - m), axes=-1, kind="sum")
        l_n = tf.reduce(tf.exp(new_scores - m), axes=-1, kind="sum")
        return tf.exp(new_scores - m) / (l_c + l_n)

    new = torch.randn(2, 3)
    assert torch.allclose(merged(torch.zeros(2, 0), new), torch.softmax(new, -1), atol=1e-7, rtol=1e-6)
    cache = torch.randn(2, 4)
    both = torch.softmax(torch.cat([cache, new], -1), -1)[:, 4:]
    assert torch.allclose(merged(cache, new), both, atol=1e-7, rtol=1e-6)


def test_reduce_over_several_axes_one_of_them_empty() -> None:
    @func
    def f(x: Tensor[(CTX, 3, 2), "f32"]):
        return tf.reduce(x, axes=(0, 2), keepdim=False, kind="min")

    out = f(torch.zeros(0, 3, 2))
    assert out.shape == (3,) and (out == math.inf).all()

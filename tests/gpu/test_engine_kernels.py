"""The decode engine's CUDA kernels against their torch meaning (tilefoundry.engine.reference), on the GPU.

Every test draws fresh random data (its seed is in each failure message), poisons outputs with NaN so that
an element the kernel skips shows, and bounds the relative L2 error by what bf16 rounding allows. Shapes
cover M = 1..16 tokens, N and K that are multiples of nothing the kernels tile by, and the context edges
(the first token, one cached token, odd lengths, a full cache). The last tests run the kernels as the decode
engine runs them (DecodeEngine on CudaKernels, a two-layer Qwen3 with Qwen3-1.7B's heads): a prefill chunk,
then decode steps replayed from the engine's captured CUDA graph, against the torch reference, with
Programmatic Dependent Launch on and off.
"""

from __future__ import annotations

import contextlib
import random
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root, for tests.*

from tests.engine_cases import load_qwen3, save_random_qwen3  # noqa: E402

from tilefoundry.engine import (  # noqa: E402
    CudaKernels,
    DecodeEngine,
    argmax_workspace,
    attention_workspace,
    load_kernels,
    reference,
    require_cuda,
)

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

BF16 = torch.bfloat16
EPS = 1e-6
TOL = 1e-2  # relative L2 of one bf16 result (its rounding alone is about 3e-3)


@pytest.fixture(scope="module")
def lib():
    require_cuda()
    kernels = load_kernels()
    kernels.set_pdl(True)
    yield kernels
    kernels.set_pdl(True)


class Rand:
    """Fresh random tensors on the GPU from one seed drawn per test (shown as ``str(rand)``)."""

    def __init__(self) -> None:
        self.seed = random.SystemRandom().randrange(2**31)
        self.gen = torch.Generator(device="cuda").manual_seed(self.seed)

    def normal(self, *shape: int, scale: float = 1.0, dtype: torch.dtype = BF16) -> torch.Tensor:
        return (torch.randn(*shape, generator=self.gen, device="cuda") * scale).to(dtype)

    def __str__(self) -> str:
        return f"seed {self.seed}"


def nan(*shape: int, dtype: torch.dtype = BF16) -> torch.Tensor:
    return torch.full(shape, float("nan"), dtype=dtype, device="cuda")


def rel_l2(got: torch.Tensor, want: torch.Tensor) -> float:
    got, want = got.float(), want.float()
    return ((got - want).norm() / want.norm().clamp_min(1e-30)).item()


def assert_close(got: torch.Tensor, want: torch.Tensor, tol: float, what: str) -> None:
    assert got.shape == want.shape, f"{what}: shape {tuple(got.shape)} != {tuple(want.shape)}"
    assert not got.isnan().any(), f"{what}: {int(got.isnan().sum())} elements left unwritten (NaN)"
    err = rel_l2(got, want)
    assert err <= tol, f"{what}: relative L2 error {err:.2e} > {tol:.0e}"


def rope_tables(positions: int, d: int, dtype: torch.dtype = BF16) -> tuple[torch.Tensor, torch.Tensor]:
    inv = 1.0 / (1e6 ** (torch.arange(0, d, 2, device="cuda").float() / d))
    angles = torch.arange(positions, device="cuda").float()[:, None] * inv[None]
    emb = torch.cat((angles, angles), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


# ---- GEMV ------------------------------------------------------------------------------------------------

# (M, N, K, split_k), each run with the streamed kernel allowed for every weight size and with it off. split_k 0
# with M <= 2 then takes the streamed kernel where its plan fits, anything else the tiled one.
# Tiled: N and K multiples of nothing it tiles by (16 rows a CTA, 256 K a warp pass), an odd N, the smallest K,
# a K that leaves lanes idle in a slice, and every split. Streamed: Qwen3-1.7B's projections (stages of 4 rows
# of 2048, one row of 6144), fewer rows than CTAs, a last stage part full, stages of 8 short rows, 1 and 2 tokens,
# K at the register limit (16384: 8 words a lane), and K just past it for two tokens (8200: tiled).
GEMV_CASES = [
    (1, 2048, 2048, 0), (1, 4096, 2048, 0), (1, 1, 8, 0), (1, 3, 2056, 0), (2, 17, 264, 2), (3, 257, 6144, 0),
    (4, 130, 1000, 8), (5, 64, 4104, 4), (8, 2050, 2048, 1), (9, 33, 136, 8), (16, 1030, 2048, 0),
    (16, 6, 6144, 2), (7, 12288 // 8, 2048, 0),
    (1, 12288, 2048, 0), (1, 2048, 6144, 0), (2, 4096, 2048, 0), (2, 1000, 6144, 0), (1, 2050, 1024, 0),
    (2, 131, 512, 0), (1, 270, 12288, 0), (1, 96, 16384, 0), (2, 40, 8200, 0), (1, 7, 2048, 0),
]
VARIANTS = ["gemv", "gemv_residual", "gemv_swiglu", "rmsnorm_gemv", "rmsnorm_gemv_residual", "rmsnorm_gemv_swiglu"]


DEFAULT_STREAM = (2, 48 << 10, 16 << 10, 32 << 20, 128 << 20)
"""set_gemv_stream's defaults (gemv_common.cuh): the streamed kernel for weights of 32 to 128 MiB."""


@contextlib.contextmanager
def streaming(lib, every: bool):
    """The streamed GEMV for every weight size (``every``) or for none, the defaults again afterwards."""
    lib.set_gemv_stream(2, 48 << 10 if every else 0, 16 << 10, 0, 1 << 62)
    try:
        yield
    finally:
        lib.set_gemv_stream(*DEFAULT_STREAM)


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "tiled"])
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("m,n,k,split", GEMV_CASES)
def test_gemv_matches_torch(lib, variant: str, m: int, n: int, k: int, split: int, stream: bool) -> None:
    if not stream and split == 0 and m > 2:
        pytest.skip("takes the tiled kernel either way")
    if variant.endswith("swiglu") and n % 2:
        n += 1
    rand = Rand()
    x = rand.normal(m, k)
    w = rand.normal(n, k, scale=k**-0.5)
    norm = rand.normal(k, scale=0.2) + 1 if variant.startswith("rmsnorm") else None
    residual = rand.normal(m, n) if variant.endswith("residual") else None
    epilogue = variant.rsplit("_", 1)[1] if variant.endswith(("residual", "swiglu")) else "store"
    out = nan(m, n // 2 if epilogue == "swiglu" else n)
    args = [x] + ([norm] if norm is not None else []) + [w] + ([residual] if residual is not None else []) + [out]
    scalars = ([EPS] if norm is not None else []) + [split]
    with streaming(lib, stream):
        getattr(lib, variant)(*args, *scalars)
    want = reference.gemv(x, w, norm_weight=norm, eps=EPS, residual=residual, epilogue=epilogue, fused_norm=True)
    assert_close(out, want, 2 * TOL if epilogue == "swiglu" else TOL, f"{variant} M={m} N={n} K={k} ({rand})")


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "tiled"])
@pytest.mark.parametrize("norm", [False, True])
def test_gemv_residual_in_place(lib, norm: bool, stream: bool) -> None:
    """out may be the residual itself: the decode step adds each projection into the hidden state in place."""
    rand = Rand()
    x, w, h = rand.normal(1, 2048), rand.normal(2048, 2048, scale=2048**-0.5), rand.normal(1, 2048)
    g = rand.normal(2048, scale=0.2) + 1
    want = reference.gemv(x, w, norm_weight=g if norm else None, eps=EPS, residual=h, epilogue="residual",
                          fused_norm=True)
    with streaming(lib, stream):
        if norm:
            lib.rmsnorm_gemv_residual(x, g, w, h, h, EPS, 0)
        else:
            lib.gemv_residual(x, w, h, h, 0)
    assert_close(h, want, TOL, f"in-place residual ({rand})")


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "tiled"])
@pytest.mark.parametrize("norm", [False, True])
@pytest.mark.parametrize("m,n,k", [(1, 151936, 2048), (1, 1, 64), (2, 1001, 136), (3, 1001, 136), (16, 5000, 256)])
def test_gemv_argmax_is_the_first_largest_logit(lib, norm: bool, m: int, n: int, k: int, stream: bool) -> None:
    rand = Rand()
    x, w = rand.normal(m, k), rand.normal(n, k, scale=k**-0.5)
    g = rand.normal(k, scale=0.2) + 1
    tie = n // 2
    if n > 100:  # two equal rows far above the rest for token 0: argmax takes the first
        w[tie] = x[0] * (4 * k**-0.5)
        w[tie + 7] = w[tie]
    logits, token, ws = nan(m, n), torch.full((m,), -1, dtype=torch.int64, device="cuda"), argmax_workspace(m, "cuda")
    for attempt in range(2):  # the second launch finds the workspace zeroed by the first
        if attempt:
            x.copy_(rand.normal(m, k))
        with streaming(lib, stream):
            if norm:
                lib.rmsnorm_gemv_argmax(x, g, w, logits, token, ws, EPS, 0)
            else:
                lib.gemv_argmax(x, w, logits, token, ws, 0)
        want = reference.gemv(x, w, norm_weight=g if norm else None, eps=EPS, fused_norm=True)
        assert_close(logits, want, TOL, f"argmax logits ({rand})")
        assert torch.equal(token, logits.float().argmax(-1)), f"tokens {token.tolist()} ({rand})"
        if n > 100 and not attempt:
            assert int(token[0]) == tie, f"token 0 is {int(token[0])}, not the first of the tied rows {tie}"
        assert not ws.any(), "the workspace was not left zeroed"


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "tiled"])
@pytest.mark.parametrize("norm", [True, False])
def test_gemv_greedy_picks_the_token_and_feeds_the_next_step(lib, norm: bool, stream: bool) -> None:
    """The greedy epilogue: logits as the argmax GEMV's, result = (first largest logit, all finite), and the next
    step's inputs (token, position + 1, context + 1) in column 0 of step; a NaN logit clears the finite flag and
    is the largest, as in torch.argmax; the workspace is left zeroed for the next launch."""
    n, k = 151936, 2048
    rand = Rand()
    x, w, g = rand.normal(1, k), rand.normal(n, k, scale=k**-0.5), rand.normal(k, scale=0.2) + 1
    tie = 70001
    w[tie] = x[0] * (4 * k**-0.5)
    w[tie + 5] = w[tie]
    logits, ws = nan(1, n), argmax_workspace(1, "cuda")
    result = torch.full((2,), -1, dtype=torch.int64, device="cuda")
    step = torch.tensor([[5, 9, 9, 9], [40, 9, 9, 9], [41, 9, 9, 9]], dtype=torch.int32, device="cuda")
    with streaming(lib, stream):
        for attempt in range(3):  # 1: a fresh x; 2: a NaN weight row makes a NaN logit
            if attempt == 1:
                x.copy_(rand.normal(1, k))
            if attempt == 2:
                w[123] = float("nan")
            if norm:
                lib.rmsnorm_gemv_greedy(x, g, w, logits, result, step, ws, EPS)
            else:
                lib.gemv_greedy(x, w, logits, result, step, ws)
            want = reference.gemv(x, w, norm_weight=g if norm else None, eps=EPS, fused_norm=True)
            if attempt < 2:
                assert_close(logits, want, TOL, f"greedy logits ({rand})")
            token = int(logits.float().argmax(-1))
            assert result.tolist() == [token, 0 if attempt == 2 else 1], f"result {result.tolist()} ({rand})"
            if attempt == 0:
                assert token == tie, f"token {token}, not the first of the tied rows {tie} ({rand})"
            if attempt == 2:
                assert token == 123, f"a NaN logit is the largest (torch.argmax); got {token}"
            assert step[:, 0].tolist() == [token, 41 + attempt, 42 + attempt], f"step {step.tolist()}"
            assert step[:, 1:].eq(9).all(), "step was written outside column 0"
            assert not ws.any(), "the workspace was not left zeroed"


def test_gemv_runs_on_the_current_stream(lib) -> None:
    """A kernel launched while another stream is current runs on that stream, after the work queued there."""
    rand = Rand()
    w, x = rand.normal(4096, 2048, scale=2048**-0.5), torch.zeros(1, 2048, dtype=BF16, device="cuda")
    src = rand.normal(1, 2048)
    big = rand.normal(8192, 8192)
    out = nan(1, 4096)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        for _ in range(4):
            big = big @ big.T * 1e-4  # keeps the stream busy before x is written
        x.copy_(src)
        lib.gemv(x, w, out, 0)
    side.synchronize()
    assert_close(out, reference.gemv(src, w), TOL, f"gemv after work on its stream ({rand})")


# ---- decode attention -----------------------------------------------------------------------------------

# (M, H, KV, D, position, capacity, splits): the first token (nothing cached), one cached token, odd lengths,
# a full cache, a single slice over a long context, the most slices, GQA groups 1 to 8 and D 64 / 128,
# causal prefill chunks.
ATTENTION_CASES = [
    (1, 16, 8, 128, 0, 64, 0), (1, 16, 8, 128, 1, 64, 0), (1, 16, 8, 128, 254, 256, 0),
    (1, 16, 8, 128, 1023, 1100, 0), (1, 16, 8, 128, 4095, 4096, 0), (1, 16, 8, 128, 36, 100, 7),
    (1, 16, 8, 128, 2000, 2048, 1), (1, 16, 8, 128, 3000, 4096, 64), (1, 9, 3, 64, 40, 128, 0),
    (1, 8, 1, 128, 300, 512, 0), (1, 4, 4, 64, 5, 16, 0), (1, 32, 4, 128, 777, 800, 0),
    (2, 16, 8, 128, 0, 64, 0), (5, 16, 8, 128, 100, 256, 0), (16, 16, 8, 128, 1000, 1100, 0),
    (16, 9, 3, 64, 7, 64, 3), (3, 8, 1, 128, 50, 64, 2), (16, 16, 8, 128, 0, 16, 0), (7, 4, 4, 64, 900, 1024, 5),
]


@pytest.mark.parametrize("m,h,kv,d,pos,cap,splits", ATTENTION_CASES)
def test_decode_attention_matches_torch(lib, m, h, kv, d, pos, cap, splits) -> None:
    rand = Rand()
    q = rand.normal(m, h, d)
    cache_k, cache_v = rand.normal(cap, kv, d), rand.normal(cap, kv, d)
    position = torch.tensor([pos], dtype=torch.int32, device="cuda")
    ws = attention_workspace(lib, m, h, kv, d, device="cuda", splits=splits)
    scale = d**-0.5
    for attempt in range(2):  # the second launch finds every ticket reset by the first
        if attempt:
            q = rand.normal(m, h, d)
        out = nan(m, h, d)
        lib.decode_attention(q, cache_k, cache_v, position, out, ws, scale, splits)
        want = reference.decode_attention(q, cache_k, cache_v, pos, scale)
        assert_close(out, want, TOL, f"attention M={m} H={h} KV={kv} D={d} ctx={pos + m} ({rand})")


def test_decode_attention_reads_the_position_on_the_device(lib) -> None:
    """One captured launch serves every context length: the graph replays with the position changed."""
    rand = Rand()
    q, cache_k, cache_v = rand.normal(1, 16, 128), rand.normal(600, 8, 128), rand.normal(600, 8, 128)
    position = torch.zeros(1, dtype=torch.int32, device="cuda")
    ws = attention_workspace(lib, 1, 16, 8, 128, device="cuda")
    out = nan(1, 16, 128)
    lib.decode_attention(q, cache_k, cache_v, position, out, ws, 128**-0.5, 0)  # warm-up outside capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        lib.decode_attention(q, cache_k, cache_v, position, out, ws, 128**-0.5, 0)
    for pos in (0, 1, 31, 32, 33, 254, 599):
        position.fill_(pos)
        out.fill_(float("nan"))
        graph.replay()
        want = reference.decode_attention(q, cache_k, cache_v, pos, 128**-0.5)
        assert_close(out, want, TOL, f"replayed attention at position {pos} ({rand})")


# ---- q/k norm + RoPE + cache write -------------------------------------------------------------------------

@pytest.mark.parametrize("norm", [True, False])
@pytest.mark.parametrize("table", [BF16, torch.float32])
@pytest.mark.parametrize("m,h,kv,d,pos,cap", [(1, 16, 8, 128, 0, 32), (1, 16, 8, 128, 1023, 1024),
                                              (4, 9, 3, 64, 17, 64), (16, 16, 8, 128, 100, 200),
                                              (3, 8, 1, 128, 5, 8)])
def test_rope_cache_matches_torch(lib, norm, table, m, h, kv, d, pos, cap) -> None:
    rand = Rand()
    qkv = rand.normal(m, (h + 2 * kv) * d, scale=3.0)
    q_norm, k_norm = rand.normal(d, scale=0.2) + 1, rand.normal(d, scale=0.2) + 1
    cos, sin = rope_tables(cap + 4, d, table)
    cache_k, cache_v = rand.normal(cap, kv, d), rand.normal(cap, kv, d)
    position = torch.tensor([pos], dtype=torch.int32, device="cuda")
    want_q, want_k, want_v = reference.rope_cache(qkv, cos, sin, pos, cache_k, cache_v, heads=h,
                                                  q_norm=q_norm if norm else None, k_norm=k_norm, eps=EPS)
    q_out = nan(m, h, d)
    if norm:
        lib.qk_norm_rope_cache(qkv, q_norm, k_norm, cos, sin, position, q_out, cache_k, cache_v, EPS)
    else:
        lib.rope_cache(qkv, cos, sin, position, q_out, cache_k, cache_v)
    what = f"rope M={m} pos={pos} norm={norm} table={table} ({rand})"
    kept = torch.ones(cap, dtype=torch.bool, device="cuda")
    kept[pos:pos + m] = False
    assert torch.equal(cache_k[kept], want_k[kept]) and torch.equal(cache_v[kept], want_v[kept]), \
        f"{what}: cache entries outside the step changed"
    assert torch.equal(cache_v, want_v), f"{what}: v was not copied into the cache as it is"
    assert_close(q_out, want_q, 5e-3, f"{what}: q")
    assert_close(cache_k[pos:pos + m], want_k[pos:pos + m], 5e-3, f"{what}: k in the cache")


def test_rope_cache_writes_nothing_past_the_capacity(lib) -> None:
    """Tokens whose position falls past the cache are dropped, never written outside it."""
    rand = Rand()
    h, kv, d, cap = 4, 2, 64, 8
    backing_k, backing_v = rand.normal(cap + 4, kv, d), rand.normal(cap + 4, kv, d)
    before_k, before_v = backing_k.clone(), backing_v.clone()
    cache_k, cache_v = backing_k[:cap], backing_v[:cap]
    qkv = rand.normal(4, (h + 2 * kv) * d)
    cos, sin = rope_tables(64, d)
    position = torch.tensor([6], dtype=torch.int32, device="cuda")
    lib.rope_cache(qkv, cos, sin, position, nan(4, h, d), cache_k, cache_v)
    assert torch.equal(backing_k[cap:], before_k[cap:]) and torch.equal(backing_v[cap:], before_v[cap:])
    _, want_k, want_v = reference.rope_cache(qkv[:2], cos, sin, 6, before_k[:cap], before_v[:cap], heads=h)
    assert torch.equal(cache_v, want_v)
    assert_close(cache_k, want_k, 5e-3, f"k at the cache's end ({rand})")


# ---- RMSNorm, residual + RMSNorm, SwiGLU ---------------------------------------------------------------------

@pytest.mark.parametrize("add", [False, True])
@pytest.mark.parametrize("m,k", [(1, 2048), (1, 8), (3, 2056), (64, 6144), (5, 4104)])
def test_rmsnorm_matches_torch(lib, add: bool, m: int, k: int) -> None:
    rand = Rand()
    x, residual, g = rand.normal(m, k), rand.normal(m, k, scale=4.0), rand.normal(k, scale=0.2) + 1
    out = nan(m, k)
    if add:
        want_residual, want = reference.add_rmsnorm(x, residual, g, EPS)
        lib.add_rmsnorm(x, residual, g, out, EPS)
        assert torch.equal(residual, want_residual), f"residual + x differs from torch's bf16 sum ({rand})"
    else:
        want = reference.rms_norm(x, g, EPS)
        lib.rmsnorm(x, g, out, EPS)
    assert_close(out, want, 5e-3, f"rmsnorm add={add} M={m} K={k} ({rand})")


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("m,i", [(1, 6144), (1, 8), (7, 1000), (64, 3072)])
def test_swiglu_matches_torch(lib, packed: bool, m: int, i: int) -> None:
    rand = Rand()
    if packed:  # the two halves of one (M, 2I) projection
        both = rand.normal(m, 2 * i, scale=3.0)
        gate, up = both[:, :i], both[:, i:]
    else:
        gate, up = rand.normal(m, i, scale=3.0), rand.normal(m, i)
    out = nan(m, i)
    lib.swiglu(gate, up, out)
    assert_close(out, reference.swiglu(gate, up), 5e-3, f"swiglu M={m} I={i} packed={packed} ({rand})")


# ---- the kernels as a decoder: the decode engine on them ------------------------------------------------------

DECODER_CAPACITY = 64


@pytest.fixture(scope="module")
def tiny_qwen3(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    """(seed, loaded twin on cuda): a two-layer bf16 Qwen3 with Qwen3-1.7B's heads (16 query / 8 KV heads of 128,
    tied embeddings) and random weights."""
    seed = random.SystemRandom().randrange(2**31)
    folder = tmp_path_factory.mktemp("engine_kernels") / "qwen3"
    save_random_qwen3(folder, seed, BF16, vocab_size=1000, hidden_size=256, intermediate_size=512,
                      num_hidden_layers=2, num_attention_heads=16, num_key_value_heads=8, head_dim=128,
                      tie_word_embeddings=True, max_position_embeddings=128)
    return seed, load_qwen3(folder, "cuda")[2]


def margin(logits: torch.Tensor) -> float:
    top = logits.float().topk(2).values
    return (top[0] - top[1]).item()


@pytest.mark.parametrize("pdl", [True, False])
def test_the_engine_on_these_kernels_follows_torch_through_prefill_and_graph_replays(lib, tiny_qwen3,
                                                                                    pdl: bool) -> None:
    """The decode engine on these kernels (CudaKernels): a 5-token prefill chunk, then 24 decode steps, every one
    after the first a replay of the CUDA graph the first captured (token and position read on the device); the
    logits follow the torch reference (engine.reference) run on the twin's unpacked weights, PDL on and off."""
    seed, twin = tiny_qwen3
    rand = Rand()
    what = f"model seed {seed}, {rand}, pdl={pdl}"
    weights = twin.decoder_weights()
    names = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "input_norm", "post_norm",
             "q_norm", "k_norm")
    raw = [{name: getattr(layer, name) for name in names} for layer in weights.layers]
    lib.set_pdl(pdl)
    try:
        engine = DecodeEngine(twin, DECODER_CAPACITY, kernels=CudaKernels(lib))
        spec = engine.spec
        assert (spec.heads, spec.kv_heads, spec.head_dim) == (16, 8, 128) and weights.lm_head is weights.embed
        ref_cache = [tuple(torch.zeros(DECODER_CAPACITY, 8, 128, dtype=BF16, device="cuda") for _ in range(2))
                     for _ in raw]

        def reference_step(tokens: torch.Tensor, pos: int) -> torch.Tensor:
            """The logits of ``tokens`` at ``pos`` in torch, from the unpacked weights; updates ``ref_cache``."""
            return reference.decoder_logits(tokens, weights.embed, raw, weights.final_norm, weights.lm_head,
                                            weights.cos, weights.sin, pos, ref_cache, heads=spec.heads, eps=spec.eps)

        prompt = torch.randint(0, spec.vocab, (5,), device="cuda", generator=rand.gen)
        got = engine.prefill(prompt, all_logits=True)
        assert_close(got, reference_step(prompt, 0), 3 * TOL, f"prefill logits ({what})")
        token = int(got[-1].float().argmax())
        for i in range(24):
            pos = 5 + i
            logits = engine.decode(token)
            want = reference_step(torch.tensor([token], device="cuda"), pos)
            assert_close(logits, want, 3 * TOL, f"decode step {i} at position {pos} ({what})")
            chosen = int(logits.float().argmax())
            # Where torch's top-2 gap exceeds twice the largest logit difference, both must pick the same token.
            if margin(want[0]) > 2 * (logits.float() - want.float()).abs().max().item():
                assert chosen == int(want[0].float().argmax()), f"step {i}: greedy token differs from torch's ({what})"
            token = chosen
        assert engine.graph_status == "captured" and engine.stats.captures == 1 and engine.stats.replays == 23
        assert engine.length == 5 + 24

        # The captured step replayed directly (as bench/engine_kernels.py times it) recomputes the last decode.
        last = logits.clone()
        logits.fill_(float("nan"))
        engine.decode_graph.replay()
        torch.cuda.synchronize()
        assert_close(logits, last, 1e-3, f"decode_graph replayed ({what})")
        assert engine.length == 5 + 24 and engine.stats.replays == 23
    finally:
        lib.set_pdl(True)

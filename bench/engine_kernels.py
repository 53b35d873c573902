"""The decode engine's kernels against torch / cuBLAS on Qwen3-1.7B's decode shapes, in one run on the GPU.

Each kernel and its torch peers run as replays of a CUDA graph holding ``--launches`` back-to-back launches
that cycle through enough copies of their weights (or KV caches) to exceed L2 four times over, as a decode
step streams them; one launch's time is the replay's divided by the count, the median over ``--reps``
replays interleaved between the variants. GB/s counts the bytes a launch must move (weights or cache, plus
the activations it reads and writes); a device-to-device copy measured in the same run is the ceiling.
"ours, no PDL" is the same kernel with Programmatic Dependent Launch off, so back-to-back launches do not
overlap. "compiled" is the compiled kernel set's slot for the same job (``slot_functions``, jitted for CUDA),
timed the same way (for lm_head greedy decoding's head as the engine runs it: the ``choose`` slot - the logits, their
argmax and finiteness, found in the head's matmul, one merge and one small launch that also writes the next step's
token, position and context in place - against the hand-written greedy kernel, whose epilogue does all of it).
``--variant NAME=FLAGS`` also builds each GEMV slot with those compiler flags (a build-time knob of the runtime's
headers) and times it beside the default build. Every variant's output is checked against torch's before it is
timed; ``--only attention rope`` times those kernels alone. Every build the run needs (the hand-written library,
each compiled slot and variant) is made first, side by side.

The last part times the decode engine's own step: ``DecodeEngine`` on ``CudaKernels`` running bench/decode.py's
Qwen3-1.7B with random bf16 weights (embedding, 28 layers, final norm and lm_head), its cache holding random keys
and values so that the step's attention reads ``--contexts`` entries (1024), timed as replays of the CUDA graph
its decode captured (``DecodeEngine.decode_graph``), with PDL on and off and each ``--gemv-tuning``, and prints
the kernels' share of it. The same step through the compiled kernel set (``CompiledKernels``: every slot compiled
from the DSL), and through it with one group of slots at a time run by the hand-written kernels, says where the
compiled step's time goes: what each group costs inside the step, its launches' overlap with their neighbours
included, which a kernel timed alone does not show (``--no-split`` skips them). The summary table comes last.

    python bench/engine_kernels.py --json engine_kernels.json
    python bench/engine_kernels.py --only qkv o_proj --no-step --variant passes4=-DTILEFOUNDRY_MATMUL_DOT_PASSES=4
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from decode import SHAPES, build_hf  # noqa: E402
from graph_timing import Launch, copies_for, copy_bandwidth, graph_of, time_graphs  # noqa: E402

from tilefoundry import jit  # noqa: E402
from tilefoundry.engine import (  # noqa: E402
    CompiledKernels,
    CudaKernels,
    DecodeEngine,
    DecoderSpec,
    argmax_workspace,
    attention_workspace,
    load_kernels,
    reference,
    require_cuda,
)
from tilefoundry.engine.compiled_kernels import SlotShapes, slot_functions, slot_options, step_masks  # noqa: E402
from tilefoundry.engine.slots import STEP_WIDTH  # noqa: E402
from tilefoundry.models import open_checkpoint  # noqa: E402
from tilefoundry.models.session import load_backend  # noqa: E402

BF16 = torch.bfloat16
SHAPE = "qwen3-1.7b"
"""The model of every shape here, bench/decode.py's (the whole step runs it with random weights)."""
_CONFIG = SHAPES[SHAPE][1]
HIDDEN, INTER, HEADS, KV, D, VOCAB, LAYERS = (_CONFIG[k] for k in (
    "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim", "vocab_size",
    "num_hidden_layers"))
EPS = _CONFIG["rms_norm_eps"]
MAX_CONTEXT = _CONFIG["max_position_embeddings"] - 64
"""The longest context of the whole step (its engine holds the context plus 64 positions)."""


@dataclass
class Case:
    """One kernel, its torch peers, and how many bytes a launch moves."""

    name: str
    shape: str
    nbytes: int
    copies: int
    variants: dict[str, Launch]
    check: Callable[[], float]  # relative L2 of ours against torch, on copy 0
    results_us: dict[str, float] = field(default_factory=dict)
    error: float = float("nan")


def rand(*shape: int, scale: float = 1.0) -> torch.Tensor:
    return (torch.randn(*shape, device="cuda") * scale).to(BF16)


def rel_l2(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.float(), b.float()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


# Builds of the compiled GEMV slots with other compiler flags (``--variant NAME=FLAGS``: a build-time knob of the
# runtime's headers), each timed beside the default build as "compiled (NAME)".
VARIANTS: dict[str, tuple[str, ...]] = {}


@functools.cache
def compiled_slot(name: str, flags: tuple[str, ...] = ()) -> Any:
    """The compiled kernel set's slot ``name`` (``slot_functions``) jitted for CUDA at Qwen3-1.7B's shapes: the
    kernel the compiled set launches, timed alone beside the hand-written one (``flags``: more compiler flags)."""
    spec = DecoderSpec(hidden=HIDDEN, heads=HEADS, kv_heads=KV, head_dim=D, vocab=VOCAB, eps=EPS,
                       max_positions=_CONFIG["max_position_embeddings"])
    options = slot_options(name)  # as CompiledKernels builds it
    if flags:
        options = replace(options, extra_flags=(*options.extra_flags, *flags))
    return jit(slot_functions(SlotShapes(spec, "bf16", INTER, False, True))[name], target="cuda", options=options)


# ---- the cases ------------------------------------------------------------------------------------------------

def with_pdl(lib, on: bool, launch: Launch) -> Launch:
    """``launch`` with PDL switched as asked while it is captured (the library reads the switch at launch)."""

    def run(i: int) -> None:
        lib.set_pdl(on)
        launch(i)
        lib.set_pdl(True)

    return run


def gemv_case(lib, name: str, n: int, k: int, epilogue: str, norm: bool, slot: str | None = None) -> Case:
    """A GEMV of the hand-written set (``epilogue``: store, residual, swiglu or greedy; ``norm``: its rms_norm
    prologue) beside torch's ops for the same job, cuBLAS's bare GEMV and, where ``slot`` names one, the compiled
    set's slot of that job. ``greedy`` is greedy decoding's head as the engine runs it: the logits, their argmax,
    whether all are finite, and the next step's token, position and context on the device (hand-written: one
    kernel; compiled: ``CompiledKernels.greedy_head``, the ``choose`` slot, its next step written in place)."""
    n_out = n // 2 if epilogue == "swiglu" else n
    nbytes = n * k * 2 + k * 2 + n_out * 2 + (k * 2 if norm else 0) + (n * 2 if epilogue == "residual" else 0)
    copies = copies_for(n * k * 2)
    ws = [rand(n, k, scale=k**-0.5) for _ in range(copies)]
    x, g, res = rand(1, k), rand(k, scale=0.1) + 1, rand(1, n)
    out, res_out = torch.empty(1, n_out, dtype=BF16, device="cuda"), torch.empty(1, n, dtype=BF16, device="cuda")
    result, aws = torch.zeros(2, dtype=torch.int64, device="cuda"), argmax_workspace(1, "cuda")
    step = torch.zeros(3, 1, dtype=torch.int32, device="cuda")  # the next step's inputs, advanced by every launch
    entry = ("rmsnorm_" if norm else "") + {"store": "gemv", "residual": "gemv_residual", "swiglu": "gemv_swiglu",
                                            "greedy": "gemv_greedy"}[epilogue]
    fn = getattr(lib, entry)

    def ours(i: int) -> None:
        head = (x, g) if norm else (x,)
        eps = (EPS,) if norm else ()
        if epilogue == "residual":
            fn(*head, ws[i], res, res_out, *eps, 0)
        elif epilogue == "greedy":
            fn(*head, ws[i], out, result, step, aws, *eps)
        else:
            fn(*head, ws[i], out, *eps, 0)

    def torch_ops(i: int) -> torch.Tensor:  # what the twin launches for the same job
        h = reference.rms_norm(x, g, EPS) if norm else x
        y = F.linear(h, ws[i])
        if epilogue == "residual":
            return res + y
        if epilogue == "swiglu":
            return F.silu(y[:, 0::2]) * y[:, 1::2]
        if epilogue == "greedy":
            row = y[-1]
            torch.stack((row.argmax(), torch.isfinite(row).all().long()))
        return y

    def cublas(i: int) -> None:
        F.linear(x, ws[i])

    runners = {"ours": ours, "ours, no PDL": with_pdl(lib, False, ours), "torch ops": lambda i: torch_ops(i),
               "cuBLAS GEMV": cublas}
    compiled_out = torch.empty(1, VOCAB if slot in ("head", "choose") else n_out, dtype=BF16, device="cuda")
    compiled_result = torch.zeros(2, dtype=torch.int64, device="cuda")
    compiled_step = torch.zeros(3, STEP_WIDTH, dtype=torch.int32, device="cuda")  # the engine's step inputs
    masks = step_masks(torch.device("cuda"))
    def launcher(compiled: Any) -> Launch:
        def ours_compiled(i: int) -> None:
            if slot in ("o_proj", "down"):
                compiled(x, ws[i], res, compiled_out)
            elif slot == "choose":  # CompiledKernels.greedy_head
                compiled(x, g, ws[i], compiled_step, *masks, compiled_out, compiled_result[:1], compiled_result[1:],
                         compiled_step)
            else:
                compiled(x, g, ws[i], compiled_out)

        return ours_compiled

    builds = {"compiled": (), **{f"compiled ({v})": flags for v, flags in VARIANTS.items()}} if slot else {}
    for side, flags in builds.items():
        runners[side] = launcher(compiled_slot(slot, flags))

    def check() -> float:
        ours(0)
        want = torch_ops(0)
        got = res_out if epilogue == "residual" else out
        err = rel_l2(got, want)
        for side in builds:  # each build's output, pre-filled with NaN
            compiled_out.fill_(float("nan"))
            runners[side](0)
            err = max(err, rel_l2(compiled_out, want))
        if epilogue == "greedy":  # each token's logit the largest, to bf16's rounding (near-ties may differ)
            top = want.float().max()
            for chosen in (result, *((compiled_result,) if slot == "choose" else ())):
                err = max(err, ((top - want.float()[0, chosen[0]]) / top.abs()).item())
                assert int(chosen[1]) == 1, "finite logits flagged as not finite"
            if slot == "choose":  # the next step's inputs: the token, the position and context one more
                before = compiled_step[1:, 0].clone()
                runners["compiled"](0)  # (the token checked is the last build's: every build's is the same)
                assert int(compiled_step[0, 0]) == int(compiled_result[0]), "the next step's token"
                assert torch.equal(compiled_step[1:, 0], before + 1), "the next step's position and context"
        return err

    shape = f"{n}x{k}" + (" +norm" if norm else "") + ("" if epilogue == "store" else f" +{epilogue}")
    return Case(name, shape, nbytes, copies, runners, check)


def attention_case(lib, ctx: int) -> Case:
    capacity = ctx
    nbytes = 2 * ctx * KV * D * 2 + 2 * HEADS * D * 2
    copies = copies_for(2 * capacity * KV * D * 2)
    caches = [(rand(capacity, KV, D), rand(capacity, KV, D)) for _ in range(copies)]
    q, out = rand(1, HEADS, D), torch.empty(1, HEADS, D, dtype=BF16, device="cuda")
    position = torch.tensor([ctx - 1], dtype=torch.int32, device="cuda")
    ws = attention_workspace(lib, 1, HEADS, KV, D, device="cuda")
    scale = D**-0.5

    def ours(i: int) -> None:
        lib.decode_attention(q, caches[i][0], caches[i][1], position, out, ws, scale, 0)

    compiled = compiled_slot("attention")
    compiled_out = torch.empty(1, HEADS * D, dtype=BF16, device="cuda")

    def ours_compiled(i: int) -> None:
        compiled(q, caches[i][0], caches[i][1], position, compiled_out)

    def sdpa(i: int) -> torch.Tensor:
        k, v = (c[:ctx].permute(1, 0, 2)[None] for c in caches[i])
        return F.scaled_dot_product_attention(q.permute(1, 0, 2)[None], k, v, scale=scale, enable_gqa=True)

    def check() -> float:
        ours(0)
        ours_compiled(0)
        want = sdpa(0)[0].permute(1, 0, 2)
        return max(rel_l2(out, want), rel_l2(compiled_out.view(1, HEADS, D), want))

    return Case(f"attention ctx {ctx}", f"{HEADS}/{KV} heads x {D}", nbytes, copies,
                {"ours": ours, "ours, no PDL": with_pdl(lib, False, ours), "torch SDPA": lambda i: sdpa(i),
                 "compiled": ours_compiled}, check)


def rope_case(lib) -> Case:
    capacity = 2048
    qkv, qn, kn = rand(1, (HEADS + 2 * KV) * D, scale=3.0), rand(D, scale=0.1) + 1, rand(D, scale=0.1) + 1
    inv = 1.0 / (1e6 ** (torch.arange(0, D, 2, device="cuda").float() / D))
    emb = torch.arange(capacity, device="cuda").float()[:, None] * inv[None]
    cos, sin = torch.cat((emb, emb), -1).cos().to(BF16), torch.cat((emb, emb), -1).sin().to(BF16)
    ck, cv = rand(capacity, KV, D), rand(capacity, KV, D)
    q_out = torch.empty(1, HEADS, D, dtype=BF16, device="cuda")
    position = torch.tensor([1000], dtype=torch.int32, device="cuda")
    index = position.long()

    def ours(i: int) -> None:
        lib.qk_norm_rope_cache(qkv, qn, kn, cos, sin, position, q_out, ck, cv, EPS)

    def torch_ops(i: int) -> torch.Tensor:
        q, k, v = qkv.view(1, HEADS + 2 * KV, D).split((HEADS, KV, KV), dim=1)
        q, k = reference.rms_norm(q, qn, EPS), reference.rms_norm(k, kn, EPS)
        c, s = cos[index][:, None], sin[index][:, None]
        q, k = reference.rotate(q, c, s), reference.rotate(k, c, s)
        ck.index_copy_(0, index, k)
        cv.index_copy_(0, index, v)
        return q

    compiled = compiled_slot("rope_cache")
    positions = _CONFIG["max_position_embeddings"]  # the compiled slot takes the whole rotary tables
    emb_all = torch.arange(positions, device="cuda").float()[:, None] * inv[None]
    cos_all, sin_all = (f(torch.cat((emb_all, emb_all), -1)).to(BF16) for f in (torch.cos, torch.sin))
    ck4, cv4 = ck.clone()[None], cv.clone()[None]
    q_compiled, n_new = torch.empty(1, HEADS, D, dtype=BF16, device="cuda"), torch.ones((), dtype=torch.int64,
                                                                                        device="cuda")

    def ours_compiled(i: int) -> None:
        compiled(qkv, qn, kn, cos_all, sin_all, position, ck4, cv4, position.reshape(()), n_new, q_compiled, ck4,
                 cv4)

    def check() -> float:
        ours(0)
        ours_compiled(0)
        want = torch_ops(0)
        return max(rel_l2(q_out, want), rel_l2(q_compiled, want), rel_l2(ck4[0, 1000], ck[1000]),
                   rel_l2(cv4[0, 1000], cv[1000]))

    nbytes = (HEADS + 2 * KV) * D * 2 + HEADS * D * 2 + 2 * KV * D * 2 + 2 * D * 2 + 2 * D * 2
    return Case("q/k norm + rope + cache", f"{HEADS}+{KV}+{KV} heads", nbytes, 1,
                {"ours": ours, "ours, no PDL": with_pdl(lib, False, ours), "torch ops": lambda i: torch_ops(i),
                 "compiled": ours_compiled}, check)


def add_rmsnorm_case(lib) -> Case:
    x, r, g = rand(1, HIDDEN), rand(1, HIDDEN), rand(HIDDEN, scale=0.1) + 1
    out = torch.empty(1, HIDDEN, dtype=BF16, device="cuda")
    r_torch = r.clone()

    def ours(i: int) -> None:
        lib.add_rmsnorm(x, r, g, out, EPS)

    def torch_ops(i: int) -> torch.Tensor:
        r_torch.add_(x)
        return reference.rms_norm(r_torch, g, EPS)

    def check() -> float:
        r0 = r.clone()
        r_torch.copy_(r0)
        ours(0)
        want = torch_ops(0)
        r.copy_(r0)
        return rel_l2(out, want)

    return Case("residual + rmsnorm", f"1x{HIDDEN}", 5 * HIDDEN * 2, 1,
                {"ours": ours, "ours, no PDL": with_pdl(lib, False, ours), "torch ops": lambda i: torch_ops(i)},
                check)


def swiglu_case(lib) -> Case:
    gate, up = rand(1, INTER, scale=3.0), rand(1, INTER)
    out = torch.empty(1, INTER, dtype=BF16, device="cuda")

    def ours(i: int) -> None:
        lib.swiglu(gate, up, out)

    def check() -> float:
        ours(0)
        return rel_l2(out, reference.swiglu(gate, up))

    return Case("swiglu", f"1x{INTER}", 3 * INTER * 2, 1,
                {"ours": ours, "ours, no PDL": with_pdl(lib, False, ours),
                 "torch ops": lambda i: reference.swiglu(gate, up)}, check)


# ---- the whole step -------------------------------------------------------------------------------------------

DEFAULT_GEMV_TUNING = (2, 32 << 10)
"""set_gemv_tuning's defaults (gemv_tiled.cuh): two CTAs per SM, 32 KiB of weights prefetched per CTA."""
DEFAULT_GEMV_STREAM = (2, 48 << 10, 16 << 10, 32 << 20, 128 << 20)
"""set_gemv_stream's defaults (gemv_common.cuh): two CTAs per SM, 48 KiB rings of 16 KiB stages, for weights of
32 to 128 MiB."""
TILED_ONLY = (2, 0, 16 << 10, 0, 1 << 62)
"""set_gemv_stream with no ring: every GEMV takes the tiled kernel."""


def step_twin(folder: Path) -> tuple[Any, int]:
    """bench/decode.py's Qwen3-1.7B with random bf16 weights, saved into ``folder`` and loaded on the GPU as a
    runtime twin, and its parameter count (asserted)."""
    hf = build_hf(SHAPE, "cuda", BF16)
    params = sum(p.numel() for p in hf.parameters())
    assert params == SHAPES[SHAPE][2], f"{SHAPE}: {params} parameters, expected {SHAPES[SHAPE][2]}"
    hf.save_pretrained(folder)
    del hf
    torch.cuda.empty_cache()
    return load_backend(open_checkpoint(folder, progress=False), "twin", "cuda"), params


SLOT_GROUPS = {"attention": ("attention",), "rope+cache": ("rope_cache",), "qkv": ("norm_linear",),
               "gate/up": ("norm_swiglu",), "o_proj+down": ("linear_residual",), "head": ("head", "greedy_head")}
"""The compiled set's slots, grouped as the whole step swaps them for the hand-written kernels (--split)."""


class HandWritten(CompiledKernels):
    """The compiled set with the slots of ``hand`` run by the hand-written kernels instead: the whole step through
    it, against the compiled set's, is what those compiled slots cost inside the step (their launches' overlap with
    their neighbours included, which a kernel timed alone does not show)."""

    def __init__(self, lib, hand: tuple[str, ...]) -> None:
        super().__init__(jobs=16)
        self.name = f"compiled, hand-written {'/'.join(hand)}"
        self._cuda = CudaKernels(lib)
        self._hand = set(hand)

    def prepare(self, *args: Any) -> None:
        super().prepare(*args)
        self._cuda.prepare(*args)


def _slot(name: str) -> Callable[..., None]:
    def run(self: HandWritten, *args: Any) -> None:
        impl = self._cuda if name in self._hand else super(HandWritten, self)
        getattr(impl, name)(*args)

    run.__name__ = name
    return run


for _name in ("norm_linear", "rope_cache", "attention", "linear_residual", "norm_swiglu", "head", "greedy_head"):
    setattr(HandWritten, _name, _slot(_name))


def captured_engine(twin: Any, lib, ctx: int, kernels: Any = None) -> DecodeEngine:
    """A DecodeEngine of ``twin`` on ``kernels`` (the CUDA kernels by default), its cache holding ``ctx - 1``
    random positions, after one decode: its ``decode_graph`` is the step of a token at position ``ctx - 1``
    attending to ``ctx`` cache entries, captured with the library's PDL and GEMV settings of the moment."""
    capacity = ctx + 64
    engine = DecodeEngine(twin, capacity, kernels=kernels if kernels is not None else CudaKernels(lib))
    engine.load_caches([(rand(capacity, KV, D), rand(capacity, KV, D)) for _ in range(LAYERS)], ctx - 1)
    engine.decode(0)
    if engine.decode_graph is None:
        raise RuntimeError(f"engine_kernels.py: the decode engine captured no graph ({engine.graph_status})")
    return engine


def whole_step(lib, twin: Any, params: int, reps: int, ctx: int, profile: bool,
               tunings: list[tuple[int, int]] = (), streams: list[tuple[int, ...]] = (),
               split: bool = False) -> dict[str, object]:
    """The decode engine's own step on Qwen3-1.7B (embedding, 28 layers, the head): its captured CUDA graph
    replayed, one engine per setting (PDL on and off, every GEMV tiled, and each GEMV setting asked for) so each
    captures its own graph.

    ``tunings``: tiled-GEMV (CTAs per SM, prefetch bytes per CTA) settings (``set_gemv_tuning``); ``streams``:
    streamed-GEMV (CTAs per SM, ring bytes, stage bytes, min weight bytes, max weight bytes) settings
    (``set_gemv_stream``); each timed beside the default. ``split``: also the step through the compiled kernel
    set, and through it with each group of slots (``SLOT_GROUPS``) run by the hand-written kernels.
    """
    result: dict[str, object] = {"parameters": params, "context": ctx}
    engines: dict[str, DecodeEngine] = {}  # each graph replays into its engine's buffers: keep them alive
    tiled, stream = DEFAULT_GEMV_TUNING, DEFAULT_GEMV_STREAM
    configs = [("ours", True, tiled, stream), ("ours, no PDL", False, tiled, stream),
               ("ours, every GEMV tiled", True, tiled, TILED_ONLY)]
    configs += [(f"ours, gemv {c}/SM {b >> 10} KiB", True, (c, b), stream) for c, b in tunings]
    configs += [(f"ours, stream {c}/SM {r >> 10}/{st >> 10} KiB {lo >> 20}-{hi >> 20} MiB", True, tiled,
                 (c, r, st, lo, hi)) for c, r, st, lo, hi in streams]
    try:
        for name, pdl, tiled_setting, stream_setting in configs:
            lib.set_pdl(pdl)
            lib.set_gemv_tuning(*tiled_setting)
            lib.set_gemv_stream(*stream_setting)
            engines[name] = captured_engine(twin, lib, ctx)
    finally:
        lib.set_pdl(True)
        lib.set_gemv_tuning(*tiled)
        lib.set_gemv_stream(*stream)
    if split:
        engines["compiled"] = captured_engine(twin, lib, ctx, CompiledKernels(jobs=16))
        for group, slots in SLOT_GROUPS.items():
            engines[f"compiled, hand-written {group}"] = captured_engine(twin, lib, ctx, HandWritten(lib, slots))
    graphs = {name: engine.decode_graph for name, engine in engines.items()}
    us = time_graphs(graphs, 1, reps)
    kv_bytes = LAYERS * 2 * ctx * KV * D * 2
    result["bytes_per_step"] = params * 2 + kv_bytes
    result["step_us"] = us
    result["tokens_per_s"] = {k: 1e6 / v for k, v in us.items()}
    if profile:
        result["profile_us"] = kernel_profile(graphs["ours"])
        if "compiled" in graphs:
            result["profile_us_compiled"] = kernel_profile(graphs["compiled"])
    # greedy decoding's step (the head also choosing the next token on the device: bench/decode.py's), after the
    # decode graphs. Each replay decodes at the next position, so they start below the context and end at it: past
    # it the attention's CTAs would no longer be the decode step's (at 1024, one more entry is another wave)
    greedy: dict[str, torch.cuda.CUDAGraph] = {}
    replays = 1 + reps + (6 if profile else 0)
    for name in ("ours", "compiled"):
        if name in engines:
            engines[name].load_caches(engines[name].caches, max(0, ctx - 1 - replays))
            list(engines[name].greedy(0, 1))
            greedy[f"{name}, greedy"] = engines[name].greedy_graph
    result["greedy_contexts"] = [max(1, ctx - replays), ctx]
    result["greedy_step_us"] = time_graphs(greedy, 1, reps)
    if profile:
        for name, key in (("ours, greedy", "profile_us_greedy"), ("compiled, greedy", "profile_us_compiled_greedy")):
            if name in greedy:
                result[key] = kernel_profile(greedy[name])
    del graphs, greedy, engines
    torch.cuda.empty_cache()
    return result


def kernel_profile(graph: torch.cuda.CUDAGraph) -> dict[str, dict[str, float]]:
    """Microseconds a replay spends in each kernel, summed by kernel name (torch.profiler over 5 replays):
    ``busy``, each kernel's own start to end (under PDL its start includes the wait for the kernel before), and
    ``critical``, how much later the replay's last kernel ended because of it (its end minus the end of the
    kernel before it, the first kernel's whole time): ``critical`` sums to the replay's device time and is where
    a step's microseconds go."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    replays = 5
    graph.replay()
    torch.cuda.synchronize()
    try:
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(replays):
                graph.replay()
            torch.cuda.synchronize()
        events = sorted((e for e in prof.events() if e.device_type == DeviceType.CUDA),
                        key=lambda e: e.time_range.start)
        busy: dict[str, float] = {}
        critical: dict[str, float] = {}
        per = len(events) // replays
        for r in range(replays):
            last_end = None
            for e in events[r * per:(r + 1) * per]:
                start, end = e.time_range.start, e.time_range.end
                busy[e.name] = busy.get(e.name, 0.0) + (end - start) / replays
                added = end - start if last_end is None else max(0.0, end - last_end)
                critical[e.name] = critical.get(e.name, 0.0) + added / replays
                last_end = end if last_end is None else max(last_end, end)
    except Exception as e:  # the profiler is a convenience: report why it gave nothing
        print(f"  (no per-kernel profile: {type(e).__name__}: {e})", flush=True)
        return {}
    order = sorted(busy, key=lambda k: -critical[k])
    return {"busy": {k: busy[k] for k in order}, "critical": {k: critical[k] for k in order}}


# ---- main -------------------------------------------------------------------------------------------------------

# The compiled slot each case of main() times (with every --variant for the GEMVs), by the words --only matches.
CASE_SLOTS = {"qkv": "norm_linear", "o_proj": "o_proj", "gate/up": "norm_swiglu", "down": "down", "lm_head": "choose",
              "attention": "attention", "rope": "rope_cache"}
GEMV_SLOTS = ("norm_linear", "o_proj", "norm_swiglu", "down", "choose")


def build_side_by_side(only: list[str]) -> Any:
    """The hand-written kernels' library and every compiled slot build the selected cases time (``only``: main's
    --only words), built at once (each nvcc run is single-threaded: one after another, a few variants took most of a
    device call); compiled_slot keeps each for the case that times it. Returns the library."""
    slots = [slot for name, slot in CASE_SLOTS.items() if not only or any(word in name for word in only)]
    builds = [(slot, flags) for slot in slots
              for flags in ((), *(VARIANTS.values() if slot in GEMV_SLOTS else ()))]
    with ThreadPoolExecutor(max_workers=max(1, min(len(builds) + 1, os.cpu_count() or 1))) as pool:
        lib = pool.submit(load_kernels)
        for _ in pool.map(lambda build: compiled_slot(*build), builds):
            pass
        return lib.result()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--launches", type=int, default=40, help="launches per captured graph")
    ap.add_argument("--reps", type=int, default=25, help="timed replays per variant (median)")
    ap.add_argument("--no-step", action="store_true", help="skip the whole-step measurement")
    ap.add_argument("--no-profile", action="store_true", help="skip the per-kernel profile of the step")
    ap.add_argument("--gemv-tuning", nargs="*", default=[], metavar="CTAS:BYTES",
                    help="also time the whole step with the GEMVs' grid at CTAS per SM and BYTES of weights per "
                         "CTA prefetched before the PDL wait (set_gemv_tuning), e.g. 1:65536 2:262144")
    ap.add_argument("--gemv-stream", nargs="*", default=[], metavar="CTAS:RING:STAGE:MIN:MAX",
                    help="also time the whole step with the streamed GEMV at CTAS per SM, a RING of bytes in "
                         "stages of STAGE bytes, for weights of MIN to MAX bytes (set_gemv_stream), e.g. "
                         "2:49152:16384:0:4611686018427387904 (every weight)")
    ap.add_argument("--no-split", action="store_true",
                    help="skip the whole step through the compiled kernel set and through it with each group of "
                         "slots run by the hand-written kernels (where the compiled step's time goes)")
    ap.add_argument("--only", nargs="*", default=[], metavar="WORD",
                    help="time only the kernels whose name contains one of these words (e.g. attention rope)")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=FLAGS",
                    help="also build each GEMV slot with these compiler flags (space-separated; a build-time knob of "
                         "the runtime's headers, e.g. passes4=-DTILEFOUNDRY_MATMUL_DOT_PASSES=4) and time it beside "
                         "the default build as 'compiled (NAME)'")
    ap.add_argument("--contexts", type=int, nargs="+", default=[1024],
                    help="cache entries the whole step's attention reads (the step's own included), each in "
                         f"[1, {MAX_CONTEXT}]")
    args = ap.parse_args()
    for v in args.variant:
        name, sep, flags = v.partition("=")
        if not sep or not name or not flags.split():
            ap.error(f"--variant takes NAME=FLAGS, got {v!r}")
        VARIANTS[name] = tuple(flags.split())
    bad = [c for c in args.contexts if not 1 <= c <= MAX_CONTEXT]
    if bad:
        ap.error(f"--contexts: {bad} outside [1, {MAX_CONTEXT}] (the engine's capacity is the context plus 64, "
                 f"at most {SHAPE}'s max_position_embeddings)")
    try:
        tunings = [(int(c), int(b)) for c, b in (t.split(":") for t in args.gemv_tuning)]
    except ValueError:
        ap.error(f"--gemv-tuning takes CTAS:BYTES pairs of integers, got {args.gemv_tuning}")
    streams = [tuple(int(v) for v in t.split(":")) for t in args.gemv_stream if t.replace(":", "").isdigit()]
    if len(streams) != len(args.gemv_stream) or any(len(t) != 5 for t in streams):
        ap.error(f"--gemv-stream takes CTAS:RING:STAGE:MIN:MAX settings of five integers, got {args.gemv_stream}")

    try:
        require_cuda()
    except RuntimeError as e:
        print(f"engine_kernels.py: {e}", file=sys.stderr)
        return 2
    lib = build_side_by_side(args.only)
    torch.manual_seed(0)
    lib.set_pdl(True)
    device = torch.cuda.get_device_name()
    copy_tbps = copy_bandwidth(20)
    print(f"{device}: device copy {copy_tbps:.2f} TB/s (read + write), L2 "
          f"{torch.cuda.get_device_properties(0).L2_cache_size >> 20} MiB", flush=True)

    builders = [
        ("qkv", lambda: gemv_case(lib, "qkv (norm fused)", (HEADS + 2 * KV) * D, HIDDEN, "store", True,
                                  "norm_linear")),
        ("o_proj", lambda: gemv_case(lib, "o_proj (+residual)", HIDDEN, HEADS * D, "residual", False, "o_proj")),
        ("gate/up", lambda: gemv_case(lib, "gate/up (norm, swiglu)", 2 * INTER, HIDDEN, "swiglu", True,
                                      "norm_swiglu")),
        ("down", lambda: gemv_case(lib, "down (+residual)", HIDDEN, INTER, "residual", False, "down")),
        ("lm_head", lambda: gemv_case(lib, "lm_head (norm, greedy)", VOCAB, HIDDEN, "greedy", True, "choose")),
        *((f"attention ctx {ctx}", lambda ctx=ctx: attention_case(lib, ctx)) for ctx in (128, 1024, 4096, 16384)),
        ("rope", lambda: rope_case(lib)),
        ("rmsnorm", lambda: add_rmsnorm_case(lib)),
        ("swiglu", lambda: swiglu_case(lib)),
    ]
    cases: list[Case] = []
    for name, build in builders:
        if args.only and not any(word in name for word in args.only):
            continue
        case = build()
        case.error = case.check()
        graphs = {name: graph_of(fn, args.launches, case.copies) for name, fn in case.variants.items()}
        case.results_us = time_graphs(graphs, args.launches, args.reps)
        print(f"  {case.name}: " + ", ".join(f"{k} {v:.2f} us" for k, v in case.results_us.items()) +
              f" (error vs torch {case.error:.1e})", flush=True)
        cases.append(case)
        del graphs, case
        torch.cuda.empty_cache()

    steps = []
    if not args.no_step:
        with tempfile.TemporaryDirectory(prefix="tf-engine-kernels-") as tmp:
            twin, params = step_twin(Path(tmp) / SHAPE)
            steps = [whole_step(lib, twin, params, args.reps, ctx, not args.no_profile and i == 0, tunings, streams,
                                not args.no_split) for i, ctx in enumerate(args.contexts)]
            del twin
    step = steps[0] if steps else None

    results = {"device": device, "copy_tb_per_s": copy_tbps, "launches_per_graph": args.launches,
               "reps": args.reps, "kernels": [], "step": step, "steps": steps}
    for c in cases:
        results["kernels"].append({
            "name": c.name, "shape": c.shape, "bytes_per_launch": c.nbytes, "copies": c.copies,
            "error_vs_torch": c.error, "us": c.results_us,
            "gb_per_s": {k: c.nbytes / (v * 1e-6) / 1e9 for k, v in c.results_us.items()}})
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")

    for key, which in (("profile_us", "hand-written"), ("profile_us_compiled", "compiled"),
                       ("profile_us_greedy", "hand-written, greedy decoding's step"),
                       ("profile_us_compiled_greedy", "compiled, greedy decoding's step")):
        if step and step.get(key):
            prof = step[key]
            print(f"\nper-kernel time in one step, {which} set (profiler, us; critical: how much later the step "
                  f"ends for it, {sum(prof['critical'].values()):.0f} in all; busy: its own start to end):")
            for name, t in list(prof["critical"].items())[:32]:
                print(f"  {t:9.1f} {prof['busy'][name]:9.1f}  {name[:140]}")
    print(f"\n=== engine kernels vs torch on Qwen3-1.7B decode shapes, {device}, copy {copy_tbps:.2f} TB/s")
    print(f"{'kernel':<24}{'shape':<28}{'ours us':>8}{'GB/s':>7}{'%copy':>6}{'noPDL us':>9}"
          f"{'torch us':>9}{'GB/s':>7}{'cuBLAS us':>10}{'x torch':>8}{'err':>8}{'compiled us':>12}")
    for c in cases:
        r = c.results_us
        peer = next(k for k in r if k.startswith("torch"))
        ours_gbs = c.nbytes / (r["ours"] * 1e-6) / 1e9
        ok = "ok" if c.error <= 2e-2 else "BAD"
        cublas = f"{r['cuBLAS GEMV']:.2f}" if "cuBLAS GEMV" in r else "-"
        print(f"{c.name:<24}{c.shape:<28}{r['ours']:>8.2f}{ours_gbs:>7.0f}{100 * ours_gbs / (copy_tbps * 1e3):>5.0f}%"
              f"{r['ours, no PDL']:>9.2f}{r[peer]:>9.2f}{c.nbytes / (r[peer] * 1e-6) / 1e9:>7.0f}{cublas:>10}"
              f"{r[peer] / r['ours']:>7.1f}x{c.error:>7.0e}{r.get('compiled', float('nan')):>12.2f}"
              f"{'' if ok == 'ok' else ' ' + ok}")
    for st in steps:
        bound = copy_tbps * 1e12 / st["bytes_per_step"]
        for k, us in st["step_us"].items():
            print(f"whole step ({k}): {us:.0f} us = {1e6 / us:.0f} tokens/s; bound at copy bandwidth "
                  f"{bound:.0f} tokens/s ({100 * 1e6 / us / bound:.0f}%), {st['parameters'] / 1e9:.2f}e9 params, "
                  f"context {st['context']}")
        for k, us in st.get("greedy_step_us", {}).items():
            lo, hi = st["greedy_contexts"]
            print(f"greedy decoding's step ({k}): {us:.0f} us = {1e6 / us:.0f} tokens/s, contexts {lo}-{hi}")
        compiled = st["step_us"].get("compiled")
        for k, us in st["step_us"].items():
            if compiled is not None and k.startswith("compiled, hand-written"):
                print(f"  the compiled {k.removeprefix('compiled, hand-written ')} slots cost {compiled - us:+.0f} us "
                      "a step against the hand-written ones")
    return 0 if all(c.error <= 2e-2 for c in cases) else 1


if __name__ == "__main__":
    sys.exit(main())

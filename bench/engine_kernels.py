"""The decode engine's compiled kernels against torch on Qwen3-1.7B's decode shapes, in one run on the GPU.

Each slot of the compiled kernel set (``CompiledKernels``: every slot a DSL ``@func``, ``slot_functions``, jitted
for CUDA as the set builds it) is timed alone beside its peers for the same job: "torch ops", torch eager of the
same math (the RMSNorm, ``F.linear`` on cuBLAS, the epilogue); "cuBLAS GEMV", ``F.linear`` alone, the matmul's
floor (every slot with a matmul); and for attention "torch SDPA". The slots: q/k/v with its norm
(``norm_linear``), o_proj and down with their residual adds, gate/up with its norm and SwiGLU (``norm_swiglu``),
greedy decoding's head as the engine runs it (the ``choose`` slot: the logits, their argmax and finiteness found
in the head's matmul, one merge and one small launch that also writes the next step's token, position and context
in place; its torch ops the head, the argmax and the finiteness test), attention over 128, 1024, 4096 and 16384
cache entries, and the q/k norm + rope + cache write (``rope_cache``).

Each side (a build or a peer) runs as replays of a CUDA graph holding ``--launches`` back-to-back launches that
cycle through enough copies of their weights (or KV caches) to exceed L2 four times over, as a decode step streams
them; one launch's time is the replay's divided by the count, the median over ``--reps`` replays interleaved
between the sides.
GB/s counts the bytes a launch must move (weights or cache, plus the activations it reads and writes); a
device-to-device copy measured in the same run is the ceiling (%copy). ``--variant NAME=FLAGS`` also builds each
GEMV slot with those compiler flags (a build-time knob of the runtime's headers) and times it beside the default
build as "compiled (NAME)". Every build's output is checked against torch's before it is timed (relative L2 at
most 2e-2, else the run exits 1); ``--only attention rope`` times those slots alone. Every slot build the run
needs is made first, side by side.

The last part times the decode engine's own step: ``DecodeEngine`` on ``CompiledKernels`` running bench/decode.py's
Qwen3-1.7B with random bf16 weights (embedding, 28 layers, final norm and lm_head), its cache holding random keys
and values so that the step's attention reads each of ``--contexts`` entries (1024), timed as replays of the CUDA
graph its decode captured (``DecodeEngine.decode_graph``), then greedy decoding's step (``greedy_graph``: the head
also choosing the next token on the device), with the profiler's per-kernel table of both at the first context
(``--no-profile`` skips it). The summary table comes last.

The hand-written CUDA kernels this bench used to compare against were retired (issue 22); their last numbers are
in bench/engine_kernels_h100.json at commit ff413b2.

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
from tilefoundry.engine import CompiledKernels, DecodeEngine, DecoderSpec, reference  # noqa: E402
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
TOLERANCE = 2e-2
"""The largest relative L2 of a build's output against torch's that passes (bf16 rounds each op to 2**-9)."""


@dataclass
class Case:
    """One compiled slot, its builds and torch peers, and how many bytes a launch moves."""

    name: str
    shape: str
    nbytes: int
    copies: int
    variants: dict[str, Launch]
    check: Callable[[], float]  # the largest relative L2 of a compiled build's output against torch's, on copy 0
    results_us: dict[str, float] = field(default_factory=dict)
    error: float = float("nan")


def rand(*shape: int, scale: float = 1.0) -> torch.Tensor:
    """A bf16 tensor of normal samples times ``scale`` on the GPU."""
    return (torch.randn(*shape, device="cuda") * scale).to(BF16)


def rel_l2(a: torch.Tensor, b: torch.Tensor) -> float:
    """The relative L2 distance of ``a`` from ``b``, in f32."""
    a, b = a.float(), b.float()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


# Builds of the compiled GEMV slots with other compiler flags (``--variant NAME=FLAGS``: a build-time knob of the
# runtime's headers), each timed beside the default build as "compiled (NAME)".
VARIANTS: dict[str, tuple[str, ...]] = {}


@functools.cache
def compiled_slot(name: str, flags: tuple[str, ...] = ()) -> Any:
    """The compiled kernel set's slot ``name`` (``slot_functions``) jitted for CUDA at Qwen3-1.7B's shapes with the
    options CompiledKernels builds it with (``flags``: more compiler flags)."""
    spec = DecoderSpec(hidden=HIDDEN, heads=HEADS, kv_heads=KV, head_dim=D, vocab=VOCAB, eps=EPS,
                       max_positions=_CONFIG["max_position_embeddings"])
    options = slot_options(name)
    if flags:
        options = replace(options, extra_flags=(*options.extra_flags, *flags))
    return jit(slot_functions(SlotShapes(spec, "bf16", INTER, False, True))[name], target="cuda", options=options)


# ---- the cases ------------------------------------------------------------------------------------------------

def gemv_case(name: str, n: int, k: int, epilogue: str, slot: str) -> Case:
    """The compiled slot ``slot`` of a GEMV job, its default build and each ``--variant``, beside torch's ops for the
    same job and cuBLAS's bare GEMV. ``epilogue``: store (q/k/v), residual (o_proj, down: the only slots whose input
    is not normed first), swiglu (gate/up, rows interleaved as the engine packs them) or greedy: greedy decoding's
    head as the engine runs it (``CompiledKernels.greedy_head``, the ``choose`` slot), the logits, their argmax,
    whether all are finite, and the next step's token, position and context written in place."""
    norm = epilogue != "residual"
    n_out = n // 2 if epilogue == "swiglu" else n
    nbytes = n * k * 2 + k * 2 + n_out * 2 + (k * 2 if norm else 0) + (n * 2 if epilogue == "residual" else 0)
    copies = copies_for(n * k * 2)
    ws = [rand(n, k, scale=k**-0.5) for _ in range(copies)]
    x, g, res = rand(1, k), rand(k, scale=0.1) + 1, rand(1, n)
    out = torch.empty(1, n_out, dtype=BF16, device="cuda")
    result = torch.zeros(2, dtype=torch.int64, device="cuda")  # greedy: the token and whether all logits are finite
    step = torch.zeros(3, STEP_WIDTH, dtype=torch.int32, device="cuda")  # the engine's step inputs, advanced in place
    masks = step_masks(torch.device("cuda"))

    def launcher(compiled: Any) -> Launch:
        """Launches of one build of the slot, called as CompiledKernels calls it."""

        def run(i: int) -> None:
            if epilogue == "residual":
                compiled(x, ws[i], res, out)
            elif epilogue == "greedy":
                compiled(x, g, ws[i], step, *masks, out, result[:1], result[1:], step)
            else:
                compiled(x, g, ws[i], out)

        return run

    def torch_ops(i: int) -> torch.Tensor:
        """What the twin launches for the same job."""
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
        """cuBLAS's GEMV alone, the matmul's floor."""
        F.linear(x, ws[i])

    builds = {"compiled": (), **{f"compiled ({v})": flags for v, flags in VARIANTS.items()}}
    runners: dict[str, Launch] = {side: launcher(compiled_slot(slot, flags)) for side, flags in builds.items()}
    runners.update({"torch ops": lambda i: torch_ops(i), "cuBLAS GEMV": cublas})

    def check() -> float:
        want = torch_ops(0)
        err = 0.0
        for side in builds:  # each build's output, pre-filled with NaN
            out.fill_(float("nan"))
            runners[side](0)
            err = max(err, rel_l2(out, want))
            if epilogue == "greedy":  # its token's logit the largest, to bf16's rounding (near-ties may differ)
                top = want.float().max()
                err = max(err, ((top - want.float()[0, result[0]]) / top.abs()).item())
                assert int(result[1]) == 1, f"{side}: finite logits flagged as not finite"
        if epilogue == "greedy":  # the next step's inputs: the token, the position and context one more
            before = step[1:, 0].clone()
            runners["compiled"](0)
            assert int(step[0, 0]) == int(result[0]), "the next step's token"
            assert torch.equal(step[1:, 0], before + 1), "the next step's position and context"
        return err

    shape = f"{n}x{k}" + (" +norm" if norm else "") + ("" if epilogue == "store" else f" +{epilogue}")
    return Case(name, shape, nbytes, copies, runners, check)


def attention_case(ctx: int) -> Case:
    """The compiled attention slot over a cache of ``ctx`` entries (the token at position ``ctx - 1``) beside torch
    SDPA over the same slice."""
    nbytes = 2 * ctx * KV * D * 2 + 2 * HEADS * D * 2
    copies = copies_for(2 * ctx * KV * D * 2)
    caches = [(rand(ctx, KV, D), rand(ctx, KV, D)) for _ in range(copies)]
    q = rand(1, HEADS, D)
    position = torch.tensor([ctx - 1], dtype=torch.int32, device="cuda")
    compiled = compiled_slot("attention")
    out = torch.empty(1, HEADS * D, dtype=BF16, device="cuda")

    def run(i: int) -> None:
        compiled(q, caches[i][0], caches[i][1], position, out)

    def sdpa(i: int) -> torch.Tensor:
        """torch SDPA over the same heads (grouped queries), on the cache's whole slice."""
        k, v = (c.permute(1, 0, 2)[None] for c in caches[i])
        return F.scaled_dot_product_attention(q.permute(1, 0, 2)[None], k, v, scale=D**-0.5, enable_gqa=True)

    def check() -> float:
        out.fill_(float("nan"))
        run(0)
        return rel_l2(out.view(1, HEADS, D), sdpa(0)[0].permute(1, 0, 2))

    return Case(f"attention ctx {ctx}", f"{HEADS}/{KV} heads x {D}", nbytes, copies,
                {"compiled": run, "torch SDPA": lambda i: sdpa(i)}, check)


def rope_case() -> Case:
    """The compiled q/k norm + rope + cache write slot at position 1000 beside torch's ops for the same job."""
    capacity, at = 2048, 1000
    qkv, qn, kn = rand(1, (HEADS + 2 * KV) * D, scale=3.0), rand(D, scale=0.1) + 1, rand(D, scale=0.1) + 1
    inv = 1.0 / (1e6 ** (torch.arange(0, D, 2, device="cuda").float() / D))
    emb = torch.arange(_CONFIG["max_position_embeddings"], device="cuda").float()[:, None] * inv[None]
    cos, sin = (f(torch.cat((emb, emb), -1)).to(BF16) for f in (torch.cos, torch.sin))  # the whole rotary tables
    ck, cv = rand(1, capacity, KV, D), rand(1, capacity, KV, D)
    ck_torch, cv_torch = ck[0].clone(), cv[0].clone()
    q_out = torch.empty(1, HEADS, D, dtype=BF16, device="cuda")
    position = torch.tensor([at], dtype=torch.int32, device="cuda")
    n_new = torch.ones((), dtype=torch.int64, device="cuda")
    index = position.long()
    compiled = compiled_slot("rope_cache")

    def run(i: int) -> None:
        compiled(qkv, qn, kn, cos, sin, position, ck, cv, position.reshape(()), n_new, q_out, ck, cv)

    def torch_ops(i: int) -> torch.Tensor:
        q, k, v = qkv.view(1, HEADS + 2 * KV, D).split((HEADS, KV, KV), dim=1)
        q, k = reference.rms_norm(q, qn, EPS), reference.rms_norm(k, kn, EPS)
        c, s = cos[index][:, None], sin[index][:, None]
        q, k = reference.rotate(q, c, s), reference.rotate(k, c, s)
        ck_torch.index_copy_(0, index, k)
        cv_torch.index_copy_(0, index, v)
        return q

    def check() -> float:
        q_out.fill_(float("nan"))
        run(0)
        want = torch_ops(0)
        return max(rel_l2(q_out, want), rel_l2(ck[0, at], ck_torch[at]), rel_l2(cv[0, at], cv_torch[at]))

    nbytes = (HEADS + 2 * KV) * D * 2 + HEADS * D * 2 + 2 * KV * D * 2 + 2 * D * 2 + 2 * D * 2
    return Case("q/k norm + rope + cache", f"{HEADS}+{KV}+{KV} heads", nbytes, 1,
                {"compiled": run, "torch ops": lambda i: torch_ops(i)}, check)


# ---- the whole step -------------------------------------------------------------------------------------------

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


def captured_engine(twin: Any, ctx: int) -> DecodeEngine:
    """A DecodeEngine of ``twin`` on a compiled kernel set of its own, its cache holding ``ctx - 1`` random
    positions, after one decode: its ``decode_graph`` is the step of a token at position ``ctx - 1`` attending to
    ``ctx`` cache entries."""
    capacity = ctx + 64
    engine = DecodeEngine(twin, capacity, kernels=CompiledKernels(jobs=16))
    engine.load_caches([(rand(capacity, KV, D), rand(capacity, KV, D)) for _ in range(LAYERS)], ctx - 1)
    engine.decode(0)
    if engine.decode_graph is None:
        raise RuntimeError(f"engine_kernels.py: the decode engine captured no graph ({engine.graph_status})")
    return engine


def whole_step(twin: Any, params: int, reps: int, ctx: int, profile: bool) -> dict[str, Any]:
    """The decode engine's own step on Qwen3-1.7B (embedding, 28 layers, the head) through the compiled kernel set
    at context ``ctx``: its captured CUDA graph replayed, then greedy decoding's (``profile``: each one's
    per-kernel profile too)."""
    result: dict[str, Any] = {"parameters": params, "context": ctx}
    engine = captured_engine(twin, ctx)
    us = time_graphs({"compiled": engine.decode_graph}, 1, reps)
    result["bytes_per_step"] = params * 2 + LAYERS * 2 * ctx * KV * D * 2
    result["step_us"] = us
    result["tokens_per_s"] = {k: 1e6 / v for k, v in us.items()}
    if profile:
        result["profile_us_compiled"] = kernel_profile(engine.decode_graph)
    # greedy decoding's step (the head also choosing the next token on the device: bench/decode.py's), after the
    # decode graph. Each replay decodes at the next position, so they start below the context and end at it: past
    # it the attention's CTAs would no longer be the decode step's (at 1024, one more entry is another wave)
    replays = 1 + reps + (6 if profile else 0)
    engine.load_caches(engine.caches, max(0, ctx - 1 - replays))
    list(engine.greedy(0, 1))
    if engine.greedy_graph is None:
        raise RuntimeError(f"engine_kernels.py: the decode engine captured no greedy graph ({engine.graph_status})")
    result["greedy_contexts"] = [max(1, ctx - replays), ctx]
    result["greedy_step_us"] = time_graphs({"compiled, greedy": engine.greedy_graph}, 1, reps)
    if profile:
        result["profile_us_compiled_greedy"] = kernel_profile(engine.greedy_graph)
    del engine
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


def build_side_by_side(only: list[str]) -> None:
    """Every compiled slot build the selected cases time (``only``: main's --only words), built at once (each nvcc
    run is single-threaded: one after another, a few variants took most of a device call); compiled_slot keeps each
    for the case that times it."""
    slots = [slot for name, slot in CASE_SLOTS.items() if not only or any(word in name for word in only)]
    builds = [(slot, flags) for slot in slots
              for flags in ((), *(VARIANTS.values() if slot in GEMV_SLOTS else ()))]
    with ThreadPoolExecutor(max_workers=max(1, min(len(builds), os.cpu_count() or 1))) as pool:
        for _ in pool.map(lambda build: compiled_slot(*build), builds):
            pass


def print_summary(cases: list[Case], steps: list[dict[str, Any]], device: str, copy_tbps: float) -> None:
    """The per-kernel profile of the first context's steps, then the table of every case and the whole steps."""
    step = steps[0] if steps else None
    for key, which in (("profile_us_compiled", "the decode step"),
                       ("profile_us_compiled_greedy", "greedy decoding's step")):
        if step and step.get(key):
            prof = step[key]
            print(f"\nper-kernel time in {which}, compiled set (profiler, us; critical: how much later the step "
                  f"ends for it, {sum(prof['critical'].values()):.0f} in all; busy: its own start to end):")
            for name, t in list(prof["critical"].items())[:32]:
                print(f"  {t:9.1f} {prof['busy'][name]:9.1f}  {name[:140]}")

    def gbs(c: Case, us: float) -> float:
        return c.nbytes / (us * 1e-6) / 1e9

    variants = [(f"compiled ({v})", f"{v} us", max(10, len(v) + 4)) for v in VARIANTS]  # a column each
    print(f"\n=== the engine's compiled kernels vs torch on Qwen3-1.7B decode shapes, {device}, copy "
          f"{copy_tbps:.2f} TB/s")
    print(f"{'kernel':<24}{'shape':<28}{'compiled us':>12}{'GB/s':>7}{'%copy':>6}"
          + "".join(f"{head:>{width}}" for _, head, width in variants)
          + f"{'torch us':>9}{'GB/s':>7}{'cuBLAS us':>10}{'x torch':>8}{'err':>8}")
    for c in cases:
        r = c.results_us
        peer = next(k for k in r if k.startswith("torch"))
        compiled_gbs = gbs(c, r["compiled"])
        row = "".join(f"{r[key]:>{width}.2f}" if key in r else f"{'-':>{width}}" for key, _, width in variants)
        cublas = f"{r['cuBLAS GEMV']:.2f}" if "cuBLAS GEMV" in r else "-"
        share = 100 * compiled_gbs / (copy_tbps * 1e3)
        print(f"{c.name:<24}{c.shape:<28}{r['compiled']:>12.2f}{compiled_gbs:>7.0f}{share:>5.0f}%"
              f"{row}{r[peer]:>9.2f}{gbs(c, r[peer]):>7.0f}{cublas:>10}{r[peer] / r['compiled']:>7.1f}x"
              f"{c.error:>8.0e}{'' if c.error <= TOLERANCE else ' BAD'}")
    for st in steps:
        bound = copy_tbps * 1e12 / st["bytes_per_step"]
        for k, us in st["step_us"].items():
            print(f"whole step ({k}): {us:.0f} us = {1e6 / us:.0f} tokens/s; bound at copy bandwidth "
                  f"{bound:.0f} tokens/s ({100 * 1e6 / us / bound:.0f}%), {st['parameters'] / 1e9:.2f}e9 params, "
                  f"context {st['context']}")
        lo, hi = st["greedy_contexts"]
        for k, us in st["greedy_step_us"].items():
            print(f"greedy decoding's step ({k}): {us:.0f} us = {1e6 / us:.0f} tokens/s, contexts {lo}-{hi}")


def main() -> int:
    """Parse the arguments, time the selected slots and the whole step, print and write the results; 0 when every
    build's output matched torch's, 1 when one did not, 2 with no CUDA GPU."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--launches", type=int, default=40, help="launches per captured graph")
    ap.add_argument("--reps", type=int, default=25, help="timed replays per variant (median)")
    ap.add_argument("--no-step", action="store_true", help="skip the whole-step measurement")
    ap.add_argument("--no-profile", action="store_true", help="skip the per-kernel profile of the step")
    ap.add_argument("--only", nargs="*", default=[], metavar="WORD",
                    help="time only the slots whose case name contains one of these words (e.g. attention rope)")
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
    if not torch.cuda.is_available():
        print("engine_kernels.py: the compiled kernels are timed on a CUDA GPU, and torch sees none here "
              "(torch.cuda.is_available() is False)", file=sys.stderr)
        return 2

    build_side_by_side(args.only)
    torch.manual_seed(0)
    device = torch.cuda.get_device_name()
    copy_tbps = copy_bandwidth(20)
    print(f"{device}: device copy {copy_tbps:.2f} TB/s (read + write), L2 "
          f"{torch.cuda.get_device_properties(0).L2_cache_size >> 20} MiB", flush=True)

    builders: list[tuple[str, Callable[[], Case]]] = [
        ("qkv", lambda: gemv_case("qkv (norm fused)", (HEADS + 2 * KV) * D, HIDDEN, "store", "norm_linear")),
        ("o_proj", lambda: gemv_case("o_proj (+residual)", HIDDEN, HEADS * D, "residual", "o_proj")),
        ("gate/up", lambda: gemv_case("gate/up (norm, swiglu)", 2 * INTER, HIDDEN, "swiglu", "norm_swiglu")),
        ("down", lambda: gemv_case("down (+residual)", HIDDEN, INTER, "residual", "down")),
        ("lm_head", lambda: gemv_case("lm_head (norm, greedy)", VOCAB, HIDDEN, "greedy", "choose")),
        *((f"attention ctx {ctx}", lambda ctx=ctx: attention_case(ctx)) for ctx in (128, 1024, 4096, 16384)),
        ("rope", rope_case),
    ]
    cases: list[Case] = []
    for name, build in builders:
        if args.only and not any(word in name for word in args.only):
            continue
        case = build()
        case.error = case.check()
        graphs = {side: graph_of(fn, args.launches, case.copies) for side, fn in case.variants.items()}
        case.results_us = time_graphs(graphs, args.launches, args.reps)
        print(f"  {case.name}: " + ", ".join(f"{k} {v:.2f} us" for k, v in case.results_us.items()) +
              f" (error vs torch {case.error:.1e})", flush=True)
        cases.append(case)
        del graphs, case
        torch.cuda.empty_cache()

    steps: list[dict[str, Any]] = []
    if not args.no_step:
        with tempfile.TemporaryDirectory(prefix="tf-engine-kernels-") as tmp:
            twin, params = step_twin(Path(tmp) / SHAPE)
            steps = [whole_step(twin, params, args.reps, ctx, not args.no_profile and i == 0)
                     for i, ctx in enumerate(args.contexts)]
            del twin

    kernels = [{"name": c.name, "shape": c.shape, "bytes_per_launch": c.nbytes, "copies": c.copies,
                "error_vs_torch": c.error, "us": c.results_us,
                "gb_per_s": {k: c.nbytes / (v * 1e-6) / 1e9 for k, v in c.results_us.items()}} for c in cases]
    results = {"device": device, "copy_tb_per_s": copy_tbps, "launches_per_graph": args.launches,
               "reps": args.reps, "kernels": kernels, "step": steps[0] if steps else None, "steps": steps}
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    print_summary(cases, steps, device, copy_tbps)
    return 0 if all(c.error <= TOLERANCE for c in cases) else 1


if __name__ == "__main__":
    sys.exit(main())

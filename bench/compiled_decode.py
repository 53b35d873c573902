"""The decode step's slots compiled by ``tilefoundry.jit`` against torch, on Qwen3-1.7B's decode shape (bf16,
batch 1, one token), in one run on the GPU (issue 21).

Each slot of the decode engine (engine/slots.py) is written here as a DSL ``@func`` computing what the slot
computes, and jitted for CUDA: the compiler cuts it into kernels run in order by one entry (a matmul a kernel of
its own, ops::matmul's dot-product tier: a warp four output columns, the warps of a narrow tile splitting K; the
RMSNorm before a projection fused as its prologue, the residual add and the argmax as its epilogue). The slots:

* ``qkv``: x -> rms_norm(x, input_norm) -> one packed (q; k; v) weight, as the engine packs it (``pack_qkv``);
  also timed as the families write it, three projections (``compiled, q/k/v``), over the same weight's rows;
* ``o_proj``: residual + attn @ o_proj.T;
* ``gate/up``: silu(h @ g.T) * (h @ u.T) with h = rms_norm(x, post_norm), g and u the rows 2j and 2j + 1 of
  the engine's interleaved gate/up weight (``pack_gate_up``), two strided views of it, as the engine's
  compiled set writes it: one kernel (a pair of matmuls, lower/pairs.py); also timed as the families write it,
  two weights (``compiled, gate + up``: silu(h @ gate_proj.T) * (h @ up_proj.T), a pair too);
* ``down``: residual + h @ down_proj.T;
* ``lm_head``: rms_norm(x, norm) @ lm_head.T and its ``tf.argmax`` in the same function (were the compiler to
  refuse the argmax, the head is timed without it, against torch's head without its argmax too, and the output
  says so);
* ``attention ctx C``: one token at position C - 1 over a cache slice of C rows, written as the families'
  ``attend`` writes it: q . K^T * scale over the keys' heads repeated for grouped queries (repeat_interleave),
  the causal mask from positions (``tf.where``), softmax, . V. On this schedule its second matmul reads V
  through strides (the general tier) and is slow at long contexts; it is timed anyway (the honest number).

Peers, in the same run: torch eager of the same math (reference.rms_norm, F.linear on cuBLAS, the epilogue)
and cuBLAS's GEMV alone (F.linear) as the matmul's own floor for a GEMV slot; torch SDPA with the flash backend
and the written-out math in torch eager for attention. The engine's hand-written CUDA kernels this bench also
compared against were retired (issue 22); the last side-by-side numbers are in bench/engine_kernels_h100.json at
commit ff413b2 and in bench/compiled_decode_h200.json. Every variant runs as replays of a CUDA graph of
``--launches`` back-to-back launches cycling through enough copies of its weights (or KV caches) to exceed L2
four times over (bench/graph_timing.py: graph_of, time_graphs, copies_for); one launch's time is a replay's
divided by the count, the median over ``--reps`` replays interleaved between the variants. A slot whose launches
are slow gets fewer launches per graph, so that a case takes about ``--case-seconds``. GB/s counts the bytes a
launch must move (weights or cache, plus the activations it reads and writes); a device-to-device copy measured
in the same run is the ceiling.

Every compiled slot's output (written into a NaN-filled buffer) is compared with torch's before it is timed:
relative L2 at most 2e-2 (bf16 rounds each op's result to 2**-9 relative; the fused and unfused sides round
the normed row and the sums differently, a few ulps; a wrong output is off by ~1). A compiled slot that fails
is not timed; its peers are, and the run exits 1.

    python bench/compiled_decode.py --json compiled_decode.json
    python bench/compiled_decode.py --lower-only      # no GPU needed: lower every slot's @func for CUDA
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from decode import SHAPES  # noqa: E402
from engine_kernels import EPS, HEADS, HIDDEN, INTER, KV, SHAPE, VOCAB, D, rand, rel_l2  # noqa: E402
from graph_timing import Launch, copies_for, copy_bandwidth, graph_of, time_graphs  # noqa: E402

from tilefoundry import func, jit, lower  # noqa: E402
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, tf  # noqa: E402
from tilefoundry.engine import reference  # noqa: E402
from tilefoundry.ir.core.function import Function  # noqa: E402
from tilefoundry.lower import LoweringError  # noqa: E402

BF16 = torch.bfloat16
MAXPOS = SHAPES[SHAPE][1]["max_position_embeddings"]
QKV = (HEADS + 2 * KV) * D
"""Rows of the packed q/k/v weight (q heads, then k heads, then v heads)."""
SCALE = 1.0 / math.sqrt(D)
TOLERANCE = 2e-2
"""Largest relative L2 of a checked output against torch's (module docstring)."""
CONTEXTS = (128, 1024, 4096, 16384)
SLOTS = ("qkv", "o_proj", "gate/up", "down", "lm_head", "attention")


# ---- the slots, as DSL functions ----------------------------------------------------------------------------

def slot_functions() -> dict[str, Function]:
    """Every compiled slot's ``@func`` by name (``head_argmax`` is the head with its argmax, tried first)."""
    dt = "bf16"
    ctx = DimVar("ctx", 1, MAXPOS + 1)
    capacity = DimVar("capacity", 1, MAXPOS + 1)

    def linear(x: Any, w: Any) -> Any:
        """x @ w.T for a weight stored (out, in), as the families' ``_linear``."""
        return tf.matmul(x, tf.transpose(w, (1, 0)))

    @func
    def qkv(x: Tensor[(1, HIDDEN), dt], input_norm: ConstTensor[(HIDDEN,), dt],
            qkv_proj: ConstTensor[(QKV, HIDDEN), dt]):
        """The engine's ``norm_linear``: rms_norm(x) @ the packed (q; k; v) weight."""
        return linear(tf.rms_norm(x, input_norm, EPS), qkv_proj)

    @func
    def qkv_three(x: Tensor[(1, HIDDEN), dt], input_norm: ConstTensor[(HIDDEN,), dt],
                  q_proj: ConstTensor[(HEADS * D, HIDDEN), dt], k_proj: ConstTensor[(KV * D, HIDDEN), dt],
                  v_proj: ConstTensor[(KV * D, HIDDEN), dt]):
        """The families' ``qkv``: the norm, then the three projections."""
        h = tf.rms_norm(x, input_norm, EPS)
        return linear(h, q_proj), linear(h, k_proj), linear(h, v_proj)

    @func
    def o_proj(attn: Tensor[(1, HEADS * D), dt], residual: Tensor[(1, HIDDEN), dt],
               o_proj: ConstTensor[(HIDDEN, HEADS * D), dt]):
        """The engine's ``linear_residual`` for o_proj."""
        return residual + linear(attn, o_proj)

    @func
    def gate_up(x: Tensor[(1, HIDDEN), dt], post_norm: ConstTensor[(HIDDEN,), dt],
                gate_up: ConstTensor[(2 * INTER, HIDDEN), dt]):
        """The engine's ``norm_swiglu`` (engine/compiled_kernels.py) on its interleaved weight: rows 2j / 2j + 1 of
        ``gate_up`` are gate_j / up_j, two strided views of it, one kernel (a pair, lower/pairs.py)."""
        h = tf.rms_norm(x, post_norm, EPS)
        gate = tf.slice(gate_up, (0, 0), (INTER, HIDDEN), (2, 1))
        up = tf.slice(gate_up, (1, 0), (INTER, HIDDEN), (2, 1))
        return tf.silu(linear(h, gate)) * linear(h, up)

    @func
    def gate_up_two(x: Tensor[(1, HIDDEN), dt], post_norm: ConstTensor[(HIDDEN,), dt],
                    gate_proj: ConstTensor[(INTER, HIDDEN), dt], up_proj: ConstTensor[(INTER, HIDDEN), dt]):
        """The engine's ``norm_swiglu`` as the families' ``mlp`` writes its first half: two weights."""
        h = tf.rms_norm(x, post_norm, EPS)
        return tf.silu(linear(h, gate_proj)) * linear(h, up_proj)

    @func
    def down(h: Tensor[(1, INTER), dt], residual: Tensor[(1, HIDDEN), dt],
             down_proj: ConstTensor[(HIDDEN, INTER), dt]):
        """The engine's ``linear_residual`` for down_proj."""
        return residual + linear(h, down_proj)

    @func
    def head(x: Tensor[(1, HIDDEN), dt], norm: ConstTensor[(HIDDEN,), dt], lm_head: ConstTensor[(VOCAB, HIDDEN), dt]):
        """The engine's ``head``: the final norm and the lm_head."""
        return linear(tf.rms_norm(x, norm, EPS), lm_head)

    @func
    def head_argmax(x: Tensor[(1, HIDDEN), dt], norm: ConstTensor[(HIDDEN,), dt],
                    lm_head: ConstTensor[(VOCAB, HIDDEN), dt]):
        """The head and its greedy choice (the engine's ``greedy_head`` without the step bookkeeping)."""
        logits = linear(tf.rms_norm(x, norm, EPS), lm_head)
        return logits, tf.argmax(logits, -1)

    @func
    def attention(q: Tensor[(1, HEADS, D), dt], cache_k: Tensor[(capacity, KV, D), dt],
                  cache_v: Tensor[(capacity, KV, D), dt], pos_ids: Tensor[(1,), "i64"], kv_pos: Tensor[(ctx,), "i64"]):
        """The engine's ``attention`` as the families' ``attend`` computes it, over the first ``ctx`` cache rows."""
        qh = tf.transpose(q, (1, 0, 2))  # (H, 1, D)
        keys = tf.slice(cache_k, (0, 0, 0), (ctx, KV, D))
        vals = tf.slice(cache_v, (0, 0, 0), (ctx, KV, D))
        keys = tf.repeat_interleave(tf.transpose(keys, (1, 2, 0)), HEADS // KV, 0)  # (H, D, ctx)
        vals = tf.repeat_interleave(tf.transpose(vals, (1, 0, 2)), HEADS // KV, 0)  # (H, ctx, D)
        scores = tf.matmul(qh, keys) * SCALE
        visible = tf.reshape(kv_pos, (1, ctx)) <= tf.reshape(pos_ids, (1, 1))
        probs = tf.softmax(tf.where(visible, scores, float("-inf")))
        return tf.transpose(tf.matmul(probs, vals), (1, 0, 2))  # (1, H, D)

    return {"qkv": qkv, "qkv_three": qkv_three, "o_proj": o_proj, "gate_up": gate_up, "gate_up_two": gate_up_two,
            "down": down, "head": head,
            "head_argmax": head_argmax, "attention": attention}


def lowering_refusals(functions: dict[str, Function]) -> dict[str, str]:
    """The functions ``lower(fn, "cuda")`` refuses, with the compiler's message (no GPU needed)."""
    refused = {}
    for name, fn in functions.items():
        try:
            lower(fn, "cuda")
        except LoweringError as e:
            refused[name] = str(e)
    return refused


def build_all(functions: dict[str, Function], jobs: int) -> tuple[dict[str, Any], dict[str, str]]:
    """Each function jitted for CUDA (``jobs`` builds at once), and why each that failed to build failed."""

    def build(fn: Function) -> Any:
        try:
            return jit(fn)
        except Exception as e:  # a refusal or a build error: reported, and the slot's peers timed alone
            return e

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        built = dict(zip(functions, pool.map(build, functions.values())))
    failed = {k: f"{type(v).__name__}: {v}" for k, v in built.items() if isinstance(v, Exception)}
    return {k: v for k, v in built.items() if not isinstance(v, Exception)}, failed


# ---- the cases ------------------------------------------------------------------------------------------------

@dataclass
class Case:
    """One slot: its variants (the compiled one first), the checks of its outputs, and what a launch moves.

    ``peer`` names the torch variant the compiled one is divided by in the table (torch eager of the same math
    on cuBLAS for a GEMV slot, SDPA for attention).
    """

    name: str
    shape: str
    nbytes: int
    copies: int
    variants: dict[str, Launch]
    checks: dict[str, Callable[[], float]]  # variant -> relative L2 against torch, on copy 0
    peer: str
    notes: list[str] = field(default_factory=list)
    errors: dict[str, float] = field(default_factory=dict)
    results_us: dict[str, float] = field(default_factory=dict)
    launches: int = 0


def poisoned(*shape: int, dtype: torch.dtype = BF16) -> torch.Tensor:
    """An output buffer filled with NaN (an integer one with -1), so that an output left unwritten fails its check."""
    t = torch.empty(*shape, dtype=dtype, device="cuda")
    return t.fill_(float("nan") if dtype.is_floating_point else -1)


def gemv_case(compiled: dict[str, Any], slot: str, n: int, k: int, epilogue: str, norm: bool,
              notes: list[str]) -> Case:
    """A GEMV slot: ``[rms_norm(x)] @ W.T`` (W ``n`` x ``k``) then ``epilogue`` (store, residual, swiglu)."""
    n_out = n // 2 if epilogue == "swiglu" else n
    nbytes = n * k * 2 + k * 2 + n_out * 2 + (k * 2 if norm else 0) + (n * 2 if epilogue == "residual" else 0)
    copies = copies_for(n * k * 2)
    ws = [rand(n, k, scale=k**-0.5) for _ in range(copies)]  # the engine's packing (gate/up interleaved)
    x, g, res = rand(1, k), rand(k, scale=0.1) + 1, rand(1, n)

    def torch_ops(i: int) -> torch.Tensor:  # the slot's math in torch eager (cuBLAS for the matmul)
        h = reference.rms_norm(x, g, EPS) if norm else x
        y = F.linear(h, ws[i])
        if epilogue == "residual":
            return res + y
        if epilogue == "swiglu":
            return F.silu(y[:, 0::2]) * y[:, 1::2]
        return y

    def cublas(i: int) -> torch.Tensor:
        return F.linear(x, ws[i])

    c_out = poisoned(1, n_out)
    variants: dict[str, Launch] = {}
    checks: dict[str, Callable[[], float]] = {}
    if slot in compiled:
        c = compiled[slot]
        if epilogue == "residual":
            variants["compiled"] = lambda i: c(x, res, ws[i], c_out)
        else:
            variants["compiled"] = lambda i: c(x, g, ws[i], c_out)
        checks["compiled"] = lambda: _checked(variants["compiled"], c_out, torch_ops)
    if slot == "qkv" and "qkv_three" in compiled:
        c3 = compiled["qkv_three"]
        q_rows, kv_rows = HEADS * D, KV * D
        parts = [(w[:q_rows], w[q_rows:q_rows + kv_rows], w[q_rows + kv_rows:]) for w in ws]  # contiguous rows
        q_out, k_out, v_out = poisoned(1, q_rows), poisoned(1, kv_rows), poisoned(1, kv_rows)
        variants["compiled, q/k/v"] = lambda i: c3(x, g, *parts[i], q_out, k_out, v_out)

        def check_three() -> float:
            for t in (q_out, k_out, v_out):
                t.fill_(float("nan"))
            variants["compiled, q/k/v"](0)
            return rel_l2(torch.cat((q_out, k_out, v_out), -1), torch_ops(0))

        checks["compiled, q/k/v"] = check_three
    if slot == "gate_up" and "gate_up_two" in compiled:  # gate_proj and up_proj: rows 2j and 2j + 1 of W
        c2 = compiled["gate_up_two"]
        pairs = [(w[0::2].contiguous(), w[1::2].contiguous()) for w in ws]
        two_out = poisoned(1, n_out)
        variants["compiled, gate + up"] = lambda i: c2(x, g, *pairs[i], two_out)
        checks["compiled, gate + up"] = lambda: _checked(variants["compiled, gate + up"], two_out, torch_ops)
    variants["torch eager"] = torch_ops
    variants["cuBLAS GEMV alone"] = cublas
    shape = f"{n}x{k}" + (" +norm" if norm else "") + ("" if epilogue == "store" else f" +{epilogue}")
    return Case(slot.replace("_", "/") if slot == "gate_up" else slot, shape, nbytes, copies, variants, checks,
                "torch eager", list(notes))


def _checked(launch: Launch, out: torch.Tensor, want: Callable[[int], torch.Tensor]) -> float:
    """Relative L2 of what ``launch`` writes into ``out`` (poisoned first) against ``want``, on copy 0."""
    out.fill_(float("nan"))
    launch(0)
    return rel_l2(out, want(0))


def head_case(compiled: dict[str, Any], with_argmax: bool, notes: list[str]) -> Case:
    """The lm_head with its final norm, and with the argmax in the compiled function when it compiled."""
    n, k = VOCAB, HIDDEN
    nbytes = n * k * 2 + 2 * k * 2 + n * 2 + (8 if with_argmax else 0)
    copies = copies_for(n * k * 2)
    ws = [rand(n, k, scale=k**-0.5) for _ in range(copies)]
    x, g = rand(1, k), rand(k, scale=0.1) + 1
    c_out, c_token = poisoned(1, n), poisoned(1, dtype=torch.int64)

    def torch_ops(i: int) -> torch.Tensor:
        y = F.linear(reference.rms_norm(x, g, EPS), ws[i])
        if with_argmax:
            y.argmax(-1)
        return y

    variants: dict[str, Launch] = {}
    checks: dict[str, Callable[[], float]] = {}
    key = "head_argmax" if with_argmax else "head"
    if key in compiled:
        c = compiled[key]
        variants["compiled"] = (lambda i: c(x, g, ws[i], c_out, c_token)) if with_argmax else \
            (lambda i: c(x, g, ws[i], c_out))

        def check() -> float:
            err = _checked(variants["compiled"], c_out, torch_ops)
            if with_argmax and c_out[0, c_token[0]] != c_out.max():  # the first largest logit, as torch.argmax
                return float("inf")
            return err

        checks["compiled"] = check
    variants["torch eager"] = torch_ops
    variants["cuBLAS GEMV alone"] = lambda i: F.linear(x, ws[i])
    shape = f"{n}x{k} +norm" + (" +argmax" if with_argmax else "")
    return Case("lm_head", shape, nbytes, copies, variants, checks, "torch eager", list(notes))


def sdpa_backend() -> tuple[Any, str]:
    """A context manager choosing SDPA's flash backend, and its name (a null context where torch lacks it)."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        return (lambda: sdpa_kernel([SDPBackend.FLASH_ATTENTION])), "flash"
    except ImportError:  # an older torch: its own choice
        import contextlib

        return contextlib.nullcontext, "default"


def attention_case(compiled: dict[str, Any], ctx: int) -> Case:
    """Decode attention of one token at position ``ctx - 1`` over ``ctx`` cache rows (the cache holds ``ctx``)."""
    capacity = ctx
    nbytes = 2 * ctx * KV * D * 2 + 2 * HEADS * D * 2
    copies = copies_for(2 * capacity * KV * D * 2)
    caches = [(rand(capacity, KV, D), rand(capacity, KV, D)) for _ in range(copies)]
    q = rand(1, HEADS, D)
    c_out = poisoned(1, HEADS, D)
    pos_ids = torch.tensor([ctx - 1], dtype=torch.int64, device="cuda")
    kv_pos = torch.arange(ctx, dtype=torch.int64, device="cuda")
    backend, backend_name = sdpa_backend()
    notes: list[str] = []

    def sdpa(i: int) -> torch.Tensor:
        k, v = (c[:ctx].permute(1, 0, 2)[None] for c in caches[i])
        with backend():
            y = F.scaled_dot_product_attention(q.permute(1, 0, 2)[None], k, v, scale=SCALE, enable_gqa=True)
        return y[0].permute(1, 0, 2)

    def torch_ops(i: int) -> torch.Tensor:  # the families' math, written out in torch eager
        keys = caches[i][0][:ctx].permute(1, 2, 0).repeat_interleave(HEADS // KV, 0)  # (H, D, ctx)
        vals = caches[i][1][:ctx].permute(1, 0, 2).repeat_interleave(HEADS // KV, 0)  # (H, ctx, D)
        scores = torch.matmul(q.permute(1, 0, 2), keys) * SCALE
        visible = kv_pos[None] <= pos_ids[:, None]
        probs = torch.where(visible, scores, float("-inf")).softmax(-1)
        return torch.matmul(probs, vals).permute(1, 0, 2)

    try:
        sdpa(0)
    except RuntimeError as e:  # flash refused these inputs: torch's own choice of backend instead
        import contextlib

        backend, backend_name = contextlib.nullcontext, "default"
        notes.append(f"SDPA's flash backend refused: {str(e).splitlines()[0]}; timed with torch's own choice")
    peer = f"torch SDPA ({backend_name})"
    variants: dict[str, Launch] = {}
    checks: dict[str, Callable[[], float]] = {}
    if "attention" in compiled:
        c = compiled["attention"]
        variants["compiled"] = lambda i: c(q, caches[i][0], caches[i][1], pos_ids, kv_pos, c_out)
        checks["compiled"] = lambda: _checked(variants["compiled"], c_out, sdpa)
    variants[peer] = sdpa
    variants["torch eager"] = torch_ops
    checks["torch eager"] = lambda: rel_l2(torch_ops(0), sdpa(0))
    return Case(f"attention ctx {ctx}", f"{HEADS}/{KV} heads x {D}", nbytes, copies, variants, checks, peer, notes)


# ---- timing -----------------------------------------------------------------------------------------------------

def eager_us(launch: Launch) -> float:
    """Microseconds of one eager call (after a warm-up), the median of three: only to size a case's graphs."""
    launch(0)
    torch.cuda.synchronize()
    times = []
    for _ in range(3):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        launch(0)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def run_case(case: Case, launches: int, reps: int, seconds: float) -> None:
    """Check every variant that has a check, drop a wrong compiled one, and time the rest as graph replays
    (fewer launches per graph when the slowest variant would make the case take longer than ``seconds``)."""
    for name, check in case.checks.items():
        try:
            case.errors[name] = check()
        except (ValueError, RuntimeError) as e:  # a call the entry refuses (a launch beyond the GPU's limits)
            case.errors[name] = float("nan")
            case.notes.append(f"{name} REFUSED at run time: {str(e).splitlines()[0]}")
    for name, err in case.errors.items():
        if name.startswith("compiled") and not err <= TOLERANCE:  # NaN too
            case.variants.pop(name)
            if not any(note.startswith(f"{name} REFUSED") for note in case.notes):
                case.notes.append(f"{name} is WRONG (relative L2 {err:.2e} against torch > {TOLERANCE}): not timed")
    slowest = max(eager_us(v) for v in case.variants.values())
    case.launches = max(2, min(launches, int(seconds * 1e6 / (reps * slowest))))
    if case.launches < launches:
        case.notes.append(f"{case.launches} launches per graph (the slowest variant takes {slowest:.0f} us)")
    graphs = {name: graph_of(fn, case.launches, case.copies) for name, fn in case.variants.items()}
    case.results_us = time_graphs(graphs, case.launches, reps)
    del graphs
    torch.cuda.empty_cache()


# ---- main -------------------------------------------------------------------------------------------------------

def print_table(cases: list[Case], device: str, copy_tbps: float) -> None:
    """The summary: us per launch and GB/s of the compiled slot and torch's peer."""

    def cell(c: Case, name: str) -> tuple[str, str]:
        us = c.results_us.get(name)
        return ("-", "-") if us is None else (f"{us:.2f}", f"{c.nbytes / (us * 1e-6) / 1e9:.0f}")

    print(f"\n=== compiled decode slots vs torch, {SHAPE} bf16 batch 1, {device}, "
          f"copy {copy_tbps:.2f} TB/s (us per launch, GB/s)")
    print(f"{'slot':<20}{'shape':<26}{'compiled':>10}{'GB/s':>6}{'torch':>9}{'GB/s':>6}"
          f"{'vs torch':>9}{'err':>9}  torch peer (vs: the compiled slot's speed, the peer's time / its time)")
    for c in cases:
        r = c.results_us
        comp, peer = cell(c, "compiled"), cell(c, c.peer)
        vs_peer = f"{r[c.peer] / r['compiled']:.2f}x" if "compiled" in r and c.peer in r else "-"
        err = c.errors.get("compiled")
        err_text = "-" if err is None else f"{err:.0e}" + ("" if err <= TOLERANCE else " BAD")
        print(f"{c.name:<20}{c.shape:<26}{comp[0]:>10}{comp[1]:>6}{peer[0]:>9}{peer[1]:>6}"
              f"{vs_peer:>9}{err_text:>9}  {c.peer}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--launches", type=int, default=40, help="launches per captured graph (at most)")
    ap.add_argument("--reps", type=int, default=25, help="timed replays per variant (median)")
    ap.add_argument("--case-seconds", type=float, default=20.0,
                    help="about how long one case's timed replays may take: a slot whose slowest variant is slow "
                         "gets fewer launches per graph (at least 2)")
    ap.add_argument("--contexts", type=int, nargs="+", default=list(CONTEXTS),
                    help=f"cache rows the attention slot reads, each in [1, {MAXPOS}]")
    ap.add_argument("--slots", nargs="+", default=list(SLOTS), choices=SLOTS, help="the slots to time")
    ap.add_argument("--jobs", type=int, default=4, help="compiled slots built at once")
    ap.add_argument("--lower-only", action="store_true",
                    help="lower every slot's @func for CUDA, print what the compiler refuses, and exit (no GPU)")
    args = ap.parse_args()
    bad = [c for c in args.contexts if not 1 <= c <= MAXPOS]
    if bad:
        ap.error(f"--contexts: {bad} outside [1, {MAXPOS}] ({SHAPE}'s max_position_embeddings)")

    functions = slot_functions()
    refused = lowering_refusals(functions)
    for name, why in refused.items():
        print(f"compiler refuses {name}: {why}", flush=True)
    if args.lower_only:
        print(f"lowered for CUDA: {', '.join(n for n in functions if n not in refused) or 'nothing'}")
        return 0 if set(refused) <= {"head_argmax"} else 1
    if not torch.cuda.is_available():
        print("compiled_decode.py: the timed run needs a CUDA GPU, and torch sees none here "
              "(torch.cuda.is_available() is False); --lower-only needs none", file=sys.stderr)
        return 2

    with_argmax = "head_argmax" not in refused
    head_notes = [] if with_argmax else [
        "tf.argmax of the logits is refused by the compiler: the head is timed without it, torch's head too "
        f"({refused['head_argmax']})"]
    wanted = {"qkv": ("qkv", "qkv_three"), "o_proj": ("o_proj",), "gate/up": ("gate_up", "gate_up_two"),
              "down": ("down",), "lm_head": ("head_argmax" if with_argmax else "head",), "attention": ("attention",)}
    to_build = {n: functions[n] for s in args.slots for n in wanted[s] if n not in refused}
    print(f"building {', '.join(to_build)} for CUDA ...", flush=True)
    compiled, failed = build_all(to_build, args.jobs)
    for name, why in failed.items():
        print(f"compiled {name} did not build: {why}", flush=True)
    torch.manual_seed(0)
    device = torch.cuda.get_device_name()
    copy_tbps = copy_bandwidth(20)
    l2_mib = torch.cuda.get_device_properties(0).L2_cache_size >> 20
    print(f"{device}: device copy {copy_tbps:.2f} TB/s (read + write), L2 {l2_mib} MiB, torch {torch.__version__}",
          flush=True)

    def refusal_notes(*names: str) -> list[str]:
        return [f"compiled {n}: {why}" for n in names for why in (refused.get(n), failed.get(n)) if why]

    builders: list[Callable[[], Case]] = []
    if "qkv" in args.slots:
        builders.append(lambda: gemv_case(compiled, "qkv", QKV, HIDDEN, "store", True,
                                          refusal_notes("qkv", "qkv_three")))
    if "o_proj" in args.slots:
        builders.append(lambda: gemv_case(compiled, "o_proj", HIDDEN, HEADS * D, "residual", False,
                                          refusal_notes("o_proj")))
    if "gate/up" in args.slots:
        builders.append(lambda: gemv_case(compiled, "gate_up", 2 * INTER, HIDDEN, "swiglu", True,
                                          refusal_notes("gate_up", "gate_up_two")))
    if "down" in args.slots:
        builders.append(lambda: gemv_case(compiled, "down", HIDDEN, INTER, "residual", False,
                                          refusal_notes("down")))
    if "lm_head" in args.slots:
        builders.append(lambda: head_case(compiled, with_argmax,
                                          head_notes + refusal_notes("head_argmax" if with_argmax else "head")))
    if "attention" in args.slots:
        for ctx in args.contexts:
            builders.append(lambda ctx=ctx: attention_case(compiled, ctx))

    cases: list[Case] = []
    for build in builders:
        case = build()
        if "attention" in case.name and "attention" in failed:
            case.notes += refusal_notes("attention")
        run_case(case, args.launches, args.reps, args.case_seconds)
        print(f"  {case.name}: " + ", ".join(f"{k} {v:.2f} us" for k, v in case.results_us.items()) +
              " (error vs torch: " + ", ".join(f"{k} {v:.1e}" for k, v in case.errors.items()) + ")", flush=True)
        for note in case.notes:
            print(f"    {note}", flush=True)
        cases.append(case)
        del case
        torch.cuda.empty_cache()

    results = {
        "device": device, "torch": torch.__version__, "cuda": torch.version.cuda, "l2_mib": l2_mib,
        "copy_tb_per_s": copy_tbps, "launches_per_graph": args.launches, "reps": args.reps,
        "model": SHAPE, "dtype": "bfloat16", "batch": 1, "seq": 1,
        "shapes": {"hidden": HIDDEN, "intermediate": INTER, "heads": HEADS, "kv_heads": KV, "head_dim": D,
                   "vocab": VOCAB, "qkv_rows": QKV, "eps": EPS, "contexts": args.contexts},
        "tolerance_rel_l2": TOLERANCE, "refused_by_compiler": refused, "failed_to_build": failed,
        "argmax_in_head": with_argmax, "slots": []}
    for c in cases:
        r = c.results_us
        results["slots"].append({
            "name": c.name, "shape": c.shape, "bytes_per_launch": c.nbytes, "copies": c.copies,
            "launches_per_graph": c.launches, "torch_peer": c.peer, "error_vs_torch": c.errors, "us": r,
            "gb_per_s": {k: c.nbytes / (v * 1e-6) / 1e9 for k, v in r.items()},
            # the speed ratio: the peer's time over the compiled slot's (>= 1: the compiled slot is as fast or faster)
            "speed_vs_torch": r[c.peer] / r["compiled"] if "compiled" in r else None,
            "notes": c.notes})
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    print_table(cases, device, copy_tbps)
    if not with_argmax:
        print("lm_head: timed without the argmax (tf.argmax is refused by the compiler: "
              f"{refused['head_argmax'].splitlines()[0]})")
    ok = all(err <= TOLERANCE for c in cases for name, err in c.errors.items() if name.startswith("compiled"))
    return 0 if ok and not failed else 1


if __name__ == "__main__":
    sys.exit(main())

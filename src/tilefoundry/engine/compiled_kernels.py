"""Every kernel slot compiled from the DSL: each slot's computation written once as a ``@func``, jitted for the
engine's device.

The slots' functions (``slot_functions``) compute what :class:`~.slots.KernelSet` says each slot computes, on
the engine's own layouts, which differ from the families' semantic functions (``models/decoder.py``) where the
engine's do: q/k/v packed in one weight, gate and up interleaved row by row (row 2j gate j, row 2j + 1 up j: the
gate and up weights are strided views of it, not copies), the KV cache updated in place (the caller passes each
layer's cache as the output too), the residual stream updated in place (an epilogue reading, at each element,
the residual it writes). The compiler fuses what a hand-written decode kernel would: the RMSNorm before a projection
runs in the matmul's prologue, the residual add and the bias in its epilogue, gate and up one kernel reading
the normed input once against both (a pair: ``silu(gate) * up`` its epilogue), attention one fused kernel and
its combine, and greedy decoding's choice of the next token runs in the head's matmul (the ``choose`` slot: each
CTA's part of the argmax, then a merge; built for a GPU only, whose greedy CUDA graphs call it: a CPU's greedy
decoding reads the logits). ``tests/test_compiled_kernels.py`` checks the engine's step through them
against the semantic Module's step (the families' functions), for every family.

The routed experts (``moe``) of a one-token step run compiled, reading only the chosen experts: the router's
logits, their softmax and top-k on the device, the chosen ids read where the gate, up and down weights' addresses
are formed (a gather on the experts' batch axis: ``index_select`` of the stacked weights, never a copy), so the
experts no token chose are never read (tests/test_compiled_kernels.py poisons them with NaN).

A step of many tokens (a prompt) runs compiled too. On a Hopper GPU each slot with a matmul is built as an entry
choosing between two variants of its body by the step's row count (``CompilerOptions.split_rows``,
``lower/dispatch.py``): up to 16 rows the decode step's kernels, from 17 the prompt's: the projections a GEMM on
the tensor cores (wgmma, ``cuda/ops/matmul_gmma.cuh``; gate and up one GEMM of the pair, ``silu(gate) * up`` its
epilogue; the norm before a projection a row-wise stage of its own), the attention blocks of 64 query rows through
mma.sync (``cuda/ops/attention_mma.cuh``). Qwen3-1.7B's 1024-token prefill on an H200 (2026-12-05, the engine alone,
synchronised): 11.6 ms through them, against 24.2 ms through torch's projections and attention (cuBLAS, SDPA
given a boolean mask: its math backend). ``moe`` at several tokens a step runs compiled on a CPU: the router's
slot (``moe_route``), the chunks of each chosen expert's tokens formed by the engine (:func:`moe_groups`), then
every chunk through its expert's gathered weights (``moe_grouped``), so only the chosen experts are read, on a CPU
and on a GPU alike (a 16-bit model's chunks of 17 rows and more through the tensor-core GEMM).

On the CPU a prompt's attention runs its rows tier, eight query rows against tiles of 64 keys (flash-style), at
1.15-1.66x torch SDPA told ``is_causal`` (its flash kernel: SmolLM2-135M's shape, 2 threads, a layer of a 500-token
prompt 2.11 ms against 3.25; ``bench/compiled_attention_cpu.json``), and its projections the CPU's blocked GEMM
(``bench/compiled_gemm_cpu.json``: 0.86-1.02x torch's in f32, 0.87-1.29x in bf16 at 128 to 1024 rows, bf16 on AMX's
tiles on both sides). So a 500-token prompt prefills faster through the compiled slots than through torch's (421
against 456 ms; docs/engine.md).

Decoding (one token a step) runs every slot compiled: SmolLM2-135M (f32) decodes at 38.3 tokens/s through them
(the bound of this machine's memory bandwidth) against 30.2 through torch's slots and 26.8 through transformers
(``bench/decode.py --device cpu --runners project,hf --kernels compiled,torch --rounds 5 --prefill-tokens 500``,
``bench/decode_smollm2-135m_cpu.json``, 2026-12-05).

Positions reach the slots as the engine's own int32 device tensors (a step of one token: its position, as the
rows' positions and the cache's write position; a longer step: its positions made once a step), and attention
reads the whole cache, the entries it scans bounded on the device by the step's last position: so the decode
step through the compiled set is captured as one CUDA graph and replayed at every context length (its speed:
docs/engine.md).
"""

from __future__ import annotations

import functools
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import torch

from ..codegen.build import build_progress
from ..codegen.options import CompilerOptions
from ..dsl import ConstTensor, DimVar, Tensor, func, tf
from ..ir.core.function import Function
from ..ir.types.dtype import dtype_of
from ..runtime.jit import jit
from .decoder import DecoderSpec
from .packed import PackedDecoder
from .slots import STEP_WIDTH, KernelSet, StepPositions
from .workspace import Scratches

__all__ = ["CompiledKernels", "SlotShapes", "slot_functions", "slot_options"]


def _linear(x: Any, w: Any) -> Any:
    """x @ w.T for a weight stored (out, in)."""
    return tf.matmul(x, tf.transpose(w, (1, 0)))


MOE_CHUNK = 128
"""The most tokens of one expert a chunk of a several-token ``moe`` step takes (``moe_grouped``): every chunk of a
step has the same rows (:func:`chunk_width`), an expert's tokens filling as many chunks as they need (its weights
read once a chunk), the rows its last chunk does not fill dropped."""

def chunk_width(counts: list[int]) -> int:
    """The rows of a several-token step's expert chunks, for experts chosen ``counts`` times: of the most an expert
    has (when at most :data:`MOE_CHUNK`) and the multiples of 16 from 32 to :data:`MOE_CHUNK` (fewer rows run the
    GEMV tier), the one leaving the fewest rows unfilled, the widest of equals (fewer chunks)."""
    most = max(counts)
    widths = {w for w in range(32, MOE_CHUNK + 1, 16) if w < most} | {min(most, MOE_CHUNK)}
    return min(sorted(widths, reverse=True), key=lambda w: sum(-(-n // w) * w for n in counts))


def moe_groups(chosen: torch.Tensor, experts: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The chunks of a several-token step's routed tokens, ``moe_grouped``'s ``rows``, ``ids`` and ``picks``: each
    expert's tokens (in token order) cut into chunks of :func:`chunk_width` rows, one row a chunk.

    ``chosen`` is the router's (tokens, k) expert ids. Chunk i holds tokens ``rows[i]`` of expert ``ids[i]`` (its
    rows past the expert's tokens repeat token 0: no token picks them); token t's j-th choice is row ``picks[t, j]``
    of the chunks' rows laid end to end. The experts' counts are read on the host (one sync)."""
    tokens, k = chosen.shape
    device = chosen.device
    flat = chosen.reshape(-1)
    order = torch.argsort(flat, stable=True)  # (token, choice) pairs by expert, in token order within one
    expert_of = flat[order]
    counts = torch.bincount(flat, minlength=experts)
    on_host = counts.tolist()
    w = chunk_width(on_host)
    n = sum(-(-c // w) for c in on_host)  # the step's chunks
    per_expert = (counts + w - 1) // w  # chunks an expert takes
    first = torch.cumsum(per_expert, 0) - per_expert  # each expert's first chunk
    start = torch.cumsum(counts, 0) - counts  # each expert's first pair in `order`
    place = torch.arange(tokens * k, device=device) - start[expert_of]  # the pair's place among its expert's
    at = (first[expert_of] + place // w) * w + place % w  # the pair's row among the chunks' rows
    rows = torch.zeros(n * w, dtype=torch.long, device=device)
    rows[at] = order // k
    picks = torch.empty(tokens * k, dtype=torch.long, device=device)
    picks[order] = at
    ids = torch.repeat_interleave(torch.arange(experts, device=device), per_expert)
    return rows.view(n, w), ids, picks.view(tokens, k)


EARLY_READS = {"rope_cache": ("pos_ids", "cur_pos", "n_new")}
"""The positions each slot may read before it waits for the kernel before it (``CompilerOptions.early_reads``): the
engine writes them before a step's first kernel (one token's position), or copies them in (``_rows``), so no
kernel launched right before a slot writes them. Measured on the H200 (Qwen3-1.7B's decode step, context 300): the
rope + cache slot's positions read early, 1590 -> 1577 us. Attention reads its positions inside its op; doing that
before the wait (a variant of the op) changed nothing (1577 -> 1580 us), and also asking L2 for the slice's cached
keys and values there made the step slower (1563 -> 1578 us)."""


def slot_options(slot: str) -> CompilerOptions:
    """The build options of slot ``slot``: its early reads, where it has some; on a Hopper GPU a slot with a matmul
    an entry choosing the decode step's variant or the prompt's by the step's row count (``split_rows``: module
    docstring)."""
    return CompilerOptions(early_reads=EARLY_READS.get(slot, ()), split_rows=True)


@dataclass(frozen=True)
class SlotShapes:
    """What the slots' functions are specialised for: the spec's sizes, the model's dtype, the MLP's intermediate
    size (0 for a model with no dense layer), whether q/k/v has a bias (Qwen2) and per-head norms (Qwen3), and the
    routed layers' experts and each expert's intermediate size (0 for a model with none)."""

    spec: DecoderSpec
    dtype: str
    intermediate: int
    qkv_bias: bool
    qk_norm: bool
    experts: int = 0
    expert_intermediate: int = 0

    @classmethod
    def of(cls, spec: DecoderSpec, weights: PackedDecoder, dtype: torch.dtype) -> SlotShapes:
        """The shapes of the model whose packed weights are ``weights``."""
        dense = [w for w in weights.layers if w.gate_up is not None]
        routed = [w for w in weights.layers if w.experts_gate is not None]
        first = weights.layers[0] if weights.layers else None
        experts, expert_inter = routed[0].experts_gate.shape[:2] if routed else (0, 0)
        return cls(spec, dtype_of(dtype).name, dense[0].gate_up.shape[0] // 2 if dense else 0,
                   first is not None and first.qkv_bias is not None, first is not None and first.q_norm is not None,
                   int(experts), int(expert_inter))


def step_masks(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``choose`` slot's constants on ``device``: what each element of the step's inputs gains (1 in column 0 of
    the position and context rows) and where the chosen token goes (row 0, column 0)."""
    bump = torch.zeros((3, STEP_WIDTH), dtype=torch.int32)
    bump[1:, 0] = 1
    token_at = torch.zeros((3, STEP_WIDTH), dtype=torch.int32)
    token_at[0, 0] = 1
    return bump.to(device), token_at.to(device)


@functools.lru_cache(maxsize=8)
def slot_functions(shapes: SlotShapes) -> dict[str, Function]:
    """Each compiled slot's ``@func`` by name, for ``shapes``."""
    s, dt = shapes.spec, shapes.dtype
    HID, H, KV, D, V, MAXPOS = s.hidden, s.heads, s.kv_heads, s.head_dim, s.vocab, s.max_positions
    QKV, INTER, eps, scale = (H + 2 * KV) * D, shapes.intermediate, s.eps, s.scale
    seq = DimVar("seq", 1, MAXPOS + 1)
    capacity = DimVar("capacity", 1, MAXPOS + 1)
    fns: dict[str, Function] = {}

    @func
    def embed(ids: Tensor[(seq,), "i64"], table: ConstTensor[(V, HID), dt]):
        return tf.index_select(table, ids, 0)

    if shapes.qkv_bias:
        @func
        def norm_linear(x: Tensor[(seq, HID), dt], norm: ConstTensor[(HID,), dt], weight: ConstTensor[(QKV, HID), dt],
                        bias: ConstTensor[(QKV,), dt]):
            return _linear(tf.rms_norm(x, norm, eps), weight) + bias
    else:
        @func
        def norm_linear(x: Tensor[(seq, HID), dt], norm: ConstTensor[(HID,), dt], weight: ConstTensor[(QKV, HID), dt]):
            return _linear(tf.rms_norm(x, norm, eps), weight)

    def split(qkv: Any) -> tuple[Any, Any, Any]:
        heads = tf.reshape(qkv, (seq, H + 2 * KV, D))
        return (tf.slice(heads, (0, 0, 0), (seq, H, D)), tf.slice(heads, (0, H, 0), (seq, KV, D)),
                tf.slice(heads, (0, H + KV, 0), (seq, KV, D)))

    def cached(q: Any, k: Any, v: Any, cos: Any, sin: Any, pos_ids: Any, cache_k: Any, cache_v: Any, cur_pos: Any,
               n_new: Any) -> tuple[Any, Any, Any]:
        q, k = tf.rope(q, k, cos, sin, pos_ids)
        cache_k = tf.cache_update(cache_k, cur_pos, n_new, tf.reshape(k, (1, seq, KV, D)))
        cache_v = tf.cache_update(cache_v, cur_pos, n_new, tf.reshape(v, (1, seq, KV, D)))
        return q, cache_k, cache_v

    if shapes.qk_norm:
        @func
        def rope_cache(qkv: Tensor[(seq, QKV), dt], q_norm: ConstTensor[(D,), dt], k_norm: ConstTensor[(D,), dt],
                       cos: Tensor[(MAXPOS, D), dt], sin: Tensor[(MAXPOS, D), dt], pos_ids: Tensor[(seq,), "i32"],
                       cache_k: Tensor[(1, capacity, KV, D), dt], cache_v: Tensor[(1, capacity, KV, D), dt],
                       cur_pos: Tensor[(), "i32"], n_new: Tensor[(), "i64"]):
            q, k, v = split(qkv)
            q, k = tf.rms_norm(q, q_norm, eps), tf.rms_norm(k, k_norm, eps)
            return cached(q, k, v, cos, sin, pos_ids, cache_k, cache_v, cur_pos, n_new)
    else:
        @func
        def rope_cache(qkv: Tensor[(seq, QKV), dt], cos: Tensor[(MAXPOS, D), dt], sin: Tensor[(MAXPOS, D), dt],
                       pos_ids: Tensor[(seq,), "i32"], cache_k: Tensor[(1, capacity, KV, D), dt],
                       cache_v: Tensor[(1, capacity, KV, D), dt], cur_pos: Tensor[(), "i32"],
                       n_new: Tensor[(), "i64"]):
            q, k, v = split(qkv)
            return cached(q, k, v, cos, sin, pos_ids, cache_k, cache_v, cur_pos, n_new)

    @func
    def attention(q: Tensor[(seq, H, D), dt], keys: Tensor[(capacity, KV, D), dt],
                  vals: Tensor[(capacity, KV, D), dt], pos_ids: Tensor[(seq,), "i32"]):
        qh = tf.transpose(q, (1, 0, 2))  # (H, seq, D)
        k = tf.repeat_interleave(tf.transpose(keys, (1, 2, 0)), H // KV, 0)  # (H, D, capacity)
        v = tf.repeat_interleave(tf.transpose(vals, (1, 0, 2)), H // KV, 0)  # (H, capacity, D)
        scores = tf.matmul(qh, k) * scale
        # the whole cache, entry n at position n: the kernel reads entries up to the step's last position only
        # (read on the device, so one CUDA graph serves every context length)
        visible = tf.reshape(tf.arange(capacity, dtype="i32"), (1, capacity)) <= tf.reshape(pos_ids, (seq, 1))
        probs = tf.softmax(tf.where(visible, scores, float("-inf")))
        return tf.reshape(tf.transpose(tf.matmul(probs, v), (1, 0, 2)), (seq, H * D))  # heads side by side

    def linear_residual(width: int) -> Function:
        @func
        def linear_residual(x: Tensor[(seq, width), dt], weight: ConstTensor[(HID, width), dt],
                            residual: Tensor[(seq, HID), dt]):
            return residual + _linear(x, weight)

        return linear_residual

    @func
    def head(x: Tensor[(seq, HID), dt], norm: ConstTensor[(HID,), dt], weight: ConstTensor[(V, HID), dt]):
        return _linear(tf.rms_norm(x, norm, eps), weight)

    @func
    def choose(x: Tensor[(1, HID), dt], norm: ConstTensor[(HID,), dt], weight: ConstTensor[(V, HID), dt],
               step: Tensor[(3, STEP_WIDTH), "i32"], bump: ConstTensor[(3, STEP_WIDTH), "i32"],
               token_at: ConstTensor[(3, STEP_WIDTH), "i32"]):
        # greedy decoding's head: the logits, the first largest one's index, and whether every logit is finite (the
        # row's largest and smallest are: a NaN wins both), the three reductions found in the head's matmul (each
        # CTA's parts of the row, then one merge: lower/reduce_epilogue.py), the finiteness test after them; and
        # the next step's inputs (the token where token_at is 1, the step's rows plus bump elsewhere: the position
        # and context one more), element by element, so the caller passes the step's own inputs as that output
        logits = _linear(tf.rms_norm(x, norm, eps), weight)
        hi = tf.reduce(logits, axes=(-1,), keepdim=False, kind="max")
        lo = tf.reduce(logits, axes=(-1,), keepdim=False, kind="min")
        finite = tf.cast(tf.eq((hi - hi) + (lo - lo), 0.0), "i64")  # x - x is 0 for a finite x only
        token = tf.argmax(logits, axis=-1)
        return logits, token, finite, tf.where(token_at == 1, tf.cast(token, "i32"), step + bump)

    fns.update(embed=embed, norm_linear=norm_linear, rope_cache=rope_cache, attention=attention,
               o_proj=linear_residual(H * D), head=head, choose=choose)
    if INTER:
        @func
        def norm_swiglu(x: Tensor[(seq, HID), dt], norm: ConstTensor[(HID,), dt],
                        gate_up: ConstTensor[(2 * INTER, HID), dt]):
            h = tf.rms_norm(x, norm, eps)
            gate = tf.slice(gate_up, (0, 0), (INTER, HID), (2, 1))  # rows 2j
            up = tf.slice(gate_up, (1, 0), (INTER, HID), (2, 1))  # rows 2j + 1
            return tf.silu(_linear(h, gate)) * _linear(h, up)

        fns["norm_swiglu"] = norm_swiglu
        fns["down"] = linear_residual(INTER)
    E, MI, K = shapes.experts, shapes.expert_intermediate, s.experts_per_token

    def route(x: Any, norm: Any, router: Any) -> tuple[Any, Any, Any]:
        """The tokens normed, their K experts' weights (the router's softmax, its top K, renormalised where the
        model does, in the model's dtype) and the experts' ids."""
        h = tf.rms_norm(x, norm, eps)
        top, chosen = tf.topk(tf.softmax(tf.cast(_linear(h, router), "f32")), K)
        if s.normalize_experts:
            top = top / tf.reduce(top, axes=(-1,), keepdim=True, kind="sum")
        return h, tf.cast(top, dt), chosen

    def experts_mlp(a: Any, ids: Any, gate: Any, up: Any, down: Any) -> Any:
        """Each batch element of ``a`` through the SwiGLU MLP of its expert ``ids[i]``: the stacked weights (stored
        (out, in)) gathered on their experts' axis (``index_select``: read in place, only the chosen ones)."""
        def through(w: Any, x: Any) -> Any:
            return tf.matmul(x, tf.transpose(tf.index_select(w, ids, 0), (0, 2, 1)))

        return through(down, tf.silu(through(gate, a)) * through(up, a))

    if E:
        @func
        def moe(x: Tensor[(1, HID), dt], norm: ConstTensor[(HID,), dt], router: ConstTensor[(E, HID), dt],
                experts_gate: ConstTensor[(E, MI, HID), dt], experts_up: ConstTensor[(E, MI, HID), dt],
                experts_down: ConstTensor[(E, HID, MI), dt]):
            h, top, chosen = route(x, norm, router)
            weights = tf.reshape(top, (K, 1, 1))
            ids = tf.reshape(chosen, (K,))  # the chosen experts: only their weights are read

            y = experts_mlp(h, ids, experts_gate, experts_up, experts_down)  # (K, 1, HID)
            return x + tf.reduce(y * weights, axes=(0,), keepdim=False, kind="sum")

        fns["moe"] = moe
        # A step of several tokens: the router's choices (moe_route), then each chosen expert over the tokens
        # that chose it (moe_grouped), in chunks of at most MOE_CHUNK rows the engine forms from the choices
        # (moe_groups): chunk i's rows are tokens rows[i] of expert ids[i]; token t's j-th choice, picks[t, j].
        chunks = DimVar("chunks", 1, MAXPOS * K + E + 1)
        per_chunk = DimVar("per_chunk", 1, MOE_CHUNK + 1)

        @func
        def moe_route(x: Tensor[(seq, HID), dt], norm: ConstTensor[(HID,), dt], router: ConstTensor[(E, HID), dt]):
            return route(x, norm, router)

        @func
        def moe_grouped(x: Tensor[(seq, HID), dt], h: Tensor[(seq, HID), dt], top: Tensor[(seq, K), dt],
                        rows: Tensor[(chunks, per_chunk), "i64"], ids: Tensor[(chunks,), "i64"],
                        picks: Tensor[(seq, K), "i64"], experts_gate: ConstTensor[(E, MI, HID), dt],
                        experts_up: ConstTensor[(E, MI, HID), dt], experts_down: ConstTensor[(E, HID, MI), dt]):
            hs = tf.reshape(tf.index_select(h, tf.reshape(rows, (chunks * per_chunk,)), 0),
                            (chunks, per_chunk, HID))  # each chunk's tokens

            y = experts_mlp(hs, ids, experts_gate, experts_up, experts_down)
            # each token's K results (rows a chunk does not fill are picked by none), weighed and summed
            picked = tf.reshape(tf.index_select(tf.reshape(y, (chunks * per_chunk, HID)), tf.reshape(picks, (seq * K,)),
                                                0), (seq, K, HID))
            return x + tf.reduce(picked * tf.reshape(top, (seq, K, 1)), axes=(1,), keepdim=False, kind="sum")

        fns.update(moe_route=moe_route, moe_grouped=moe_grouped)
    return fns


class CompiledKernels(KernelSet):
    """Every slot a jitted ``@func`` (:func:`slot_functions`), built for the engine's shapes, dtype and device when
    the engine is made (:meth:`prepare`; on disk after the first time, so later engines load them).
    A set serves the model it was last prepared for: give each engine its own.

    Args:
        jobs: builds run at once (default: one per core, 8 at most).
    """

    name = "compiled"

    def __init__(self, *, jobs: int | None = None) -> None:
        self.jobs = jobs if jobs is not None else max(1, min(8, os.cpu_count() or 1))
        self._fns: dict[str, Any] = {}
        self._shapes: SlotShapes | None = None
        self._aranges: dict[torch.device, torch.Tensor] = {}
        self._rows_of: tuple[StepPositions, torch.Tensor] | None = None
        self._scratches = Scratches()
        self._masks: tuple[torch.Tensor, torch.Tensor] | None = None  # the choose slot's constants (step_masks)

    def prepare(self, spec: DecoderSpec, weights: PackedDecoder, dtype: torch.dtype, device: torch.device) -> None:
        """Build (or load) every slot's kernel for this model: its sizes, dtype and device."""
        shapes = SlotShapes.of(spec, weights, dtype)
        if shapes == self._shapes:
            return
        target = "cuda" if device.type == "cuda" else "cpu"
        # greedy_head runs in the engine's greedy CUDA graphs only: no build of its slot on a CPU
        fns = {n: fn for n, fn in slot_functions(shapes).items() if n != "choose" or target == "cuda"}
        start = time.monotonic()
        # each build's progress on a terminal only, as this set's own line: a command's stderr stays its own
        with build_progress("terminal"), ThreadPoolExecutor(self.jobs) as pool:
            built = dict(zip(fns, pool.map(lambda fn: jit(fn, target=target, options=slot_options(fn.name)),
                                           fns.values())))
        took = time.monotonic() - start
        if took > 2.0 and sys.stderr.isatty():  # as jit's own build progress: a terminal's, not a log's
            print(f"tilefoundry: the engine's {len(built)} compiled kernel slots for {target} are ready ({took:.0f} s; "
                  "kept on disk for next time)", file=sys.stderr)
        self._fns, self._shapes = built, shapes
        self._masks = step_masks(device) if "choose" in built else None  # made here, not in a graph's capture

    def _spec(self) -> DecoderSpec:
        if self._shapes is None:
            raise RuntimeError("CompiledKernels: its slots are not built yet; a DecodeEngine builds them when it is "
                               "made (CompiledKernels.prepare)")
        return self._shapes.spec

    def _fn(self, name: str) -> Any:
        """Slot ``name``'s entry, its bound function called directly (``CompiledModule.fn``): the slots pass
        every output, all of them tensors the engine made, and the entry checks each argument itself (device,
        dtype, rank, extents); the CompiledModule's own Python checks cost SmolLM2-135M's CPU decoding 38.8 ->
        40.6 tokens/s (six alternating runs of 64 tokens each, 2 threads, 2026-12-05)."""
        self._spec()
        if name not in self._fns:
            raise RuntimeError(f"CompiledKernels: the model it was built for has no {name} slot")
        return self._fns[name].fn

    def _eps(self, eps: float) -> None:
        if eps != self._spec().eps:
            raise ValueError(f"CompiledKernels: eps {eps} differs from the {self._spec().eps} its slots were built "
                             "for")

    def _arange(self, count: int, device: torch.device) -> torch.Tensor:
        have = self._aranges.get(device)
        if have is None or have.shape[0] < count:
            have = torch.arange(self._spec().max_positions + 1, device=device)
            self._aranges[device] = have
        return have[:count]

    def _rows(self, at: StepPositions, count: int) -> torch.Tensor:
        """The step's ``count`` positions, int32 on the device: the engine's position itself for one token (no
        kernel), else made once a step (not once a layer). The rope + cache slot reads them before it waits for the
        kernel before it (``EARLY_READS``), so no kernel makes them: copied from the host where the step
        knows its position, else made on the device and copied (a copy, not a kernel) into memory of their own."""
        if count == 1:
            return at.position
        if self._rows_of is None or self._rows_of[0] is not at or self._rows_of[1].shape[0] != count:
            device = at.position.device
            if at.length is not None:
                rows = torch.arange(at.length, at.length + count, dtype=torch.int32).to(device)
            else:
                rows = torch.empty(count, dtype=torch.int32, device=device)
                rows.copy_(at.rows(count).to(torch.int32))
            self._rows_of = (at, rows)
        return self._rows_of[1]

    def embed(self, ids: torch.Tensor, table: torch.Tensor, out: torch.Tensor) -> None:
        self._fn("embed")(ids.long(), table, out)

    def norm_linear(self, x: torch.Tensor, norm: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                    out: torch.Tensor, eps: float) -> None:
        self._eps(eps)
        fn = self._fn("norm_linear")
        if bias is None:
            fn(x, norm, weight, out)
        else:
            fn(x, norm, weight, bias, out)

    def rope_cache(self, qkv: torch.Tensor, q_norm: torch.Tensor | None, k_norm: torch.Tensor | None,
                   cos: torch.Tensor, sin: torch.Tensor, q_out: torch.Tensor, cache_k: torch.Tensor,
                   cache_v: torch.Tensor, eps: float, at: StepPositions) -> None:
        self._eps(eps)
        m = qkv.shape[0]
        rows = self._rows(at, m)
        cur = at.position.reshape(())
        n_new = self._arange(m + 1, qkv.device)[m]
        ck, cv = cache_k.unsqueeze(0), cache_v.unsqueeze(0)  # (1, capacity, KV, D), the same memory
        norms = (q_norm, k_norm) if q_norm is not None and k_norm is not None else ()
        self._fn("rope_cache")(qkv, *norms, cos, sin, rows, ck, cv, cur, n_new, q_out, ck, cv)

    def attention(self, q: torch.Tensor, cache_k: torch.Tensor, cache_v: torch.Tensor, out: torch.Tensor,
                  scale: float, at: StepPositions) -> None:
        m = q.shape[0]
        if scale != self._spec().scale:
            raise ValueError(f"CompiledKernels: attention's scale {scale} differs from the {self._spec().scale} its "
                             "slot was built for")
        self._fn("attention")(q, cache_k, cache_v, self._rows(at, m), out.view(m, -1))

    def linear_residual(self, x: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor,
                        out: torch.Tensor) -> None:
        s = self._spec()
        name = "o_proj" if x.shape[1] == s.heads * s.head_dim else "down"
        self._fn(name)(x, weight, residual, out)

    def norm_swiglu(self, x: torch.Tensor, norm: torch.Tensor, gate_up: torch.Tensor, out: torch.Tensor,
                    eps: float) -> None:
        self._eps(eps)
        self._fn("norm_swiglu")(x, norm, gate_up, out)

    def moe(self, x: torch.Tensor, norm: torch.Tensor, router: torch.Tensor, experts_gate: torch.Tensor,
            experts_up: torch.Tensor, experts_down: torch.Tensor, out: torch.Tensor, eps: float, top_k: int,
            normalize: bool) -> None:
        """One token: the compiled slot, reading only the chosen experts' weights. Several: the router's slot, then
        each chosen expert's slot over the chunks of its tokens (:func:`moe_groups`)."""
        self._eps(eps)
        spec = self._spec()
        if (top_k, normalize) != (spec.experts_per_token, spec.normalize_experts):
            raise ValueError(f"CompiledKernels: {top_k} experts a token (normalize={normalize}) differs from the "
                             f"{spec.experts_per_token} (normalize={spec.normalize_experts}) its moe slot was built "
                             "for")
        if x.shape[0] != 1:  # the router, the chunks of each expert's tokens, then the chunks through the experts
            h, top = torch.empty_like(x), torch.empty(x.shape[0], top_k, dtype=x.dtype, device=x.device)
            chosen = torch.empty(x.shape[0], top_k, dtype=torch.long, device=x.device)
            self._fn("moe_route")(x, norm, router, h, top, chosen)
            mixed = torch.empty_like(x)
            self._fn("moe_grouped")(x, h, top, *moe_groups(chosen, router.shape[0]), experts_gate, experts_up,
                                    experts_down, mixed)
            out.copy_(mixed)
            return
        # out may be x: the slot reads x after its last stage begins writing
        mixed = self._scratches.get(tuple(x.shape), x)
        self._fn("moe")(x, norm, router, experts_gate, experts_up, experts_down, mixed)
        out.copy_(mixed)

    def head(self, x: torch.Tensor, norm: torch.Tensor, weight: torch.Tensor, out: torch.Tensor, eps: float) -> None:
        self._eps(eps)
        self._fn("head")(x, norm, weight, out)

    def greedy_head(self, x: torch.Tensor, norm: torch.Tensor, weight: torch.Tensor, logits: torch.Tensor,
                    result: torch.Tensor, step: torch.Tensor, eps: float) -> None:
        """The ``choose`` slot: the last token's logits, their first largest index into ``result[0]`` and whether
        every one is finite into ``result[1]``, found by the head's own kernel, a merge and one small launch (in
        place of torch's argmax and finiteness test after the head), which also writes the next step's inputs into
        ``step`` in place (the token, the position and context one more: torch's copy and add before, two launches
        of the step's critical path, 3.8 us of it on an H100)."""
        self._eps(eps)
        if self._masks is None or tuple(step.shape) != (3, STEP_WIDTH):  # built for a CPU (prepare), or a step
            return super().greedy_head(x, norm, weight, logits, result, step, eps)  # not the engine's own
        bump, token_at = self._masks
        self._fn("choose")(x[-1:], norm, weight, step, bump, token_at, logits[-1:], result[:1], result[1:], step)

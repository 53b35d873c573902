"""DecodeEngine: batch-1 generation from a loaded runtime twin, on buffers the engine owns and updates in place.

Built once from a loaded twin (``DecodeEngine(twin, capacity)``), it packs the weights (q/k/v together, gate/up
together; a tied lm_head stays the embedding), allocates one KV cache for ``capacity`` positions and the static
buffers of a decode step, then serves any number of prompts: ``reset``, ``prefill(prompt)``, ``decode(token)``
per new token. The step's kernels are the slots of a :class:`~.slots.KernelSet` (:func:`default_kernels`).

On a CUDA device the whole decode step (embedding, every layer, the head) is captured as one CUDA graph on the
first decode and replayed for every later token: its inputs (token id, position, context length) are device
tensors the host fills before each replay, so one graph serves every position. The graph is captured again
when the buffers it reads move (``resize``). When capture fails (a slot that synchronises with the host, say),
the engine warns once, saying why, and decodes with eager steps from then on. Prefill runs eagerly.

The twin's public step is untouched by all this: it still returns new caches and never mutates those it was
given, and it is what ``check`` compares with the semantic Module; ``models.engine_step.EngineStep`` makes the
engine's own step checkable the same way.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..runtime.decorator import bound_weights
from .decoder import DecoderSpec, DecoderWeights
from .packed import PackedDecoder, pack_decoder
from .parallel import TensorParallel, active_parallel, local_spec, shard_weights, whole_spec
from .parallel_kernels import ParallelKernels
from .slots import STEP_WIDTH, KernelSet, StepPositions
from .torch_kernels import TorchKernels

__all__ = ["DecodeEngine", "EngineStats", "default_kernels", "greedy_choice"]


@dataclass
class EngineStats:
    """What the engine ran: CUDA-graph captures and replays, eager decode steps, prefills."""

    captures: int = 0
    replays: int = 0
    eager_steps: int = 0
    prefills: int = 0


@dataclass
class _Activations:
    """The activations of a step of ``rows`` tokens (static for decode, per call for prefill)."""

    x: torch.Tensor
    qkv: torch.Tensor
    q: torch.Tensor
    attn: torch.Tensor
    act: torch.Tensor
    logits: torch.Tensor

    @classmethod
    def allocate(cls, spec: DecoderSpec, packed: PackedDecoder, rows: int, logit_rows: int, dtype: torch.dtype,
                 device: torch.device, vocab: int) -> _Activations:
        """The buffers of a step on the sizes ``spec`` gives (a tensor-parallel rank's own heads), with logits of
        the whole ``vocab``."""
        widths = {layer.gate_up.shape[0] // 2 for layer in packed.layers if layer.gate_up is not None}
        inter = max(widths, default=0)

        def empty(*shape: int) -> torch.Tensor:
            return torch.zeros(shape, dtype=dtype, device=device)

        s = spec
        return cls(x=empty(rows, s.hidden), qkv=empty(rows, (s.heads + 2 * s.kv_heads) * s.head_dim),
                   q=empty(rows, s.heads, s.head_dim), attn=empty(rows, s.heads, s.head_dim), act=empty(rows, inter),
                   logits=empty(logit_rows, vocab))


def greedy_choice(logits: torch.Tensor) -> tuple[int, bool]:
    """The first largest logit of a row (as ``torch.argmax``) and whether every logit is finite, in one read from
    the device."""
    finite, chosen = torch.stack((torch.isfinite(logits).all().long(), torch.argmax(logits))).tolist()
    return int(chosen), bool(finite)


def default_kernels(dtype: torch.dtype, device: torch.device) -> KernelSet:
    """The kernel slots an engine runs unless told otherwise: :class:`~.compiled_kernels.CompiledKernels` (every
    slot compiled from the DSL) on a CPU and for a bf16 model on a CUDA device, :class:`~.torch_kernels.TorchKernels`
    for other dtypes on CUDA.

    The compiled slots are built when the engine is made, for the model's shapes (nvcc on CUDA, about a minute the
    first time; on disk after that). When they cannot be built (no C++ compiler or nvcc, say), the engine warns once,
    saying why, and runs the torch slots.
    """
    from .compiled_kernels import CompiledKernels

    if device.type == "cpu" or (device.type == "cuda" and dtype == torch.bfloat16):
        return CompiledKernels()
    return TorchKernels()


def _torch_instead(what: str, error: BaseException, stacklevel: int) -> TorchKernels:
    """The torch slots, in place of the ``what`` kernels that could not be made (one warning saying why)."""
    text = " ".join(str(error).split())[:300]
    warnings.warn(f"DecodeEngine: the {what} kernels are not available ({type(error).__name__}: {text}); running "
                  "the torch kernel slots", RuntimeWarning, stacklevel=stacklevel)
    return TorchKernels()


class DecodeEngine:
    """Batch-1 prefill and decode of a loaded causal-LM twin, with its own in-place KV cache.

    Args:
        twin: a loaded runtime twin of a causal LM that describes itself to the engine: a ``decoder_spec``
            (:class:`~.decoder.DecoderSpec`) and ``decoder_weights()`` (:class:`~.decoder.DecoderWeights`), as
            ``tilefoundry.models.twins.build_twin`` makes them. The engine keeps references to the weights it
            read (packed copies of q/k/v and gate/up), not to the twin: load the twin again, build a new engine.
        capacity: the positions the KV cache holds (prompt plus new tokens), in [1, max_position_embeddings].
        kernels: the kernel slots (default: :func:`default_kernels`: the compiled slots on a CPU and for a bf16
            model on an NVIDIA GPU, torch otherwise); the engine has them build what they
            need for this model (``KernelSet.prepare``) before its first step.
        graph: capture the decode step as a CUDA graph: None (default) on CUDA devices, True to insist (refused
            on a CPU), False for eager steps.
        parallel: split the model over a tensor-parallel group (:class:`~.parallel.TensorParallel`; default: the
            one made active by ``TensorParallel.active()``, else none): this rank keeps its slice of every weight
            and its own heads' cache, and its kernel set runs wrapped in :class:`~.parallel_kernels.ParallelKernels`.
            Every rank of the group must build its engine and run the same steps with the same tokens.

    Raises:
        TypeError: ``twin`` does not describe itself to the engine, or ``kernels`` is not a KernelSet.
        ValueError: ``capacity`` out of range, ``graph=True`` on a CPU, weights split over devices or dtypes, or
            sizes that do not divide over the tensor-parallel ranks.
        NotLoadedError: the twin's weights are not loaded.
    """

    def __init__(self, twin: Any, capacity: int, *, kernels: KernelSet | None = None,
                 graph: bool | None = None, parallel: TensorParallel | None = None) -> None:
        spec = getattr(type(twin), "decoder_spec", None)
        if not isinstance(spec, DecoderSpec) or not callable(getattr(twin, "decoder_weights", None)):
            raise TypeError(
                f"DecodeEngine runs a causal-LM twin that describes itself (a decoder_spec and decoder_weights(), as "
                f"tilefoundry.models.twins.build_twin makes them); {type(twin).__name__} does not"
            )
        if kernels is not None and not isinstance(kernels, KernelSet):
            raise TypeError(f"DecodeEngine: kernels must be a KernelSet (e.g. TorchKernels()), got "
                            f"{type(kernels).__name__}")
        weights = twin.decoder_weights()
        if not isinstance(weights, DecoderWeights):
            raise TypeError(f"{type(twin).__name__}.decoder_weights() returned a {type(weights).__name__}, not "
                            "DecoderWeights")
        if parallel is None:
            parallel = active_parallel()
        if parallel is not None and not isinstance(parallel, TensorParallel):
            raise TypeError(f"DecodeEngine: parallel must be a TensorParallel, got {type(parallel).__name__}")
        self.parallel = parallel if parallel is not None and parallel.world > 1 else None
        if self.parallel is not None:
            self.parallel.check_group()
        sliced = getattr(type(twin), "decoder_rank", None)  # a twin of one rank's slice (models.tensor_parallel)
        here = (self.parallel.rank, self.parallel.world) if self.parallel is not None else None
        if sliced is not None and tuple(sliced) != here:
            raise ValueError(f"DecodeEngine: the twin holds tensor-parallel rank {sliced[0]} of {sliced[1]}'s slice of "
                             f"the model; build the engine on that rank (parallel=TensorParallel({sliced[0]}, "
                             f"{sliced[1]}, ...), or inside its TensorParallel.active())")
        # The whole model's sizes, and those this process runs: a tensor-parallel rank's own heads and vocabulary.
        self.spec: DecoderSpec = whole_spec(spec, sliced[1]) if sliced is not None else spec
        self._local = local_spec(self.spec, self.parallel.world) if self.parallel is not None else spec
        self.device = _one_device(weights)
        self.dtype = weights.dtype
        if self.parallel is not None and sliced is None:
            weights = shard_weights(weights, spec, self.parallel)
        self.kernels: KernelSet = kernels if kernels is not None else default_kernels(self.dtype, self.device)
        chosen = kernels is not None
        if graph and self.device.type != "cuda":
            raise ValueError(f"DecodeEngine: graph=True captures CUDA graphs, which need the weights on a CUDA "
                             f"device; they are on {self.device} (pass graph=None or False)")
        self._graph_wanted = self.device.type == "cuda" if graph is None else bool(graph)
        self._graph_failure: str | None = None
        self.stats = EngineStats()
        self._source = _bound_maps(twin)
        pinned = self.device.type == "cuda"
        with torch.inference_mode(False):  # ordinary tensors even when built under inference_mode
            self.weights: PackedDecoder = pack_decoder(weights)
        try:
            self.kernels.prepare(self._local, self.weights, self.dtype, self.device)
        except (RuntimeError, OSError) as error:  # a BuildError, a missing compiler
            if chosen:
                raise
            self.kernels = _torch_instead(self.kernels.name, error, stacklevel=3)
        if self.parallel is not None:  # the set built for the rank's sizes, its collectives added
            self.kernels = ParallelKernels(self.kernels, self.parallel)
        with torch.inference_mode(False):
            # A step's inputs, one 16-byte row each (token, position, context), copied from host staging rows.
            self._inputs = torch.zeros((3, STEP_WIDTH), dtype=torch.int32, device=self.device)
            self._staging = torch.zeros((3, STEP_WIDTH), dtype=torch.int32, pin_memory=pinned)
            self._decode = _Activations.allocate(self._local, self.weights, 1, 1, self.dtype, self.device,
                                                  self.spec.vocab)
            # Greedy decoding's result (token, finite) on the device, and its two host rows (see greedy).
            self._greedy_result = torch.zeros(2, dtype=torch.int64, device=self.device)
            self._greedy_host = torch.zeros((2, 2), dtype=torch.int64, pin_memory=pinned)
        self._staging_np = self._staging.numpy()
        self._staged = torch.cuda.Event() if pinned else None
        self.capacity = 0
        self.length = 0
        self._kv = torch.empty(0)
        self._graph: torch.cuda.CUDAGraph | None = None
        self._graph_addresses: tuple[int, ...] = ()
        # Greedy decoding's two graphs (see greedy) and their host result rows (token, finite), pinned.
        self._greedy_graphs: tuple[torch.cuda.CUDAGraph, torch.cuda.CUDAGraph] | None = None
        self._greedy_addresses: tuple[int, ...] = ()
        self.resize(capacity)

    # -- state ----------------------------------------------------------------------------------------
    @property
    def caches(self) -> tuple[tuple[torch.Tensor, torch.Tensor], ...]:
        """Each layer's (keys, values), (capacity, kv_heads, head_dim) views of the engine's own cache (a
        tensor-parallel rank's: its own key/value heads).

        The first ``length`` positions are meaningful. They are the engine's buffers, updated in place by
        every step: copy them to keep a state.
        """
        return tuple((self._kv[i, 0], self._kv[i, 1]) for i in range(self._kv.shape[0]))

    @property
    def graph_status(self) -> str:
        """``captured``, ``not captured yet``, ``off`` (eager steps by choice or on a CPU) or ``eager: <why>``."""
        if self._graph_failure is not None:
            return f"eager: {self._graph_failure}"
        if not self._graph_wanted:
            return "off"
        captured = self._graph is not None or self._greedy_graphs is not None
        return "captured" if captured else "not captured yet"

    @property
    def decode_graph(self) -> torch.cuda.CUDAGraph | None:
        """The CUDA graph :meth:`decode` replays (captured by the first decode on a CUDA device), to time or profile
        the step alone; None before that, and where steps run eagerly.

        A replay runs the last decode's step again (same token, same position: it rewrites the same cache entry)
        without decode's host work, and leaves ``length`` and ``stats`` alone. It reads and writes the engine's
        buffers: replay it only while the engine lives and until a ``resize``.
        """
        return self._graph

    @property
    def greedy_graph(self) -> torch.cuda.CUDAGraph | None:
        """The CUDA graph of :meth:`greedy`'s step (the one copying its result to host row 0; captured by the first
        greedy decoding on a CUDA device), to time or profile it alone; None before that, and where steps run
        eagerly.

        Each replay decodes the token its last step chose at the next position, as greedy's own replays do: it
        advances the engine's device inputs (position and context + 1, so at most the capacity's spare positions
        of replays) but not ``length`` or ``stats``. Replay it only while the engine lives and until a ``resize``.
        """
        return self._greedy_graphs[0] if self._greedy_graphs is not None else None

    def resize(self, capacity: int) -> None:
        """Hold ``capacity`` positions from now on: a new, empty cache (``length`` 0); the graph is captured again."""
        if isinstance(capacity, bool) or not isinstance(capacity, int):
            raise TypeError(f"DecodeEngine: capacity must be an integer (positions the cache holds), got "
                            f"{type(capacity).__name__} {capacity!r}")
        limit = self.spec.max_positions
        if not 1 <= capacity <= limit:
            raise ValueError(f"DecodeEngine: capacity {capacity} must lie in [1, {limit}] ({limit} is the model's "
                             "max_position_embeddings)")
        s = self._local
        self._kv = torch.empty(0)  # the old cache goes before the new one is made
        with torch.inference_mode(False):
            self._kv = torch.zeros((len(self.weights.layers), 2, capacity, s.kv_heads, s.head_dim), dtype=self.dtype,
                                   device=self.device)
        self.capacity = capacity
        self.length = 0

    def reset(self) -> None:
        """Forget every cached position (``length`` 0); the next step starts a new sequence."""
        self.length = 0

    def load_caches(self, caches: Any, length: int) -> None:
        """Copy ``caches`` (per layer (keys, values), each (capacity, kv_heads, head_dim) or with a leading batch
        axis of 1, as the semantic Module holds them) into the engine's cache, holding ``length`` positions. A
        tensor-parallel rank takes its own key/value heads of caches of the whole model's.

        The given tensors are read, never kept or changed.
        """
        if not 0 <= length <= self.capacity:
            raise ValueError(f"DecodeEngine.load_caches: length {length} must lie in [0, {self.capacity}] (the "
                             "engine's capacity)")
        if len(caches) != self._kv.shape[0]:
            raise ValueError(f"DecodeEngine.load_caches: {len(caches)} (keys, values) pairs given, the model has "
                             f"{self._kv.shape[0]} layers")
        want = tuple(self._kv.shape[2:])
        whole = (want[0], self.spec.kv_heads, want[2])  # a tensor-parallel rank takes its heads of the whole cache
        for i, pair in enumerate(caches):
            for j, t in enumerate(pair):
                got = tuple(t.shape[1:]) if t.dim() == len(want) + 1 and t.shape[0] == 1 else tuple(t.shape)
                if got == whole and whole != want:
                    assert self.parallel is not None
                    t = t.reshape(whole).narrow(1, self.parallel.rank * want[1], want[1])
                elif got != want:
                    raise ValueError(f"DecodeEngine.load_caches: layer {i} {('keys', 'values')[j]} is "
                                     f"{tuple(t.shape)}; the engine holds {want} (capacity, kv_heads, head_dim)")
                self._kv[i, j].copy_(t.reshape(want))
        self.length = length

    def built_from(self, twin: Any) -> bool:
        """True when ``twin`` still holds the weights this engine was built from (it was not loaded again)."""
        maps = _bound_maps(twin)
        return len(maps) == len(self._source) and all(a is b for a, b in zip(maps, self._source))

    # -- steps ----------------------------------------------------------------------------------------
    def prefill(self, ids: Any, *, all_logits: bool = False) -> torch.Tensor:
        """Run the tokens ``ids`` (1-D) at positions ``length ..``; returns the logits of the last one (1, vocab),
        or of every one (M, vocab) when ``all_logits``.

        Several tokens run eagerly (the kernel set's slots: attention over the cache); a single token runs the
        decode step (the CUDA graph where there is one). The returned tensor of a single token is the engine's
        buffer, valid until the next step.
        """
        ids = self._checked_ids(ids)
        count = int(ids.shape[0])
        if count == 1:
            return self.decode(int(ids[0]))
        self._check_room(count)
        with torch.no_grad(), _on(self.device):
            act = _Activations.allocate(self._local, self.weights, count, count if all_logits else 1, self.dtype,
                                        self.device, self.spec.vocab)
            at = self._positions(0, self.length, count)
            self.kernels.embed(ids.to(self.device), self.weights.embed, act.x)
            # A RoPE whose frequencies depend on the sequence rotates a forward by its own last position.
            hook = self.weights.forward_tables
            self._layers_and_head(act, at, hook(self.length + count) if hook is not None else None)
        self.length += count
        self.stats.prefills += 1
        return act.logits

    def decode(self, token: int) -> torch.Tensor:
        """Run one token at position ``length``; returns its logits (1, vocab), the engine's buffer (valid until
        the next step)."""
        token = self._checked_token(token)
        self._check_room(1)
        with torch.no_grad(), _on(self.device):
            at = self._positions(token, self.length, 1)
            if self._graph_wanted and self._graph_failure is None:
                self._graph_step()
            else:
                self._decode_body(at)
                self.stats.eager_steps += 1
        self.length += 1
        return self._decode.logits

    def greedy(self, token: int, count: int) -> Iterator[tuple[int, bool]]:
        """Decode greedily: ``token`` at position ``length``, then each chosen token, ``count`` steps in all.

        Yields, per step, the chosen token (the first largest logit, as ``torch.argmax``) and whether the
        step's logits were all finite; ``length`` counts the steps yielded so far. On CUDA the step is a
        captured graph that also picks the token and feeds it to the next step on the device, and the next
        step is queued before the host reads this one's result, so the GPU never waits for the host between
        tokens. Stop early by leaving the loop (closing the generator). After a step whose logits were not all
        finite the run ends; :meth:`decode` at ``length - 1`` with that step's input token recomputes them.
        """
        token = self._checked_token(token)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"DecodeEngine.greedy: count must be an integer >= 0, got {count!r}")
        self._check_room(count)
        if count and self._graph_wanted and self._graph_failure is None:
            with torch.no_grad(), _on(self.device):
                self._positions(token, self.length, 1)
                self._capture_greedy()
        if not count or self._greedy_graphs is None:
            for _ in range(count):  # eager steps: on a CPU, or after a failed capture
                chosen, finite = greedy_choice(self.decode(token)[-1])
                yield chosen, finite
                if not finite:
                    return
                token = chosen
            return
        graphs, events, start = self._greedy_graphs, (torch.cuda.Event(), torch.cuda.Event()), self.length
        with _on(self.device):
            graphs[0].replay()
            events[0].record()
        for i in range(count):
            if i + 1 < count:  # the next step, queued before this one's result is read
                with _on(self.device):
                    graphs[(i + 1) % 2].replay()
                    events[(i + 1) % 2].record()
            events[i % 2].synchronize()
            chosen, finite = self._greedy_host[i % 2].tolist()
            self.length = start + i + 1
            self.stats.replays += 1
            yield int(chosen), bool(finite)
            if not finite:
                return

    def _greedy_body(self, slot: int) -> None:
        """A decode step that also chooses its token (the kernel set's ``greedy_head``: the argmax, whether every
        logit is finite, the token fed to the next step and the position advanced, on the device), then
        (token, finite) copied to host row ``slot``."""
        self._decode_layers(StepPositions(self._inputs[1, :1], self._inputs[2, :1], None))
        act, w = self._decode, self.weights
        self.kernels.greedy_head(act.x, w.final_norm, w.lm_head, act.logits, self._greedy_result, self._inputs,
                                 self.spec.eps)
        self._greedy_host[slot].copy_(self._greedy_result, non_blocking=True)

    def _capture_greedy(self) -> None:
        """Capture greedy decoding's two graphs (host rows 0 and 1) unless they hold: a warm-up step first,
        undone on the inputs (the cache entry it writes is the one the first replay writes again)."""
        if self._greedy_graphs is not None and self._greedy_addresses == self._addresses():
            return
        self._greedy_graphs = None
        staged = self._inputs.clone()
        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            self._greedy_body(0)  # warm-up: kernels loaded, workspaces made
            self._inputs.copy_(staged)
        graphs = []
        for slot in (0, 1):
            graph = _captured(stream, lambda slot=slot: self._greedy_body(slot))
            if isinstance(graph, BaseException):
                self._fall_back(graph)
                return
            graphs.append(graph)
        torch.cuda.current_stream(self.device).wait_stream(stream)
        self._greedy_graphs = (graphs[0], graphs[1])
        self._greedy_addresses = self._addresses()
        self.stats.captures += 2

    # -- internals ------------------------------------------------------------------------------------
    def _positions(self, token: int, length: int, count: int) -> StepPositions:
        """Fill the step's device inputs (token, position, context) and describe them for the slots."""
        if self._staged is not None:
            self._staged.synchronize()  # the previous copy has read the staging rows
        self._staging_np[:, 0] = (token, length, length + count)
        self._inputs.copy_(self._staging, non_blocking=self._staged is not None)
        if self._staged is not None:
            self._staged.record()
        return StepPositions(self._inputs[1, :1], self._inputs[2, :1], length)

    def _decode_body(self, at: StepPositions) -> None:
        self._decode_layers(at)
        self._head(self._decode)

    def _decode_layers(self, at: StepPositions) -> None:
        """The decode step's token (device input row 0) embedded and run through every layer."""
        self.kernels.embed(self._inputs[0, :1], self.weights.embed, self._decode.x)
        self._layers(self._decode, at)

    def _layers_and_head(self, act: _Activations, at: StepPositions,
                         tables: tuple[torch.Tensor, torch.Tensor] | None = None) -> None:
        self._layers(act, at, tables)
        self._head(act)

    def _head(self, act: _Activations) -> None:
        rows = act.x.shape[0]
        last = act.x[rows - act.logits.shape[0]:]
        self.kernels.head(last, self.weights.final_norm, self.weights.lm_head, act.logits, self.spec.eps)

    def _layers(self, act: _Activations, at: StepPositions,
                tables: tuple[torch.Tensor, torch.Tensor] | None = None) -> None:
        """Every layer on ``act``; ``tables``: the rotary tables of this forward where they are not the step
        table (a longrope / dynamic NTK prefill past the switch)."""
        k, s, w = self.kernels, self.spec, self.weights
        cos, sin = tables if tables is not None else (w.cos, w.sin)
        rows = act.x.shape[0]
        for i, layer in enumerate(w.layers):
            cache_k, cache_v = self._kv[i, 0], self._kv[i, 1]
            k.norm_linear(act.x, layer.input_norm, layer.qkv, layer.qkv_bias, act.qkv, s.eps)
            k.rope_cache(act.qkv, layer.q_norm, layer.k_norm, cos, sin, act.q, cache_k, cache_v, s.eps, at)
            k.attention(act.q, cache_k, cache_v, act.attn, s.scale, at)
            k.linear_residual(act.attn.view(rows, -1), layer.o_proj, act.x, act.x)
            if layer.routed:
                k.moe(act.x, layer.post_norm, layer.router, layer.experts_gate, layer.experts_up, layer.experts_down,
                      act.x, s.eps, s.experts_per_token, s.normalize_experts)
            else:
                k.norm_swiglu(act.x, layer.post_norm, layer.gate_up, act.act, s.eps)
                k.linear_residual(act.act, layer.down_proj, act.x, act.x)

    def _addresses(self) -> tuple[int, ...]:
        """Where the buffers a captured graph reads and writes live; a change means capture again."""
        return (self._kv.data_ptr(), self._inputs.data_ptr(), self._decode.x.data_ptr(),
                self._decode.logits.data_ptr())

    def _graph_step(self) -> None:
        if self._graph is not None and self._graph_addresses == self._addresses():
            self._graph.replay()
            self.stats.replays += 1
            return
        self._graph = None
        # The step runs for real on a side stream first (warm-up: this token's result), then is captured.
        graph_mode = StepPositions(self._inputs[1, :1], self._inputs[2, :1], None)
        stream = torch.cuda.Stream(self.device)
        current = torch.cuda.current_stream(self.device)
        stream.wait_stream(current)
        with torch.cuda.stream(stream):
            self._decode_body(graph_mode)
        current.wait_stream(stream)
        self.stats.eager_steps += 1
        torch.cuda.synchronize(self.device)
        graph = _captured(stream, lambda: self._decode_body(graph_mode))
        if isinstance(graph, BaseException):
            self._fall_back(graph)
            return
        self._graph = graph
        self._graph_addresses = self._addresses()
        self.stats.captures += 1

    def _fall_back(self, error: BaseException) -> None:
        text = " ".join(str(error).split()) or type(error).__name__
        reason = f"CUDA graph capture failed ({type(error).__name__}: {text[:300]})"
        self._graph_failure = reason
        warnings.warn(f"DecodeEngine: {reason}; decoding with eager steps from now on", RuntimeWarning,
                      stacklevel=4)

    def _check_room(self, count: int) -> None:
        if self.length + count > self.capacity:
            raise ValueError(
                f"DecodeEngine: position {self.length + count - 1} is past the capacity of {self.capacity} positions "
                f"(0..{self.capacity - 1}); build the engine (or resize it) with a capacity for the prompt and every "
                f"new token (at most {self.spec.max_positions}, the model's max_position_embeddings)"
            )

    def _checked_token(self, token: Any) -> int:
        if isinstance(token, torch.Tensor):
            if token.numel() != 1:
                raise ValueError(f"DecodeEngine.decode takes one token id, got a tensor of shape {tuple(token.shape)}")
            token = int(token.reshape(()))
        if isinstance(token, bool) or not isinstance(token, (int, np.integer)):
            raise TypeError(f"DecodeEngine.decode takes a token id (an integer), got {type(token).__name__}")
        if not 0 <= token < self.spec.vocab:
            raise ValueError(f"DecodeEngine: token id {token} is outside the vocabulary [0, {self.spec.vocab})")
        return int(token)

    def _checked_ids(self, ids: Any) -> torch.Tensor:
        ids = torch.as_tensor(ids)
        if ids.dim() != 1 or ids.numel() == 0 or ids.dtype.is_floating_point or ids.dtype == torch.bool:
            raise ValueError(f"DecodeEngine.prefill takes a non-empty 1-D tensor of token ids, got "
                             f"{ids.dtype} of shape {tuple(ids.shape)}")
        low, high = int(ids.min()), int(ids.max())
        if low < 0 or high >= self.spec.vocab:
            bad = low if low < 0 else high
            raise ValueError(f"DecodeEngine: token id {bad} is outside the vocabulary [0, {self.spec.vocab})")
        return ids.to(torch.int64)


def _captured(stream: torch.cuda.Stream, body: Callable[[], None]) -> torch.cuda.CUDAGraph | BaseException:
    """``body`` captured on ``stream`` as a CUDA graph, or the exception that made its capture fail.

    Captured by hand rather than with ``torch.cuda.graph()``: when capture fails, ending it raises too, and that
    context manager would then leave the side stream current; here the stream context always closes.
    """
    graph = torch.cuda.CUDAGraph()
    failure: BaseException | None = None
    with torch.cuda.stream(stream):
        graph.capture_begin(capture_error_mode="thread_local")
        try:
            body()
        except Exception as error:  # noqa: BLE001 - any failure of capture means: decode eagerly
            failure = error
        try:
            graph.capture_end()
        except Exception as error:  # noqa: BLE001
            failure = failure or error
    torch.cuda.synchronize(stream.device)
    return failure if failure is not None else graph


class _on:
    """``with _on(device)``: make a CUDA device current for the block (nothing on a CPU)."""

    def __init__(self, device: torch.device) -> None:
        self._guard = torch.cuda.device(device) if device.type == "cuda" else None

    def __enter__(self) -> None:
        if self._guard is not None:
            self._guard.__enter__()

    def __exit__(self, *exc: object) -> None:
        if self._guard is not None:
            self._guard.__exit__(*exc)


def _one_device(weights: DecoderWeights) -> torch.device:
    """The one device and dtype every weight shares; a split is refused naming what sits where."""
    tensors = weights.tensors()
    first = weights.device
    for name, t in tensors.items():
        if t.device != first:
            raise ValueError(f"DecodeEngine: the weights are on more than one device (embed on {first}, {name} on "
                             f"{t.device}); load the twin onto one device")
    floats = {name: t.dtype for name, t in tensors.items() if name not in ("cos", "sin")}
    odd = next((n for n, dt in floats.items() if dt != weights.dtype), None)
    if odd is not None:
        raise ValueError(f"DecodeEngine: embed is {weights.dtype} but {odd} is {floats[odd]}; the engine runs a model "
                         "whose weights share one dtype")
    return first


def _bound_maps(twin: Any) -> tuple[Any, ...]:
    """Every node's bound-weight mapping, parents first: a load binds new ones, so they tell a twin loaded again."""
    maps = [bound_weights(twin)]
    for child in twin.modules:
        maps.extend(_bound_maps(child))
    return tuple(maps)

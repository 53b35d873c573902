"""The decode engine's kernel slots: what each kernel of a step computes, and the shapes it is called with.

A :class:`KernelSet` fills every slot. The engine's control flow (:mod:`.decode_engine`) only ever calls these
methods, in a fixed order, on buffers it owns; so a slot is swapped for a compiled (``tilefoundry.jit``) or any
other kernel by overriding one method of a KernelSet (usually of :class:`~.torch_kernels.TorchKernels`) and handing
that set to the engine, without touching the engine.

Conventions every slot follows:

* M is the number of tokens of the step (1 when decoding). Activations are contiguous, in the model's dtype.
* A slot writes its results into the output tensors it is given and returns nothing. An output may be an input
  as well where a slot says so (the residual stream is updated in place).
* Linear weights keep ``nn.Linear``'s (out features, in features) layout, packed as :mod:`.packed` says.
* The KV cache of a layer is two (capacity, kv_heads, head_dim) tensors, updated in place.
* Positions come as :class:`StepPositions`: device tensors a CUDA graph reads on every replay, and the same
  number on the host when the step runs eagerly. While a graph is captured ``length`` is None and a slot must
  read the device tensors (and must not synchronise with the host: no ``.item()``, no data-dependent shapes).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from .decoder import DecoderSpec
    from .packed import PackedDecoder

# Columns of a step's inputs (DecodeEngine: one 16-byte row of int32 each for the token, the position and the context,
# the value in column 0): the ``step`` of greedy_head, which a kernel set may write in place.
STEP_WIDTH = 4

__all__ = ["STEP_WIDTH", "KernelSet", "StepPositions"]


@dataclass(frozen=True)
class StepPositions:
    """Where a step's M tokens sit: at positions ``position .. position + M - 1``.

    Attributes:
        position: (1,) int32 on the engine's device: the tokens cached before this step.
        context: (1,) int32 on the engine's device: ``position + M``, the cache entries the step's last token
            attends to (the cache holds the step's own keys and values by then).
        length: ``position`` on the host when the step runs eagerly; None while a CUDA graph is captured.
    """

    position: torch.Tensor
    context: torch.Tensor
    length: int | None

    def rows(self, count: int) -> torch.Tensor:
        """The int64 positions of the step's ``count`` tokens, on the device (graph-safe either way)."""
        device = self.position.device
        if self.length is not None:
            return torch.arange(self.length, self.length + count, device=device)
        return self.position.long() + torch.arange(count, device=device)


class KernelSet(ABC):
    """Every kernel slot of a decode step. Subclass it (or a filled set) and override what you replace.

    A step calls, per layer: ``norm_linear`` (q/k/v), ``rope_cache``, ``attention``, ``linear_residual``
    (o_proj), then ``norm_swiglu`` and ``linear_residual`` (down) for a dense layer or ``moe`` for a routed
    one; ``embed`` before the layers and ``head`` after them (``greedy_head`` when the engine decodes greedily).
    """

    name = "kernels"
    """How the set is named in messages and status lines."""

    def prepare(  # noqa: B027 - an optional hook: most sets build nothing
            self, spec: DecoderSpec, weights: PackedDecoder, dtype: torch.dtype, device: torch.device) -> None:
        """Called once by the engine that runs the set, before any slot, with the model it runs: a set whose
        kernels are built for a model's shapes builds them here. This default does nothing."""

    @abstractmethod
    def embed(self, ids: torch.Tensor, table: torch.Tensor, out: torch.Tensor) -> None:
        """``out`` (M, hidden) = rows ``ids`` (M,) int32 or int64 of ``table`` (vocab, hidden)."""

    @abstractmethod
    def norm_linear(self, x: torch.Tensor, norm: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                    out: torch.Tensor, eps: float) -> None:
        """``out`` (M, N) = rms_norm(x, norm, eps) @ weight.T (+ bias): the packed q/k/v projection."""

    @abstractmethod
    def rope_cache(self, qkv: torch.Tensor, q_norm: torch.Tensor | None, k_norm: torch.Tensor | None,
                   cos: torch.Tensor, sin: torch.Tensor, q_out: torch.Tensor, cache_k: torch.Tensor,
                   cache_v: torch.Tensor, eps: float, at: StepPositions) -> None:
        """Split ``qkv`` (M, (H + 2 KV) * D) into q, k, v heads; apply the per-head RMSNorms when ``q_norm`` /
        ``k_norm`` are given; rotate q and k by rows ``at.rows(M)`` of ``cos`` / ``sin`` (max_positions, D);
        write q into ``q_out`` (M, H, D) and k, v into rows ``at.rows(M)`` of ``cache_k`` / ``cache_v``."""

    @abstractmethod
    def attention(self, q: torch.Tensor, cache_k: torch.Tensor, cache_v: torch.Tensor, out: torch.Tensor,
                  scale: float, at: StepPositions) -> None:
        """``out`` (M, H, D): token m (at position p + m) attends, with ``scale``, to cache rows [0, p + m];
        grouped-query (head h reads KV head h // (H / KV)). The cache already holds the step's keys."""

    @abstractmethod
    def linear_residual(self, x: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor,
                        out: torch.Tensor) -> None:
        """``out`` (M, N) = residual + x @ weight.T; ``out`` may be ``residual`` (updated in place)."""

    @abstractmethod
    def norm_swiglu(self, x: torch.Tensor, norm: torch.Tensor, gate_up: torch.Tensor, out: torch.Tensor,
                    eps: float) -> None:
        """``out`` (M, I) = silu(g) * u where g_j, u_j are columns 2j, 2j + 1 of rms_norm(x) @ gate_up.T."""

    @abstractmethod
    def moe(self, x: torch.Tensor, norm: torch.Tensor, router: torch.Tensor, experts_gate: torch.Tensor,
            experts_up: torch.Tensor, experts_down: torch.Tensor, out: torch.Tensor, eps: float, top_k: int,
            normalize: bool) -> None:
        """``out`` (M, hidden) = x + the routed SwiGLU experts of h = rms_norm(x): softmax(h @ router.T) in f32,
        the ``top_k`` most probable experts (their probabilities renormalised when ``normalize``) weighting
        down_e(silu(gate_e h) * up_e h). ``out`` may be ``x``."""

    @abstractmethod
    def head(self, x: torch.Tensor, norm: torch.Tensor, weight: torch.Tensor, out: torch.Tensor, eps: float) -> None:
        """``out`` (R, vocab) = rms_norm(x, norm, eps) @ weight.T for the R rows of ``x``."""

    def greedy_head(self, x: torch.Tensor, norm: torch.Tensor, weight: torch.Tensor, logits: torch.Tensor,
                    result: torch.Tensor, step: torch.Tensor, eps: float) -> None:
        """The head of one token (``x`` (1, hidden)) that also picks it greedily, for the next step on the device:
        ``logits`` (1, vocab) as :meth:`head` makes them; ``result`` (2,) int64 = (the first largest logit's index,
        as ``torch.argmax``; 1 if every logit is finite, else 0); and ``step`` (3, STEP_WIDTH) int32, the next step's
        inputs, gets the token in ``[0, 0]`` and one more in ``[1, 0]`` (position) and ``[2, 0]`` (context).

        This default runs :meth:`head` and torch; a set overrides it to fuse the choice into the head's kernel (a
        tensor-parallel rank's set, :class:`~.parallel_kernels.ParallelKernels`, writes only its own columns of
        ``logits``: greedy decoding reads ``result``).
        """
        self.head(x, norm, weight, logits, eps)
        row = logits[-1]
        chosen = torch.argmax(row)
        result.copy_(torch.stack((chosen, torch.isfinite(row).all().long())))
        step[0, 0].copy_(chosen)
        step[1:, 0].add_(1)

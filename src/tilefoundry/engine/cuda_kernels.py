"""The hand-written CUDA kernels in the slots they fill: what the engine runs on an NVIDIA GPU.

:class:`CudaKernels` puts the library's kernels (:func:`~.library.load_kernels`) into the slots of a decode step:
RMSNorm fused into the packed q/k/v GEMV and into the interleaved gate/up GEMV with its SwiGLU epilogue, q/k norm
+ RoPE + the KV-cache write in one kernel, split-context decode attention reading the position on the device, the
o_proj and down GEMVs adding into the hidden state in place, and the final norm fused into the lm_head GEMV (with the
greedy choice, the finiteness check and the next step's inputs in its epilogue when the engine decodes greedily). The
kernels take bf16 and at most 16 tokens a step; anything else (a long prefill chunk, a q/k/v bias, routed experts,
the embedding gather) runs the torch slot it inherits from :class:`~.torch_kernels.TorchKernels`.

Every kernel launches on the current stream and reads positions from device memory, so the whole decode step is
captured in one CUDA graph. The attention kernel keeps a workspace per step shape, made on the first (eager) step
of that shape, before any capture.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .decoder import DecoderSpec
from .slots import StepPositions
from .torch_kernels import TorchKernels
from .workspace import argmax_workspace, attention_workspace

__all__ = ["CudaKernels"]

MAX_TOKENS = 16
"""The most tokens a step of the hand-written kernels takes (a longer prefill chunk runs the torch slots)."""


class CudaKernels(TorchKernels):
    """The engine's hand-written CUDA kernels where they apply (bf16, at most 16 tokens), torch elsewhere.

    Args:
        library: the loaded kernel library (default: :func:`~.library.load_kernels`, which builds it with nvcc
            once and caches it on disk).
    """

    name = "cuda"

    def __init__(self, library: Any = None) -> None:
        if library is None:
            from .library import load_kernels

            library = load_kernels()
        self.lib = library
        self._workspaces: dict[tuple[Any, ...], torch.Tensor] = {}

    @staticmethod
    def unsupported(spec: DecoderSpec, dtype: torch.dtype, device: torch.device) -> str | None:
        """Why these kernels cannot run a model of ``spec`` in ``dtype`` on ``device``; None when they can."""
        if device.type != "cuda":
            return f"they run on CUDA devices, the weights are on {device}"
        if dtype != torch.bfloat16:
            return f"they are built for bf16 weights, these are {dtype}"
        if spec.head_dim not in (64, 128):
            return f"attention is built for head_dim 64 and 128, the model's is {spec.head_dim}"
        if spec.heads // spec.kv_heads > 8:
            return f"attention takes at most 8 query heads per KV head, the model has {spec.heads // spec.kv_heads}"
        if spec.hidden % 8:
            return f"the GEMVs read 8 bf16 values at a time; hidden size {spec.hidden} is no multiple of 8"
        return None

    @staticmethod
    def _fits(x: torch.Tensor) -> bool:
        return x.dtype == torch.bfloat16 and x.shape[0] <= MAX_TOKENS and x.shape[-1] % 8 == 0

    def norm_linear(self, x: torch.Tensor, norm: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                    out: torch.Tensor, eps: float) -> None:
        if bias is not None or not self._fits(x):
            super().norm_linear(x, norm, weight, bias, out, eps)
            return
        self.lib.rmsnorm_gemv(x, norm, weight, out, eps, 0)

    def rope_cache(self, qkv: torch.Tensor, q_norm: torch.Tensor | None, k_norm: torch.Tensor | None,
                   cos: torch.Tensor, sin: torch.Tensor, q_out: torch.Tensor, cache_k: torch.Tensor,
                   cache_v: torch.Tensor, eps: float, at: StepPositions) -> None:
        if not self._fits(qkv):
            super().rope_cache(qkv, q_norm, k_norm, cos, sin, q_out, cache_k, cache_v, eps, at)
        elif q_norm is not None and k_norm is not None:
            self.lib.qk_norm_rope_cache(qkv, q_norm, k_norm, cos, sin, at.position, q_out, cache_k, cache_v, eps)
        else:
            self.lib.rope_cache(qkv, cos, sin, at.position, q_out, cache_k, cache_v)

    def attention(self, q: torch.Tensor, cache_k: torch.Tensor, cache_v: torch.Tensor, out: torch.Tensor,
                  scale: float, at: StepPositions) -> None:
        if not self._fits(q):
            super().attention(q, cache_k, cache_v, out, scale, at)
            return
        m, heads, d = q.shape
        self.lib.decode_attention(q, cache_k, cache_v, at.position, out,
                                  self._workspace(m, heads, cache_k.shape[1], d, q.device), scale, 0)

    def linear_residual(self, x: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor,
                        out: torch.Tensor) -> None:
        if not self._fits(x):
            super().linear_residual(x, weight, residual, out)
            return
        self.lib.gemv_residual(x, weight, residual, out, 0)

    def norm_swiglu(self, x: torch.Tensor, norm: torch.Tensor, gate_up: torch.Tensor, out: torch.Tensor,
                    eps: float) -> None:
        if not self._fits(x):
            super().norm_swiglu(x, norm, gate_up, out, eps)
            return
        self.lib.rmsnorm_gemv_swiglu(x, norm, gate_up, out, eps, 0)

    def head(self, x: torch.Tensor, norm: torch.Tensor, weight: torch.Tensor, out: torch.Tensor, eps: float) -> None:
        if not self._fits(x):
            super().head(x, norm, weight, out, eps)
            return
        self.lib.rmsnorm_gemv(x, norm, weight, out, eps, 0)

    def greedy_head(self, x: torch.Tensor, norm: torch.Tensor, weight: torch.Tensor, logits: torch.Tensor,
                    result: torch.Tensor, step: torch.Tensor, eps: float) -> None:
        if not self._fits(x) or x.shape[0] != 1:
            super().greedy_head(x, norm, weight, logits, result, step, eps)
            return
        ws = self._kept(("greedy", _index(x.device)), lambda: argmax_workspace(1, x.device))
        self.lib.rmsnorm_gemv_greedy(x, norm, weight, logits, result, step, ws, eps)

    def _workspace(self, tokens: int, heads: int, kv_heads: int, head_dim: int, device: torch.device) -> torch.Tensor:
        """The attention workspace of a step shape (see :meth:`_kept`)."""
        return self._kept((tokens, heads, kv_heads, head_dim, _index(device)),
                          lambda: attention_workspace(self.lib, tokens, heads, kv_heads, head_dim, device=device))

    def _kept(self, key: tuple[Any, ...], make: Callable[[], torch.Tensor]) -> torch.Tensor:
        """The workspace under ``key``, made on its first (eager) step and kept (zeroed by every launch, so a graph
        replays it)."""
        ws = self._workspaces.get(key)
        if ws is None:
            with torch.inference_mode(False):
                ws = make()
            self._workspaces[key] = ws
        return ws


def _index(device: torch.device) -> int:
    """The CUDA device's ordinal, -1 where the device names none."""
    return device.index if device.index is not None else -1

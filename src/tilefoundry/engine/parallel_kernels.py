"""ParallelKernels: a kernel set run by one rank of a tensor-parallel group, the collectives added between its slots.

Every slot runs the wrapped set's kernel on the rank's slice (:mod:`.parallel` says how the weights are split);
this set adds what makes the slices one model again:

* ``embed``: the rank's vocabulary rows hold some of the ids; each rank embeds those (zero rows for the others'),
  and an all-reduce adds the ranks' rows (exact: one rank gives each row);
* ``linear_residual`` (o_proj, down): each rank's product is a partial sum over its input columns; rank 0 adds it
  to the residual, every other rank writes it alone, and an all-reduce adds them (so the residual counts once);
* ``moe``: the wrapped slot adds its experts' partial output to the residual on every rank (rounded there as the
  slot rounds it: its norm reads the residual, so it cannot be left out); the all-reduce of those sums, less the
  residual counted by the other N - 1 ranks, is the residual plus the whole output, summed and subtracted in
  float and rounded once more;
* ``head``: each rank's logits are its vocabulary rows' columns, all-gathered into the whole row;
* ``greedy_head``: each rank's (largest logit, its index, all finite) of its own columns, gathered (three numbers
  a rank, not the row): the largest wins, the lowest index among equals and the first NaN as ``torch.argmax``
  picks them; ``logits`` then holds only the rank's own columns of the row (greedy decoding never reads it).

q/k/v, RoPE with the cache write, attention and gate/up with SwiGLU need nothing: a rank's heads and intermediate
columns are its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from .parallel import TensorParallel
from .slots import KernelSet, StepPositions
from .workspace import Scratches

if TYPE_CHECKING:
    from .decoder import DecoderSpec
    from .packed import PackedDecoder

__all__ = ["ParallelKernels"]


class ParallelKernels(KernelSet):
    """The slots of ``inner`` on rank ``tp.rank``'s slices, with the collectives of a tensor-parallel step.

    Args:
        inner: the kernel set each slot runs (compiled, torch); built for the rank's shapes by ``prepare``.
        tp: the rank and its group.
    """

    def __init__(self, inner: KernelSet, tp: TensorParallel) -> None:
        if isinstance(inner, ParallelKernels):
            raise TypeError("ParallelKernels wraps a single-device kernel set, not another ParallelKernels")
        self.inner = inner
        self.tp = tp
        self.name = f"{inner.name}, tensor parallel over {tp.world} ranks"
        self._scratches = Scratches()

    def prepare(self, spec: DecoderSpec, weights: PackedDecoder, dtype: torch.dtype, device: torch.device) -> None:
        """Build the wrapped set for the rank's own sizes (``spec`` is the rank's: its heads and vocabulary rows)."""
        self.inner.prepare(spec, weights, dtype, device)

    def embed(self, ids: torch.Tensor, table: torch.Tensor, out: torch.Tensor) -> None:
        rows = table.shape[0]
        local = ids - self.tp.rank * rows
        mine = (local >= 0) & (local < rows)
        self.inner.embed(local.clamp(0, rows - 1), table, out)
        out.masked_fill_(~mine[:, None], 0)
        self.tp.all_reduce(out, "embedding")

    def norm_linear(self, x: torch.Tensor, norm: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                    out: torch.Tensor, eps: float) -> None:
        self.inner.norm_linear(x, norm, weight, bias, out, eps)

    def rope_cache(self, qkv: torch.Tensor, q_norm: torch.Tensor | None, k_norm: torch.Tensor | None,
                   cos: torch.Tensor, sin: torch.Tensor, q_out: torch.Tensor, cache_k: torch.Tensor,
                   cache_v: torch.Tensor, eps: float, at: StepPositions) -> None:
        self.inner.rope_cache(qkv, q_norm, k_norm, cos, sin, q_out, cache_k, cache_v, eps, at)

    def attention(self, q: torch.Tensor, cache_k: torch.Tensor, cache_v: torch.Tensor, out: torch.Tensor,
                  scale: float, at: StepPositions) -> None:
        self.inner.attention(q, cache_k, cache_v, out, scale, at)

    def linear_residual(self, x: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor,
                        out: torch.Tensor) -> None:
        if self.tp.rank != 0:  # the residual is rank 0's to add
            if out.data_ptr() == residual.data_ptr():
                out.zero_()
            else:
                residual = self._scratches.get(tuple(residual.shape), residual).zero_()
        self.inner.linear_residual(x, weight, residual, out)
        self.tp.all_reduce(out, "o_proj / down projection")

    def norm_swiglu(self, x: torch.Tensor, norm: torch.Tensor, gate_up: torch.Tensor, out: torch.Tensor,
                    eps: float) -> None:
        self.inner.norm_swiglu(x, norm, gate_up, out, eps)

    def moe(self, x: torch.Tensor, norm: torch.Tensor, router: torch.Tensor, experts_gate: torch.Tensor,
            experts_up: torch.Tensor, experts_down: torch.Tensor, out: torch.Tensor, eps: float, top_k: int,
            normalize: bool) -> None:
        summed = self._scratches.get(tuple(x.shape), x)  # x + this rank's part (out may be x: x is read after)
        self.inner.moe(x, norm, router, experts_gate, experts_up, experts_down, summed, eps, top_k, normalize)
        wide = summed.float()
        self.tp.all_reduce(wide, "routed experts")
        out.copy_(wide.sub_(x.float(), alpha=self.tp.world - 1))

    def head(self, x: torch.Tensor, norm: torch.Tensor, weight: torch.Tensor, out: torch.Tensor, eps: float) -> None:
        local = self._scratches.get((out.shape[0], weight.shape[0]), out)
        self.inner.head(x, norm, weight, local, eps)
        out.copy_(torch.cat(self.tp.all_gather(local, "lm_head logits"), dim=1))

    def greedy_head(self, x: torch.Tensor, norm: torch.Tensor, weight: torch.Tensor, logits: torch.Tensor,
                    result: torch.Tensor, step: torch.Tensor, eps: float) -> None:
        rows = weight.shape[0]
        first = self.tp.rank * rows  # this rank's first vocabulary row
        local = self._scratches.get((1, rows), logits)
        self.inner.head(x, norm, weight, local, eps)
        logits[-1:, first:first + rows].copy_(local)
        row = local[0].float()
        best = torch.argmax(row)
        mine = torch.stack((row[best], (best + first).float(), torch.isfinite(row).all().float()))
        pairs = torch.stack(self.tp.all_gather(mine, "greedy choice"))  # (world, 3), in vocabulary order
        chosen = pairs[torch.argmax(pairs[:, 0]), 1].long()  # the first largest, or the first NaN
        result.copy_(torch.stack((chosen, pairs[:, 2].min().long())))
        step[0, 0].copy_(chosen)
        step[1:, 0].add_(1)

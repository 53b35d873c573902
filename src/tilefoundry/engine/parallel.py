"""Tensor parallelism of the decode engine (Megatron-style) over the ranks of one ``torch.distributed`` group.

Each rank holds a slice of every layer and runs the same step on it:

* q/k/v split by output rows, whole heads (rank r: query heads ``[r H/N, (r + 1) H/N)`` and the key/value heads
  they read, ``[r KV/N, (r + 1) KV/N)``), so attention and the KV cache are the rank's own heads;
* gate/up split by intermediate columns, o_proj and down by input columns: each rank's product is a partial sum,
  added over the ranks by one all-reduce, the residual counted once (rank 0's);
* the embedding split by vocabulary rows (a rank embeds the ids it holds, zeros elsewhere, then an all-reduce),
  the lm_head by vocabulary rows (each rank's logits gathered into the whole row);
* routed experts: the router replicated (every rank chooses the same experts), each expert split like a dense MLP.

Head counts and sizes that do not divide by the number of ranks are refused, naming them. The split lives here,
in Python: the kernels each rank runs are the single-device ones on smaller shapes (:mod:`.parallel_kernels`
wraps a kernel set with the collectives). Collectives run through ``torch.distributed`` (gloo on CPUs, NCCL on
GPUs); a rank that dies or stops answering makes the others' next collective fail after the group's timeout
with a :class:`TensorParallelError` naming the step, instead of hanging.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from .decoder import DecoderLayerWeights, DecoderSpec, DecoderWeights

__all__ = ["LAYER_SPLIT_AXES", "TensorParallel", "TensorParallelError", "active_parallel", "local_spec",
           "shard_weights", "split_size", "whole_spec"]


class TensorParallelError(RuntimeError):
    """A collective between the ranks failed: another rank died, or did not answer within the timeout."""


_ACTIVE: contextvars.ContextVar[TensorParallel | None] = contextvars.ContextVar("tilefoundry_tp", default=None)


def active_parallel() -> TensorParallel | None:
    """The tensor-parallel group engines built now split over (:meth:`TensorParallel.active`), or None."""
    return _ACTIVE.get()


@dataclass(frozen=True)
class TensorParallel:
    """This process's place in a tensor-parallel group: its ``rank`` of ``world`` ranks, in ``group`` (a
    ``torch.distributed`` process group, already initialised; None: the default group).

    ``timeout_s`` is the group's collective timeout, quoted in errors. Build it with :meth:`from_group` once
    ``torch.distributed.init_process_group`` has run.
    """

    rank: int
    world: int
    group: Any = None
    timeout_s: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.world, bool) or not isinstance(self.world, int) or self.world < 1:
            raise ValueError(f"TensorParallel: world must be a positive integer (ranks), got {self.world!r}")
        if isinstance(self.rank, bool) or not isinstance(self.rank, int) or not 0 <= self.rank < self.world:
            raise ValueError(f"TensorParallel: rank must lie in [0, {self.world}), got {self.rank!r}")

    @classmethod
    def from_group(cls, group: Any = None, timeout_s: float | None = None) -> TensorParallel:
        """This process's rank and the size of ``group`` (None: the default group), which must be initialised."""
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError("TensorParallel.from_group: torch.distributed is not initialised; call "
                               "torch.distributed.init_process_group first (tilefoundry generate --tp N does)")
        return cls(rank=dist.get_rank(group), world=dist.get_world_size(group), group=group, timeout_s=timeout_s)

    def check_group(self) -> None:
        """Refuse a group this process is not in as described: torch.distributed not initialised, or another
        rank or size than ``rank`` / ``world`` (say, a TensorParallel built by hand)."""
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            raise ValueError(f"TensorParallel(rank={self.rank}, world={self.world}): torch.distributed is not "
                             "initialised in this process; call torch.distributed.init_process_group first (or run "
                             "tilefoundry generate --tp N, which starts the ranks)")
        rank, world = dist.get_rank(self.group), dist.get_world_size(self.group)
        if (rank, world) != (self.rank, self.world):
            raise ValueError(f"TensorParallel(rank={self.rank}, world={self.world}) but this process is rank {rank} "
                             f"of {world} in its group; build it with TensorParallel.from_group()")

    @contextlib.contextmanager
    def active(self) -> Iterator[TensorParallel]:
        """``with tp.active():`` engines built inside (``generate`` builds one) split over this group."""
        token = _ACTIVE.set(self)
        try:
            yield self
        finally:
            _ACTIVE.reset(token)

    # -- collectives --------------------------------------------------------------------------------------
    def all_reduce(self, t: torch.Tensor, what: str) -> None:
        """``t`` = its sum over the ranks, in place; 16-bit values are summed in float and rounded once."""
        import torch.distributed as dist

        wide = t if t.dtype in (torch.float32, torch.float64) else t.float()
        self.collective(lambda: dist.all_reduce(wide, group=self.group), what)
        if wide is not t:
            t.copy_(wide)

    def all_gather(self, local: torch.Tensor, what: str) -> list[torch.Tensor]:
        """Every rank's ``local`` (one shape on all of them), in rank order."""
        import torch.distributed as dist

        parts = [torch.empty_like(local) for _ in range(self.world)]
        self.collective(lambda: dist.all_gather(parts, local.contiguous(), group=self.group), what)
        return parts

    def collective(self, run: Callable[[], Any], what: str) -> None:
        """``run()`` (a torch.distributed call on this group); a failure becomes a TensorParallelError naming
        this rank and ``what`` the collective was for."""
        try:
            run()
        except (RuntimeError, OSError) as error:  # gloo / NCCL: a peer gone, or the timeout passed
            text = " ".join(str(error).split())[:300]
            waited = f" (timeout {self.timeout_s:g} s)" if self.timeout_s is not None else ""
            raise TensorParallelError(
                f"tensor parallel rank {self.rank} of {self.world}: the {what} collective failed{waited}: another "
                f"rank died or stopped answering ({type(error).__name__}: {text})"
            ) from error


def split_size(what: str, size: int, world: int, name: str) -> int:
    """``size`` / ``world``; a ValueError naming ``what``'s ``name`` (a config field) when it does not divide."""
    if size % world:
        raise ValueError(f"tensor parallel over {world} ranks: {what} {name} = {size} is not a multiple of {world}; "
                         f"choose a --tp that divides it")
    return size // world


def local_spec(spec: DecoderSpec, world: int) -> DecoderSpec:
    """The sizes one rank of ``world`` runs: its query and key/value heads and its vocabulary rows."""
    heads = split_size("the model's", spec.heads, world, "num_attention_heads")
    kv_heads = split_size("the model's", spec.kv_heads, world, "num_key_value_heads")
    vocab = split_size("the model's", spec.vocab, world, "vocab_size")
    return dataclasses.replace(spec, heads=heads, kv_heads=kv_heads, vocab=vocab)


def whole_spec(local: DecoderSpec, world: int) -> DecoderSpec:
    """The whole model's sizes, from one rank's of ``world`` (the inverse of :func:`local_spec`)."""
    return dataclasses.replace(local, heads=local.heads * world, kv_heads=local.kv_heads * world,
                               vocab=local.vocab * world)


def _rows(t: torch.Tensor, rank: int, world: int, dim: int = 0) -> torch.Tensor:
    """Slice ``rank`` of ``world`` equal slices of ``t`` along ``dim``, as a tensor of its own."""
    step = t.shape[dim] // world
    return t.narrow(dim, rank * step, step).contiguous()


# The axis along which a rank holds 1/N of each split weight of a layer (DecoderLayerWeights' fields, the names
# the model families declare them under too); every other weight (norms, the router) is whole on every rank.
LAYER_SPLIT_AXES = {
    "q_proj": 0, "k_proj": 0, "v_proj": 0, "q_bias": 0, "k_bias": 0, "v_bias": 0,  # whole heads
    "o_proj": 1,  # its input columns: the rank's heads
    "gate_proj": 0, "up_proj": 0, "down_proj": 1,  # intermediate columns
    "experts_gate": 1, "experts_up": 1, "experts_down": 2,  # each expert's intermediate columns
}
# The config field a split weight's extent along its axis is (what a refusal names), for the weights whose sizes
# local_spec has not checked (it checks the heads).
_SPLIT_SIZES = {"gate_proj": "intermediate_size", "up_proj": "intermediate_size", "down_proj": "intermediate_size",
                "experts_gate": "moe_intermediate_size", "experts_up": "moe_intermediate_size",
                "experts_down": "moe_intermediate_size"}


def _shard_layer(i: int, w: DecoderLayerWeights, rank: int, world: int) -> DecoderLayerWeights:
    change = {}
    for name, axis in LAYER_SPLIT_AXES.items():
        t = getattr(w, name)
        if t is None:
            continue
        if name in _SPLIT_SIZES:
            split_size(f"layer {i}'s", t.shape[axis], world, _SPLIT_SIZES[name])
        change[name] = _rows(t, rank, world, dim=axis)
    return dataclasses.replace(w, **change)


def shard_weights(weights: DecoderWeights, spec: DecoderSpec, tp: TensorParallel) -> DecoderWeights:
    """Rank ``tp.rank``'s slice of every weight (the module docstring says which); norms, the router and the rotary
    tables whole. A tied lm_head stays the (sliced) embedding tensor."""
    local_spec(spec, tp.world)  # refuses sizes that do not divide, by name
    rank, world = tp.rank, tp.world
    embed = _rows(weights.embed, rank, world)
    tied = weights.lm_head is weights.embed
    return dataclasses.replace(
        weights, embed=embed, lm_head=embed if tied else _rows(weights.lm_head, rank, world),
        layers=tuple(_shard_layer(i, w, rank, world) for i, w in enumerate(weights.layers)))

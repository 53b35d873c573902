"""EngineStep: the decode engine's step, called like the semantic causal LM's forward, so ``check`` can compare it.

The engine keeps its own cache and updates it in place, so its step is not the spec's value-returning step.
EngineStep makes it one for a comparison: it takes exactly the inputs the semantic ``forward`` takes (what
``prepare_inputs_for_generation`` returns), loads the given caches into the engine's buffers (copies: the
given tensors are never changed), runs the step generation runs (the decode step for one token, on CUDA the
replayed CUDA graph; prefill for several) and returns the logits of every token and the new caches, shaped as
the semantic forward returns them (a tensor-parallel engine's: every rank's heads gathered, so each rank of the
group must call it)::

    step = EngineStep(DecodeEngine(twin, capacity))
    inputs = reference.prepare_inputs_for_generation(ids, start, caches)
    report = check(step, reference, inputs, expect=...)
"""

from __future__ import annotations

from typing import Any

import torch

from ..engine import DecodeEngine

__all__ = ["EngineStep"]


class EngineStep:
    """The engine's step on the semantic forward's inputs, returning ``(logits, caches)`` as it does.

    Args:
        engine: the engine to run; its capacity must equal the caches' it is given.
    """

    def __init__(self, engine: DecodeEngine) -> None:
        if not isinstance(engine, DecodeEngine):
            raise TypeError(f"EngineStep wraps a DecodeEngine, got {type(engine).__name__}")
        self.engine = engine

    def __call__(self, input_ids: torch.Tensor, pos_ids: torch.Tensor, kv_pos: torch.Tensor, cur_pos: torch.Tensor,
                 n_new: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                 caches: Any) -> tuple[torch.Tensor, tuple[tuple[torch.Tensor, torch.Tensor], ...]]:
        """Load ``caches`` holding ``cur_pos`` positions, run ``input_ids`` at ``cur_pos ..``; return
        (logits (seq, vocab), per layer (keys, values) each (1, capacity, kv_heads, head_dim))."""
        engine = self.engine
        seq, start = int(input_ids.shape[0]), int(cur_pos)
        device = engine.device
        if int(n_new) != seq:
            raise ValueError(f"EngineStep: n_new is {int(n_new)} but {seq} token ids are given; the engine runs every "
                             "token it is given")
        if not torch.equal(pos_ids.cpu(), torch.arange(start, start + seq)) or not torch.equal(
                kv_pos.cpu(), torch.arange(start + seq)):
            raise ValueError(f"EngineStep: the engine runs tokens at consecutive positions from cur_pos ({start}) "
                             f"over every earlier position; pos_ids {pos_ids.tolist()} / kv_pos of "
                             f"{kv_pos.shape[0]} positions say otherwise")
        capacity = int(caches[0][0].shape[1])
        if capacity != engine.capacity:
            raise ValueError(f"EngineStep: the caches hold {capacity} positions and the engine {engine.capacity}; "
                             "build the engine with the caches' capacity")
        if not (torch.equal(cos.to(device), engine.weights.cos) and torch.equal(sin.to(device), engine.weights.sin)):
            raise ValueError("EngineStep: the rotary tables given differ from the ones the engine was built with "
                             "(the model's own, from decoder_weights())")
        engine.load_caches(caches, start)
        if seq == 1:
            logits = engine.decode(int(input_ids[0]))
        else:
            logits = engine.prefill(input_ids, all_logits=True)
        tp = engine.parallel
        if tp is None:
            new = tuple((k.clone().unsqueeze(0), v.clone().unsqueeze(0)) for k, v in engine.caches)
        else:  # a tensor-parallel rank holds its own heads: the whole cache is every rank's, in rank order
            new = tuple(tuple(torch.cat(tp.all_gather(t, "caches"), dim=1).unsqueeze(0) for t in pair)
                        for pair in engine.caches)
        return logits.clone(), new

"""What the decode engine is held to, shared by the CPU suite (eager steps) and tests/gpu (the CUDA-graph path).

A tiny f32 Qwen3 whose positions reach past 1024; the semantic Module's step against ``EngineStep`` at given
context lengths, on caches holding random keys and values (and random stale entries past the context, which
neither side may read); kernel sets with one deliberately broken slot.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM, Qwen3Config

from tilefoundry.engine import StepPositions, TorchKernels
from tilefoundry.engine.reference import rms_norm
from tilefoundry.ir.core.tree import flatten, leaf_paths
from tilefoundry.models import open_checkpoint
from tilefoundry.models.engine_step import EngineStep
from tilefoundry.models.twins import build_twin
from tilefoundry.runtime.check import Report, check, parse_predicate

CAPACITY = 1040
"""The cache positions of the checks: room for 1024 cached tokens and a few more."""

# (cached positions before the step, tokens of the step): the empty cache before prefill (a whole prompt, and a
# single token), one cached token, 255, a three-token chunk after 255, and 1024.
CONTEXTS = [(0, 7), (0, 1), (1, 1), (255, 1), (255, 3), (1024, 1)]

TIGHT = [parse_predicate("rel_l2:max=1e-5"), parse_predicate("cosine:min=0.99999")]
"""f32 engine against the f32 evaluator: different summation orders, nothing more."""


def save_random_qwen3(folder: Path, seed: int, dtype: torch.dtype = torch.float32, **config: Any) -> torch.nn.Module:
    """Save a Qwen3 of ``config`` (Qwen3Config's fields) with random weights (torch seeded with ``seed``) in
    ``dtype`` into ``folder`` and return it."""
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(Qwen3Config(**config)).to(dtype).eval()
    model.save_pretrained(str(folder))
    return model


def make_long_qwen3(folder: Path) -> torch.nn.Module:
    """Save a random two-layer f32 Qwen3 with 2048 positions into ``folder`` and return it."""
    return save_random_qwen3(folder, 0, vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=2048)


def step_inputs(reference, context: int, tokens: int, seed: int, device: str = "cpu",  # noqa: ANN001
                capacity: int = CAPACITY) -> tuple:
    """The semantic step's inputs for ``tokens`` new tokens after ``context`` cached ones (random caches of
    ``capacity`` entries)."""
    gen = torch.Generator().manual_seed(seed)
    caches = tuple((torch.randn(k.shape, generator=gen).to(device=device, dtype=k.dtype),
                    torch.randn(v.shape, generator=gen).to(device=device, dtype=v.dtype))
                   for k, v in reference.init_caches(capacity=capacity))
    ids = torch.randint(0, 256, (context + tokens,), generator=gen)
    return reference.prepare_inputs_for_generation(ids, context, caches, device=device)


def check_step(step: EngineStep, reference, inputs: tuple) -> Report:  # noqa: ANN001
    """check() of the engine's step against the semantic Module's, every output under TIGHT."""
    _, spec = flatten(reference(*inputs), lambda t: isinstance(t, torch.Tensor))
    return check(step, reference, inputs, expect={path: TIGHT for path in leaf_paths(spec)})


def load_qwen3(folder: Path, device: str) -> tuple:
    """(opened checkpoint, reference reading, loaded twin) on ``device`` of the Qwen3 saved in ``folder``."""
    opened = open_checkpoint(folder, progress=False)
    twin = build_twin(opened.module, opened.config)
    twin.load(opened.resource(device))
    return opened, opened.module.load(opened.resource(device)), twin


class StaleNewest:
    """Broken, mixed into a kernel set: its attention never reads the step's own key and value (the cache's
    newest entry is zeroed around the set's own attention, then put back)."""

    def attention(self, q, cache_k, cache_v, out, scale, at: StepPositions) -> None:  # noqa: ANN001
        m = q.shape[0]
        fresh = at.rows(m)
        saved_k, saved_v = cache_k.index_select(0, fresh), cache_v.index_select(0, fresh)
        cache_k.index_fill_(0, fresh, 0.0)
        cache_v.index_fill_(0, fresh, 0.0)
        super().attention(q, cache_k, cache_v, out, scale, at)
        cache_k.index_copy_(0, fresh, saved_k)
        cache_v.index_copy_(0, fresh, saved_v)


class StaleNewestKernels(StaleNewest, TorchKernels):
    """Broken: the torch attention never reads the step's own key and value."""


class GeluKernels(TorchKernels):
    """Broken: gelu where the model says silu, in the MLP's fused SwiGLU."""

    def norm_swiglu(self, x, norm, gate_up, out, eps) -> None:  # noqa: ANN001
        y = torch.mm(rms_norm(x, norm, eps), gate_up.t()).view(x.shape[0], -1, 2)
        torch.mul(F.gelu(y[..., 0]), y[..., 1], out=out)


BROKEN = {"attention skips the newest entry": StaleNewestKernels, "swiglu computes gelu": GeluKernels}

"""``tilefoundry models``: the causal-LM families this build can run."""

from __future__ import annotations

import argparse

NAME = "models"
HELP = "list the model families and the config.json architectures they read"
DESCRIPTION = """List the causal-LM families authored in TileFoundry's DSL.

A checkpoint folder whose config.json names one of these architectures can be given to
`tilefoundry prepare` and `tilefoundry generate`.

example:
  tilefoundry models
"""

_FEATURES = {
    "llama": "GQA attention, RoPE (every scaling transformers ships: linear, llama3, yarn, dynamic, "
             "longrope, ...), SwiGLU MLP, optional tied lm_head",
    "qwen2": "as llama, with q/k/v projection biases",
    "qwen3": "as llama, with per-head RMSNorm on q and k",
    "qwen3_moe": "as qwen3, with routed experts (top-k softmax router; per-expert or fused weights on disk)",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No options."""


def run(args: argparse.Namespace) -> int:
    """Print one line per family."""
    from ..models.config import ARCHITECTURES

    width = max(len(a) for a in ARCHITECTURES)
    for arch, family in ARCHITECTURES.items():
        print(f"{family:<10} {arch:<{width}}  {_FEATURES[family]}")
    return 0

"""``tilefoundry prepare``: a Hugging Face checkpoint folder -> a prepared folder with clean keys."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

NAME = "prepare"
HELP = "convert a Hugging Face checkpoint folder into a prepared folder (clean keys, stacked experts)"
DESCRIPTION = """Read a Hugging Face checkpoint folder through its family's alias table, run the weight
converters, stack per-expert weights, validate every weight against the model's declarations and
write one safetensors shard plus model.safetensors.index.json into OUT (with config.json and the
tokenizer files copied beside them). OUT appears all at once: a failure leaves nothing behind and
never damages an earlier output. Nothing is written into the checkpoint folder.

example:
  tilefoundry prepare --ckpt ~/models/Qwen3-0.6B --out ~/models/Qwen3-0.6B.prepared
  tilefoundry generate --ckpt ~/models/Qwen3-0.6B.prepared --prompt "Hello" --max-new-tokens 32
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--ckpt, --out, --device."""
    parser.add_argument("--ckpt", required=True, help="the Hugging Face checkpoint folder (config.json + safetensors)")
    parser.add_argument("--out", required=True, help="the folder to write (must not exist, or be an earlier output)")
    parser.add_argument("--device", default="cpu", help="where weight converters run (default: cpu)")


def run(args: argparse.Namespace) -> int:
    """Prepare; exit 0 on success, 2 with the reason on a refusal."""
    from ..ir.core.prepare import prepare_module
    from ..models.aliases import hf_alias_table
    from ..models.checkpoint import CHECKPOINT_COMPANIONS, checkpoint_keys, is_prepared
    from ..models.config import read_config
    from ..models.decoder import build_causal_lm
    from ..runtime.resource import SafetensorsResource

    ckpt = Path(args.ckpt).resolve()
    try:
        if is_prepared(ckpt):
            raise ValueError(f"{ckpt} is already a prepared folder; generate can read it as is")
        config = read_config(ckpt)
        mod = build_causal_lm(config, config.max_position_embeddings)
        raw = SafetensorsResource(str(ckpt), device="cpu", alias=hf_alias_table(config, checkpoint_keys(ckpt)))
        prepare_module(mod, raw, args.out, device=args.device,
                       companions=[ckpt / n for n in CHECKPOINT_COMPANIONS if (ckpt / n).is_file()])
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"tilefoundry prepare: {e}", file=sys.stderr)
        return 2
    print(f"prepared {config.family} ({config.num_layers} layers) into {Path(args.out).resolve()}")
    return 0

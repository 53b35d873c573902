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
tokenizer files copied beside them). Nothing is written into the checkpoint folder.

OUT appears all at once: a failure leaves nothing behind and never damages an earlier output. An
existing OUT is replaced only when it holds nothing but an earlier prepare's output; any other file
in it is refused, and so is a checkpoint folder inside OUT. Two prepares to one OUT take turns.

Refused too: weights holding NaN or Inf, and checkpoint tensors no declared weight reads (a
config.json declaring fewer layers or experts than the checkpoint holds) unless --allow-unused.

example:
  tilefoundry prepare --ckpt ~/models/Qwen3-0.6B --out ~/models/Qwen3-0.6B.prepared
  tilefoundry generate --ckpt ~/models/Qwen3-0.6B.prepared --prompt "Hello" --max-new-tokens 32
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--ckpt, --out, --device, --allow-unused."""
    parser.add_argument("--ckpt", required=True, help="the Hugging Face checkpoint folder (config.json + safetensors)")
    parser.add_argument("--out", required=True, help="the folder to write (must not exist, or be an earlier output)")
    parser.add_argument("--device", default="cpu", help="where weight converters run (default: cpu)")
    parser.add_argument("--allow-unused", action="store_true",
                        help="accept checkpoint tensors no declared weight reads (refused by default)")


def run(args: argparse.Namespace) -> int:
    """Prepare; exit 0 on success, 2 with the reason on a refusal."""
    from ..models.checkpoint import prepare_hf_folder
    from ..runtime.resource.prepared import is_prepared

    ckpt = Path(args.ckpt).resolve()
    try:
        if is_prepared(ckpt):
            raise ValueError(f"{ckpt} is already a prepared folder; generate can read it as is")
        config = prepare_hf_folder(ckpt, args.out, device=args.device, allow_unused=args.allow_unused)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"tilefoundry prepare: {e}", file=sys.stderr)
        return 2
    print(f"prepared {config.family} ({config.num_layers} layers) into {Path(args.out).resolve()}")
    return 0

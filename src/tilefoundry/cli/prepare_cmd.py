"""``tilefoundry prepare``: a Hugging Face checkpoint folder -> a prepared folder with clean keys."""

from __future__ import annotations

import argparse
from pathlib import Path

from .options import add_device_option
from .refusal import Refusal

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
    parser.add_argument("--ckpt", required=True, help="the Hugging Face checkpoint folder (config.json + "
                        "safetensors), or a Hugging Face model id already in the local Hugging Face cache")
    parser.add_argument("--out", required=True, help="the folder to write (must not exist, or be an earlier output)")
    add_device_option(parser, "where weight converters run")
    parser.add_argument("--allow-unused", action="store_true",
                        help="accept checkpoint tensors no declared weight reads (refused by default)")


def run(args: argparse.Namespace) -> int:
    """Prepare; exit 0 on success, 2 (Refusal) with the reason named."""
    from ..models.checkpoint import checkpoint_folder, prepare_hf_folder
    from ..runtime.resource.prepared import is_prepared

    try:
        ckpt = checkpoint_folder(args.ckpt)
        if is_prepared(ckpt):
            raise ValueError(f"{ckpt} is already a prepared folder; generate can read it as is")
        config = prepare_hf_folder(ckpt, args.out, device=args.device, allow_unused=args.allow_unused)
    except (OSError, ValueError, KeyError, TypeError, RuntimeError) as e:
        raise Refusal(str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)) from None
    print(f"prepared {config.family} ({config.num_layers} layers) into {Path(args.out).resolve()}")
    return 0

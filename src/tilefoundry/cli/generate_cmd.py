"""``tilefoundry generate``: text from a checkpoint folder, through the reference or a runtime twin."""

from __future__ import annotations

import argparse
import json
import sys

NAME = "generate"
HELP = "generate text from a checkpoint folder (reference evaluator or runtime twin)"
DESCRIPTION = """Tokenize a prompt with the checkpoint folder's tokenizer, prefill, then decode token by token,
printing the text as it is produced, then the speed.

--backend reference runs the semantic Module on the torch evaluator (the ground truth);
--backend twin runs the model family's runtime twin (fast torch kernels), checked against it.
The folder may be a Hugging Face checkpoint (read through the family's alias table; models with
per-expert weights are prepared once into ~/.cache/tilefoundry, or $TILEFOUNDRY_CACHE) or a folder
written by `tilefoundry prepare`. Checkpoint tensors that no weight of the model its config.json
describes reads (more layers or experts than the config declares) are refused unless --allow-unused.

Sampling is greedy unless --temperature > 0; --top-k, --top-p and --seed shape and fix the draw.
Generation stops at the model's end-of-sequence tokens or after --max-new-tokens.

example:
  tilefoundry generate --ckpt ~/models/SmolLM2-135M-Instruct --chat \\
      --prompt "What is the capital of France?" --max-new-tokens 64 --backend twin
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options --help lists."""
    parser.add_argument("--ckpt", required=True, help="checkpoint folder (config.json, tokenizer, safetensors)")
    parser.add_argument("--prompt", required=True, help="the prompt text")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="tokens to generate at most (default 64)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda[:N] (default cpu)")
    parser.add_argument("--backend", choices=("reference", "twin"), default="twin",
                        help="reference evaluator or runtime twin (default twin)")
    parser.add_argument("--chat", action="store_true", help="wrap the prompt in the tokenizer's chat template")
    parser.add_argument("--temperature", type=float, default=0.0, help="0 (default) is greedy")
    parser.add_argument("--top-k", type=int, default=0, help="keep the k most likely tokens (0: all)")
    parser.add_argument("--top-p", type=float, default=1.0, help="keep the smallest set of mass >= p (1: all)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sampler (default 0)")
    parser.add_argument("--quiet", action="store_true", help="print only the generated text")
    parser.add_argument("--allow-unused", action="store_true",
                        help="accept checkpoint tensors no declared weight reads (refused by default)")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object (text, tokens, timings) instead of streaming the text")


def run(args: argparse.Namespace) -> int:
    """Generate; exit 0 on success, 2 with the reason on a refusal."""
    from ..models.generation import Sampling
    from ..models.session import TextSession

    try:
        sampling = Sampling(args.temperature, args.top_k, args.top_p, args.seed)
        session = TextSession.open(args.ckpt, device=args.device, backend=args.backend,
                                   max_new_tokens=args.max_new_tokens, prompt=args.prompt, chat=args.chat,
                                   allow_unused=args.allow_unused)
    except (OSError, ValueError, KeyError, TypeError, ImportError) as e:
        print(f"tilefoundry generate: {e}", file=sys.stderr)
        return 2
    if args.json:
        result = session.generate(sampling)
        print(json.dumps({
            "text": session.text(result.tokens), "tokens": result.tokens, "prompt_tokens": session.prompt_tokens,
            "backend": args.backend, "device": args.device, "prefill_ms": result.prefill_seconds * 1e3,
            "decode_tokens_per_second": result.decode_tokens_per_second, "stopped_by": result.stopped_by,
        }))
        return 0
    result = session.generate(sampling, stream=sys.stdout)
    print()
    if not args.quiet:
        print(f"[{session.prompt_tokens} prompt tokens, {len(result.tokens)} generated, backend {args.backend}, "
              f"{args.device}: prefill {result.prefill_seconds * 1e3:.0f} ms, decode "
              f"{result.decode_tokens_per_second:.1f} tokens/s]", file=sys.stderr)
    return 0

"""``tilefoundry generate``: text from a checkpoint folder, through the reference or a runtime twin."""

from __future__ import annotations

import argparse
import json
import sys

from ..models.generation import Sampling, check_temperature, check_top_k, check_top_p
from .options import SEED, add_device_option, checked
from .refusal import Refusal

NAME = "generate"
HELP = "generate text from a checkpoint folder (reference evaluator or runtime twin)"
DESCRIPTION = """Tokenize a prompt with the checkpoint folder's tokenizer, prefill, then decode token by token,
printing the text as it is produced, then the speed.

--backend reference runs the semantic Module on the torch evaluator (the ground truth);
--backend twin runs the model family's runtime twin (fast torch kernels), checked against it, through
the decode engine: packed weights, its own in-place KV cache and, on a CUDA device, the whole decode
step replayed as one CUDA graph per token (eager steps, with a warning, where capture fails).
The folder may be a Hugging Face checkpoint (read through the family's alias table; models with
per-expert weights are prepared once into ~/.cache/tilefoundry, or $TILEFOUNDRY_CACHE) or a folder
written by `tilefoundry prepare`. Checkpoint tensors that no weight of the model its config.json
describes reads (more layers or experts than the config declares) are refused unless --allow-unused.

Sampling is greedy unless --temperature > 0 (a finite number; 0 is greedy). The logits are divided
by the temperature after their maximum is subtracted, so a tiny positive temperature (1e-45, say) leaves
only the tokens tied for the highest logit with any probability: it samples like greedy, never NaN.
--top-k and --top-p narrow the candidates and --seed (an integer in [0, 2**64)) fixes the draw.
Generation stops at the model's end-of-sequence tokens or after --max-new-tokens; a step whose logits
are not finite stops it with an error naming the step.

The folder is read locally; nothing is ever downloaded (the Hugging Face libraries run offline).
A refused request exits with status 2 and one line on stderr naming what to fix.

example:
  tilefoundry generate --ckpt ~/models/SmolLM2-135M-Instruct --chat \\
      --prompt "What is the capital of France?" --max-new-tokens 64 --backend twin
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options --help lists."""
    parser.add_argument("--ckpt", required=True, help="a local checkpoint folder (config.json, tokenizer, safetensors)")
    parser.add_argument("--prompt", required=True, help="the prompt text (not empty)")
    parser.add_argument("--max-new-tokens", type=checked(int, _positive, "an integer"), default=64,
                        help="tokens to generate at most, >= 1 (default 64)")
    add_device_option(parser, "where the model runs")
    parser.add_argument("--backend", choices=("reference", "twin"), default="twin",
                        help="reference evaluator or runtime twin (default twin)")
    parser.add_argument("--chat", action="store_true", help="wrap the prompt in the tokenizer's chat template")
    parser.add_argument("--temperature", type=checked(float, check_temperature, "a number"), default=0.0,
                        help="a finite number >= 0; 0 (default) is greedy")
    parser.add_argument("--top-k", type=checked(int, check_top_k, "an integer"), default=0,
                        help="keep the k most likely tokens (0: all)")
    parser.add_argument("--top-p", type=checked(float, check_top_p, "a number"), default=1.0,
                        help="keep the smallest set of mass >= p, p in (0, 1] (1: all)")
    parser.add_argument("--seed", type=SEED, default=0,
                        help="seed of the sampler, in [0, 2**64) (default 0)")
    parser.add_argument("--quiet", action="store_true", help="print only the generated text")
    parser.add_argument("--allow-unused", action="store_true",
                        help="accept checkpoint tensors no declared weight reads (refused by default)")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object (text, tokens, timings) instead of streaming the text")


def _positive(value: int) -> None:
    if value < 1:
        raise ValueError(f"must be >= 1, got {value}")


# What opening a checkpoint and generating from it raise for a request that cannot be served.
_REFUSED = (OSError, ValueError, KeyError, TypeError, ImportError, RuntimeError)


def run(args: argparse.Namespace) -> int:
    """Generate; exit 0 on success, 2 (Refusal) when the request cannot be served, the reason named."""
    from ..models.session import TextSession

    sampling = Sampling(args.temperature, args.top_k, args.top_p, args.seed)
    try:
        session = TextSession.open(args.ckpt, device=args.device, backend=args.backend,
                                   max_new_tokens=args.max_new_tokens, prompt=args.prompt, chat=args.chat,
                                   allow_unused=args.allow_unused)
    except _REFUSED as error:
        raise Refusal(_reason(error)) from None
    try:
        result = session.generate(sampling, stream=None if args.json else sys.stdout)
    except _REFUSED as error:
        if not args.json:
            print(flush=True)  # ends the line of text streamed so far
        raise Refusal(_reason(error)) from None
    if args.json:
        print(json.dumps({
            "text": session.text(result.tokens), "tokens": result.tokens, "prompt_tokens": session.prompt_tokens,
            "backend": args.backend, "device": args.device, "prefill_ms": result.prefill_seconds * 1e3,
            "decode_tokens_per_second": result.decode_tokens_per_second, "stopped_by": result.stopped_by,
            "runner": result.runner,
        }))
        return 0
    print()
    if not args.quiet:
        print(f"[{session.prompt_tokens} prompt tokens, {len(result.tokens)} generated, backend {args.backend}, "
              f"{args.device}: prefill {result.prefill_seconds * 1e3:.0f} ms, decode "
              f"{result.decode_tokens_per_second:.1f} tokens/s; {result.runner}]", file=sys.stderr)
    return 0


def _reason(error: BaseException) -> str:
    if isinstance(error, KeyError) and error.args:
        return str(error.args[0])
    if isinstance(error, (ValueError, OSError)):
        return str(error)
    return f"{type(error).__name__}: {error}"

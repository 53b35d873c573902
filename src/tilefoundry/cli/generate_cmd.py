"""``tilefoundry generate``: text from a checkpoint folder, through the reference or a runtime twin."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TextIO

from .refusal import Refusal
from .text_options import REFUSED, add_model_options, add_text_options, open_session, reason, sampling_of, use_threads
from .tp_ranks import add_tp_option, run_parallel, wants_parallel

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

The prompt is --prompt TEXT, --prompt-file PATH, or standard input (--prompt -, --prompt-file -, or no
prompt option with text piped in). --chat wraps it in the tokenizer's chat template as one user turn, after
the --system prompt when one is given (--system implies --chat); `tilefoundry chat` holds a conversation.
A prompt longer than the model's positions allow (with --max-new-tokens) is refused, naming the limit;
--truncate left keeps its last tokens instead. Generation also stops when the text reaches a --stop string
(matched on the detokenised text, across tokens; the stop string is not printed).

--threads sets the CPU threads of torch and of the compiled kernels (default: $OMP_NUM_THREADS where it is
set, else the physical cores this process may run on; more only makes the threads wait on each other).

The folder is read locally, and a model id is looked up in the local Hugging Face cache ($HF_HUB_CACHE or
$HF_HOME/hub); nothing is ever downloaded (the Hugging Face libraries run offline).
A refused request exits with status 2 and one line on stderr naming what to fix.

examples:
  tilefoundry generate --ckpt ~/models/SmolLM2-135M-Instruct --chat \\
      --prompt "What is the capital of France?" --max-new-tokens 64
  echo "Write a haiku about the sea." | tilefoundry generate --ckpt ~/models/SmolLM2-135M-Instruct \\
      --system "You are a poet." --stop $'\\n\\n' --json
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options --help lists."""
    add_model_options(parser)
    prompt = parser.add_mutually_exclusive_group()
    prompt.add_argument("--prompt", help="the prompt text (not empty); - reads it from standard input")
    prompt.add_argument("--prompt-file", metavar="PATH", help="read the prompt from a file (- : standard input)")
    parser.add_argument("--chat", action="store_true", help="wrap the prompt in the tokenizer's chat template")
    add_text_options(parser)
    add_tp_option(parser)
    parser.add_argument("--quiet", action="store_true", help="print only the generated text")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object (text, tokens, timings) instead of streaming the text")


def read_prompt(args: argparse.Namespace, stdin: TextIO | None = None) -> str:
    """The prompt the options give: --prompt's text, a --prompt-file's, or standard input's (``-``, or piped in
    with neither option); a Refusal when there is none or it cannot be read."""
    stdin = sys.stdin if stdin is None else stdin
    if args.prompt is not None and args.prompt != "-":
        return args.prompt
    source = args.prompt_file
    if args.prompt is None and source is None:
        if stdin is None or stdin.isatty():
            raise Refusal("no prompt: give --prompt TEXT, --prompt-file PATH, or pipe the prompt into standard "
                          "input (--prompt -)")
        source = "-"
    if args.prompt == "-" or source == "-":
        text = stdin.read()
        where = "standard input"
    else:
        path = Path(source).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise Refusal(f"--prompt-file {source!r} does not exist") from None
        except IsADirectoryError:
            raise Refusal(f"--prompt-file {source!r} is a folder; give the text file holding the prompt") from None
        except UnicodeDecodeError as e:
            raise Refusal(f"--prompt-file {source!r} is not UTF-8 text ({e.reason} at byte {e.start})") from None
        except OSError as e:
            raise Refusal(f"--prompt-file {source!r} cannot be read: {e.strerror or e}") from None
        where = f"--prompt-file {source!r}"
    if text.endswith("\n"):  # the newline that ends a file or an echo is no part of the prompt
        text = text[:-2] if text.endswith("\r\n") else text[:-1]
    if not text:
        raise Refusal(f"the prompt read from {where} is empty; give the text to continue (or to answer, with --chat)")
    return text


def run(args: argparse.Namespace) -> int:
    """Generate; exit 0 on success, 2 (Refusal) when the request cannot be served, the reason named."""
    prompt = read_prompt(args)
    if wants_parallel(args):
        return run_parallel(args, NAME, generate, prompt)
    return generate(args, prompt, True)


def generate(args: argparse.Namespace, prompt: str, speak: bool) -> int:
    """Load, generate from ``prompt`` and print (when ``speak``: one tensor-parallel rank alone speaks)."""
    sampling = sampling_of(args)
    threads = use_threads(args)
    session = open_session(args, prompt, chat=args.chat)
    try:
        result = session.generate(sampling, stream=None if args.json or not speak else sys.stdout, stop=args.stop)
    except REFUSED as error:
        if speak and not args.json:
            print(flush=True)  # ends the line of text streamed so far
        raise Refusal(reason(error)) from None
    if not speak:
        return 0
    if args.json:
        print(json.dumps({
            "text": result.text, "tokens": result.tokens, "prompt_tokens": session.prompt_tokens,
            "dropped_prompt_tokens": session.dropped_tokens, "backend": args.backend, "device": args.device,
            "threads": threads, "prefill_ms": result.prefill_seconds * 1e3,
            "decode_tokens_per_second": result.decode_tokens_per_second, "stopped_by": result.stopped_by,
            "stop_token": result.stop_token, "stop_string": result.stop_string, "runner": result.runner,
            "tp": args.tp,
        }))
        return 0
    print()
    if not args.quiet:
        dropped = f" (its first {session.dropped_tokens} dropped: --truncate left)" if session.dropped_tokens else ""
        print(f"[{session.prompt_tokens} prompt tokens{dropped}, {len(result.tokens)} generated (stopped by "
              f"{result.stopped_by}), backend {args.backend}, {args.device}, {threads} threads: prefill "
              f"{result.prefill_seconds * 1e3:.0f} ms, decode {result.decode_tokens_per_second:.1f} tokens/s; "
              f"{result.runner}]", file=sys.stderr)
    return 0

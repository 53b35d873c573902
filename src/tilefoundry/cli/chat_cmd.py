"""``tilefoundry chat``: a conversation with a checkpoint's model, one user turn per line of standard input."""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from .refusal import Refusal, refusal_line
from .text_options import REFUSED, add_model_options, add_text_options, reason, sampling_of, use_threads

NAME = "chat"
HELP = "hold a conversation with a checkpoint's model (its chat template), one turn per input line"
DESCRIPTION = """Load the model once, then read the user's turns from standard input, one line each, and answer
each through the tokenizer's chat template with the whole conversation so far (after the --system prompt
when one is given). Works at a terminal and with turns piped in; the answers go to standard output, one
per turn, each ending with a newline.

Lines that are commands:
  /reset   forget the conversation (the system prompt stays)
  /exit    end the chat (as does the end of input, Ctrl-D)

When the conversation and --max-new-tokens no longer fit the model's positions, its oldest turns are
dropped (a note on stderr says so); a single turn too long for them is refused (one line on stderr) unless
--truncate left, and the chat goes on. Generation, sampling, --stop and --threads work as in
`tilefoundry generate` (see its --help).

example:
  printf 'Hi! Who are you?\\nName a prime number.\\n' | tilefoundry chat --ckpt ~/models/SmolLM2-135M-Instruct \\
      --system "Answer in one sentence." --max-new-tokens 48
"""

COMMANDS = ("/reset", "/exit")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options --help lists."""
    add_model_options(parser)
    add_text_options(parser)
    parser.add_argument("--quiet", action="store_true", help="no speed line after each answer on a terminal")


def run(args: argparse.Namespace, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    """Chat until the input ends or /exit; 0, or 2 when the model cannot be loaded (or a turn was refused)."""
    from ..models.session import TextSession

    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    sampling = sampling_of(args)
    use_threads(args)
    try:
        session = TextSession.load(args.ckpt, device=args.device, backend=args.backend,
                                   max_new_tokens=args.max_new_tokens, chat=True, allow_unused=args.allow_unused)
    except REFUSED as error:
        raise Refusal(reason(error)) from None
    limit = session.checkpoint.config.max_position_embeddings
    if args.max_new_tokens >= limit:  # no turn could ever fit: refused once, not at every line
        raise Refusal(f"--max-new-tokens {args.max_new_tokens} leaves no position for a conversation: the model holds "
                      f"{limit} positions (max_position_embeddings); ask for at most {limit - 1}")
    terminal = stdin.isatty()
    history: list[dict[str, str]] = []
    refused = 0
    while True:
        if terminal:
            print("> ", end="", file=sys.stderr, flush=True)
        line = stdin.readline()
        if not line:
            break
        text = line.rstrip("\r\n")
        if not text.strip():
            continue
        if text.strip() == "/exit":
            break
        if text.strip() == "/reset":
            history.clear()
            continue
        history.append({"role": "user", "content": text})
        turn = _fitting_turn(session, history, args)
        if turn is None:
            history.pop()
            refused += 1
            continue
        try:
            result = turn.generate(sampling, stream=stdout, stop=args.stop)
        except REFUSED as error:
            print(file=stdout, flush=True)
            print(refusal_line(NAME, reason(error)), file=sys.stderr)
            history.pop()
            refused += 1
            continue
        print(file=stdout, flush=True)
        history.append({"role": "assistant", "content": result.text or ""})
        if terminal and not args.quiet:
            print(f"[{len(result.tokens)} tokens, stopped by {result.stopped_by}; decode "
                  f"{result.decode_tokens_per_second:.1f} tokens/s]", file=sys.stderr)
    return 2 if refused else 0


def _fitting_turn(session: Any, history: list[dict[str, str]], args: argparse.Namespace) -> Any:
    """The session for the conversation in ``history``, its oldest turns dropped until it fits the model's
    positions; None (the refusal printed) when even the latest turn alone does not fit."""
    from ..models.session import PromptTooLongError

    while True:
        try:
            return session.with_prompt(history, system=args.system, truncate=args.truncate)
        except ValueError as error:
            if len(history) <= 1 or not isinstance(error, PromptTooLongError):
                print(refusal_line(NAME, str(error)), file=sys.stderr)
                return None
            del history[: 2 if len(history) > 2 else 1]  # the oldest user turn and its answer
            print(f"tilefoundry chat: the conversation no longer fits the model's positions; dropped its oldest "
                  f"turn ({len(history)} messages kept)", file=sys.stderr)

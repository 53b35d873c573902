"""``tilefoundry chat``: a conversation with a checkpoint's model, one user turn per line of standard input."""

from __future__ import annotations

import argparse
import queue
import sys
import threading
from collections.abc import Callable
from typing import Any, TextIO

from .refusal import Refusal, refusal_line
from .text_options import REFUSED, add_model_options, add_text_options, reason, sampling_of, use_threads
from .tp_ranks import add_tp_option, run_parallel, started_by_torchrun, wants_parallel

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
--truncate left, and the chat goes on. Generation, sampling, --stop, --threads and --tp work as in
`tilefoundry generate` (see its --help): with --tp N this process reads the turns and hands each to the
ranks, rank 0 answers.

example:
  printf 'Hi! Who are you?\\nName a prime number.\\n' | tilefoundry chat --ckpt ~/models/SmolLM2-135M-Instruct \\
      --system "Answer in one sentence." --max-new-tokens 48
"""

COMMANDS = ("/reset", "/exit")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options --help lists."""
    add_model_options(parser)
    add_text_options(parser)
    add_tp_option(parser)
    parser.add_argument("--quiet", action="store_true", help="no speed line after each answer on a terminal")


def run(args: argparse.Namespace, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    """Chat until the input ends or /exit; 0, or 2 when the model cannot be loaded (or a turn was refused)."""
    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    if wants_parallel(args):
        return _run_ranks(args, stdin)
    terminal = stdin.isatty()

    def next_line() -> str:
        if terminal:
            print("> ", end="", file=sys.stderr, flush=True)
        return stdin.readline()

    return converse(args, next_line, stdout, terminal, True)


def converse(args: argparse.Namespace, next_line: Callable[[], str], stdout: TextIO, terminal: bool,
             speak: bool) -> int:
    """The conversation: each line ``next_line`` returns a turn or a command, until it returns "" (the input's
    end) or /exit. Where ``speak`` is false (a tensor-parallel rank but rank 0) the same turns run, silently."""
    from ..models.session import TextSession

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
    history: list[dict[str, str]] = []
    refused = 0
    while True:
        line = next_line()
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
        turn = _fitting_turn(session, history, args, speak)
        if turn is None:
            history.pop()
            refused += 1
            continue
        try:
            result = turn.generate(sampling, stream=stdout if speak else None, stop=args.stop)
        except REFUSED as error:
            if speak:
                print(file=stdout, flush=True)
                print(refusal_line(NAME, reason(error)), file=sys.stderr)
            history.pop()
            refused += 1
            continue
        if speak:
            print(file=stdout, flush=True)
        history.append({"role": "assistant", "content": result.text or ""})
        if speak and terminal and not args.quiet:
            print(f"[{len(result.tokens)} tokens, stopped by {result.stopped_by}; decode "
                  f"{result.decode_tokens_per_second:.1f} tokens/s]", file=sys.stderr)
    return 2 if refused else 0


def _fitting_turn(session: Any, history: list[dict[str, str]], args: argparse.Namespace, speak: bool) -> Any:
    """The session for the conversation in ``history``, its oldest turns dropped until it fits the model's
    positions; None (the refusal printed where ``speak``) when even the latest turn alone does not fit."""
    from ..models.session import PromptTooLongError

    while True:
        try:
            return session.with_prompt(history, system=args.system, truncate=args.truncate)
        except ValueError as error:
            if len(history) <= 1 or not isinstance(error, PromptTooLongError):
                if speak:
                    print(refusal_line(NAME, str(error)), file=sys.stderr)
                return None
            del history[: 2 if len(history) > 2 else 1]  # the oldest user turn and its answer
            if speak:
                print(f"tilefoundry chat: the conversation no longer fits the model's positions; dropped its oldest "
                      f"turn ({len(history)} messages kept)", file=sys.stderr)


# -- --tp N: this process reads the turns, the ranks converse ------------------------------------------------------

_WAIT_S = 1.0
"""How long rank 0 waits for the next line before it tells the other ranks to keep waiting: their waits are
collectives, each bounded by --tp-timeout, and a person may take longer than that to type a turn."""

_STILL_WAITING = None
"""What rank 0 hands the other ranks while no line has come (a line is a str; the input's end is "")."""


def _run_ranks(args: argparse.Namespace, stdin: TextIO) -> int:
    """The chat over ``--tp`` ranks: a thread of this process reads standard input, a line each time rank 0 asks
    for one, and queues it for rank 0; under torchrun rank 0 reads its own (``_rank_body``)."""
    import torch.multiprocessing as mp

    if started_by_torchrun():  # this process is one of torchrun's ranks: rank 0 reads its own input
        return run_parallel(args, NAME, _rank_body, None)
    ctx = mp.get_context("spawn")
    lines, asks = ctx.Queue(), ctx.Queue()
    terminal = stdin.isatty()
    threading.Thread(target=_feed, args=(stdin, lines, asks, terminal), name="tilefoundry-chat-input",
                     daemon=True).start()
    return run_parallel(args, NAME, _rank_body, (lines, asks, terminal))


def _feed(stdin: TextIO, lines: Any, asks: Any, terminal: bool) -> None:
    """Each time ``asks`` gets a request, the next line of ``stdin`` into ``lines`` (``> `` first at a terminal),
    until the input ends ("")."""
    while True:
        asks.get()
        if terminal:
            print("> ", end="", file=sys.stderr, flush=True)
        line = stdin.readline()
        lines.put(line)
        if not line:
            return


def _rank_body(args: argparse.Namespace, payload: Any, speak: bool) -> int:
    """One rank's part of the chat: rank 0 takes each line (from the queue this command's reader fills, or under
    torchrun from its own standard input, read by a thread of its own) and broadcasts it; every rank converses on
    the same lines. While no line has come rank 0 broadcasts that it is still waiting, every _WAIT_S."""
    import torch.distributed as dist

    from ..engine.parallel import active_parallel

    tp = active_parallel()
    assert tp is not None, "_rank_body runs inside its group (tp_ranks._rank_main)"
    if payload is None:  # torchrun
        lines: Any = queue.Queue()
        asks: Any = queue.Queue()
        terminal = speak and sys.stdin.isatty()
        if speak:
            threading.Thread(target=_feed, args=(sys.stdin, lines, asks, terminal), name="tilefoundry-chat-input",
                             daemon=True).start()
    else:
        lines, asks, terminal = payload

    def next_line() -> str:
        if speak:
            asks.put(True)
        while True:
            got: list[Any] = [_STILL_WAITING]
            if speak:
                try:
                    got[0] = lines.get(timeout=_WAIT_S)
                except queue.Empty:
                    pass
            tp.collective(lambda box=got: dist.broadcast_object_list(box, group=tp.group, group_src=0),
                          "the chat's next line")
            if got[0] is not _STILL_WAITING:
                return str(got[0])

    return converse(args, next_line, sys.stdout, terminal, speak)

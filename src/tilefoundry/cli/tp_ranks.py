"""``--tp N``: a command run by N tensor-parallel ranks on this host (or by the ranks ``torchrun`` started).

The request is checked once, before any rank starts (the backend, the devices, the ranks' threads). Then
:func:`~tilefoundry.engine.ranks.run_ranks` starts the ranks (a spawned process each: gloo on CPUs, NCCL on
GPUs, rank r on ``cuda:r``), or, under ``torchrun``, this process is one of them. Each rank loads the model,
builds its engine on its slice inside ``TensorParallel.active()`` and runs the same steps; rank 0 alone speaks
(the text, the summary). A rank's refusal reaches the user as the command's one refusal line: the rank writes
its reason into the group's folder and exits with status 2, and the parent raises it as a Refusal.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from .refusal import Refusal

__all__ = ["add_tp_option", "run_parallel", "started_by_torchrun", "wants_parallel"]

_LATER_S = 2.0
"""How long a rank but rank 0 waits before it exits refusing: ranks refuse a request together, and the first rank
to exit ends the others."""


def add_tp_option(parser: argparse.ArgumentParser) -> None:
    """``--tp N`` and ``--tp-timeout``."""
    from .options import checked

    def at_least_one(value: int) -> None:
        if value < 1:
            raise ValueError(f"must be >= 1, got {value}")

    def positive(value: float) -> None:
        if not value > 0:
            raise ValueError(f"must be > 0, got {value}")

    parser.add_argument("--tp", type=checked(int, at_least_one, "an integer"), default=1, metavar="N",
                        help="split the model over N tensor-parallel ranks of this host (default 1): N processes "
                             "on CPUs (gloo), or N GPUs (NCCL, rank r on cuda:r); under torchrun, its ranks")
    parser.add_argument("--tp-timeout", type=checked(float, positive, "a number of seconds"), default=300.0,
                        metavar="SECONDS",
                        help="how long a rank waits for the others in a collective before it gives up (default 300)")


def started_by_torchrun() -> bool:
    """Whether torchrun started this process as one of its ranks (``WORLD_SIZE`` and ``RANK`` set, as
    ``engine.ranks.torchrun_rank`` reads them)."""
    return "WORLD_SIZE" in os.environ and "RANK" in os.environ


def wants_parallel(args: argparse.Namespace) -> bool:
    """Whether the command runs as tensor-parallel ranks: --tp above 1, or started by torchrun."""
    return args.tp > 1 or started_by_torchrun()


def _checked(args: argparse.Namespace) -> None:
    """Refuse what no rank could serve, before any starts."""
    if args.backend != "twin":
        raise Refusal(f"--tp {args.tp} splits the runtime twin's decode engine over ranks; --backend {args.backend} "
                      "runs on one device: drop --tp, or use --backend twin")
    if args.device.startswith("cuda"):
        if ":" in args.device:
            raise Refusal(f"--tp {args.tp} puts rank r on cuda:r; give --device cuda, not {args.device}")
        import torch

        have = torch.cuda.device_count()
        if have < args.tp:
            raise Refusal(f"--tp {args.tp} needs {args.tp} GPUs, one a rank, and this machine has {have}")


def _rank_args(args: argparse.Namespace, world: int) -> argparse.Namespace:
    """The options one rank runs with: its own GPU, and its share of the CPU threads unless --threads says."""
    from ..runtime.threads import default_threads

    mine = copy.copy(args)
    if args.device.startswith("cuda"):
        import torch

        mine.device = f"cuda:{torch.cuda.current_device()}"  # the rank's own GPU, made current as it joined
    if args.threads is None:
        mine.threads = max(1, default_threads() // world)
    return mine


def _rank_main(tp: Any, command: str, body: Callable[..., int], args: argparse.Namespace, payload: Any,
               folder: str | None) -> None:
    """One rank: ``body(args, payload, speak)`` inside the group; a refusal written for the parent, exit 2."""
    mine = _rank_args(args, tp.world)
    try:
        with tp.active():
            status = body(mine, payload, tp.rank == 0)
    except Refusal as refusal:
        if folder is None:  # under torchrun: no parent to tell (_as_torchrun_rank says it)
            raise
        Path(folder, f"refused-{tp.rank}").write_text(str(refusal), encoding="utf-8")
        if tp.rank != 0:  # rank 0, refusing the same request, says it first (the parent prefers its reason)
            time.sleep(_LATER_S)
        sys.exit(2)
    if status:  # the command's own status (a chat with a refused turn: 2), for the parent to return
        if folder is None:  # under torchrun: this process's status
            sys.exit(status)
        Path(folder, f"status-{tp.rank}").write_text(str(status), encoding="utf-8")


def _as_torchrun_rank(tp: Any, args: argparse.Namespace, command: str, body: Callable[..., int],
                      payload: Any) -> NoReturn:
    """This process as one of torchrun's ranks: the same checks, then ``body``; a refusal said once (by rank 0),
    and every rank ends with the command's status, the group left first."""
    from ..engine.ranks import finish_rank
    from .refusal import refusal_line

    def run() -> None:
        try:
            if args.tp not in (1, tp.world):
                raise Refusal(f"--tp {args.tp} but torchrun started {tp.world} ranks; give --tp {tp.world} or drop it")
            _checked(args)
            _rank_main(tp, command, body, args, payload, None)
        except Refusal as refusal:
            if tp.rank == 0:
                print(refusal_line(command, str(refusal)), file=sys.stderr)
            sys.exit(2)

    finish_rank(tp, run)


def run_parallel(args: argparse.Namespace, command: str, body: Callable[..., int], payload: Any) -> int:
    """Run ``body(args, payload, speak)`` on every rank (``speak``: rank 0's); the largest status a rank's body
    returned (0 when each returned 0 or None), 1 when one crashed (its error printed); a rank's refusal is raised
    as this command's Refusal.

    ``body`` and ``payload`` must be picklable (a module-level function, plain data): ranks are fresh processes.
    """
    from ..engine.ranks import RankFailedError, backend_for, run_ranks, torchrun_rank

    backend = backend_for(args.device)
    joined = torchrun_rank(backend, args.tp_timeout)  # None unless torchrun started this process
    if joined is not None:
        _as_torchrun_rank(joined, args, command, body, payload)
    _checked(args)
    with tempfile.TemporaryDirectory(prefix="tilefoundry-ranks-") as folder:
        try:
            run_ranks(args.tp, _rank_main, (command, body, args, payload, folder), backend=backend,
                      timeout_s=args.tp_timeout)
        except RankFailedError as error:
            said = sorted(Path(folder).glob("refused-*"), key=lambda p: int(p.name.split("-")[1]))
            if said:
                rank = said[0].name.split("-")[1]
                text = said[0].read_text(encoding="utf-8")
                raise Refusal(text if rank == "0" else f"tensor parallel rank {rank}: {text}") from None
            print(f"tilefoundry {command}: {error}", file=sys.stderr)  # a crash, not a refusal: all it said
            return 1
        return max((int(p.read_text(encoding="utf-8")) for p in Path(folder).glob("status-*")), default=0)

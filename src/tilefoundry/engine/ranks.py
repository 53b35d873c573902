"""Starting the ranks of a tensor-parallel group on this host, or joining the group ``torchrun`` started.

``run_ranks(world, target, args)`` starts ``world`` processes (``spawn``: each a fresh interpreter), makes them one
``torch.distributed`` group (gloo on CPUs, NCCL on GPUs, met through a file in a temporary folder, so no port is
chosen or taken) and calls ``target(tp, *args)`` in each with its :class:`~.parallel.TensorParallel`; with NCCL,
rank r's current device is ``cuda:r`` (under torchrun, ``cuda:LOCAL_RANK``) before it joins. It returns
when every rank has returned; a rank that raises or dies ends the others and raises :class:`RankFailedError`
naming it (its exit status in ``.exit_code``). Under ``torchrun`` (``WORLD_SIZE`` and ``RANK`` set) the process
is already one rank: :func:`torchrun_rank` joins the group torchrun describes instead.

Every collective of the group gives up after ``timeout_s`` (a rank that stopped answering), so a rank that loses
its peers raises instead of hanging.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

from .parallel import TensorParallel

__all__ = ["DEFAULT_TIMEOUT_S", "RankFailedError", "backend_for", "finish_rank", "run_ranks", "torchrun_rank"]

DEFAULT_TIMEOUT_S = 300.0
"""How long a collective waits for the other ranks before it fails (the first one includes loading the model)."""


class RankFailedError(RuntimeError):
    """A rank of the group raised or died; ``exit_code`` is its exit status (None when it raised)."""

    def __init__(self, message: str, exit_code: int | None) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def backend_for(device: str) -> str:
    """The collective backend of ranks on ``device``: NCCL for CUDA devices, gloo for CPUs."""
    return "nccl" if device.startswith("cuda") else "gloo"


def _init(backend: str, init_method: str, rank: int, world: int, timeout_s: float,
          local_rank: int) -> TensorParallel:
    """Join the group; with NCCL, on GPU ``local_rank`` first (NCCL's communicator takes the current device)."""
    import torch.distributed as dist

    if backend == "nccl":
        import torch

        torch.cuda.set_device(local_rank)
    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s))
    return TensorParallel.from_group(timeout_s=timeout_s)


def _rank_main(rank: int, world: int, store: str, backend: str, timeout_s: float,
               target: Callable[..., Any], args: tuple) -> None:
    """One spawned rank: join the group, run ``target``, leave the group."""
    tp = _init(backend, f"file://{store}", rank, world, timeout_s, rank)
    finish_rank(tp, lambda: target(tp, *args))


def finish_rank(tp: TensorParallel, run: Callable[[], None]) -> NoReturn:
    """Run ``run()`` on this rank, then end its process: after a barrier (every rank done; gloo aborts a process
    whose group goes while a peer still talks to it), the group destroyed, the output flushed, with ``run``'s
    status (a SystemExit's code, else 0) and without the interpreter's finalisation, in which gloo's worker threads
    made one exit in three here abort (SIGABRT, "terminate called without an active exception"). An exception
    other than SystemExit leaves the group and propagates."""
    import torch.distributed as dist

    status = 0
    try:
        try:
            run()
            tp.collective(lambda: dist.barrier(group=tp.group), "leaving")
        except SystemExit as stop:
            status = stop.code if isinstance(stop.code, int) else 1
    finally:
        dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


@contextlib.contextmanager
def _quiet(log: logging.Logger) -> Iterator[None]:
    """``log``'s warnings held back for the block: the failing rank's own error says what happened."""
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def run_ranks(world: int, target: Callable[..., Any], args: tuple = (), *, backend: str = "gloo",
              timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
    """Run ``target(tp, *args)`` in ``world`` new processes forming one group (the module docstring says how).

    ``target`` and ``args`` must be picklable (a module-level function): each rank is a fresh interpreter.

    Raises:
        ValueError: ``world`` < 1.
        RankFailedError: a rank raised (its traceback in the message) or exited with a non-zero status.
    """
    import torch.multiprocessing as mp

    if isinstance(world, bool) or not isinstance(world, int) or world < 1:
        raise ValueError(f"run_ranks: world must be a positive integer (ranks), got {world!r}")
    spawn_log = logging.getLogger("torch.multiprocessing.spawn")  # its "Terminating process ..." lines
    with tempfile.TemporaryDirectory(prefix="tilefoundry-tp-") as folder, _quiet(spawn_log):
        store = os.path.join(folder, "group")
        try:
            mp.start_processes(_rank_main, args=(world, store, backend, timeout_s, target, args), nprocs=world,
                               join=True, start_method="spawn")
        except mp.ProcessExitedException as error:
            raise RankFailedError(f"tensor parallel rank {error.error_index} of {world} exited with status "
                                  f"{error.exit_code}", error.exit_code) from None
        except mp.ProcessRaisedException as error:
            raise RankFailedError(f"tensor parallel rank {error.error_index} of {world} failed:\n{error}",
                                  None) from None


def torchrun_rank(backend: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> TensorParallel | None:
    """This process's rank when ``torchrun`` started it (``WORLD_SIZE`` / ``RANK`` in the environment), its group
    joined; None otherwise."""
    if "WORLD_SIZE" not in os.environ or "RANK" not in os.environ:
        return None
    world, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
    return _init(backend, "env://", rank, world, timeout_s, int(os.environ.get("LOCAL_RANK", rank)))

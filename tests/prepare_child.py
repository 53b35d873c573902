"""A separate process that prepares a small Module into a folder, for the tests of prepare's disk safety.

    python tests/prepare_child.py OUT SEED [MODE]

MODE is one of:

* ``kill-before-swap``: SIGKILL itself just before the first rename of the swap (its partial is complete);
* ``kill-between-renames``: SIGKILL itself right after the first rename (OUT moved aside, not yet replaced);
* ``kill-after-swap``: SIGKILL itself right after the second rename (the old output not yet removed);
* ``kill-after-exchange``: SIGKILL itself right after the one-step exchange of the partial and OUT (the old
  output, now at the partial's name, not yet removed).

The first three take the two-rename swap (as where the OS has no exchange); the last the one-step one.
* ``pause``: once the shard is written (inside the partial folder, before the swap), print ``filled`` and
  wait for a line on standard input.

The kills wrap ``os.replace`` in this process only; the production code has no hook for them. Exit status:
0 on success, 2 with the reason on standard error when prepare refuses.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import torch

from tilefoundry import func, module
from tilefoundry.dsl import ConstTensor, Tensor
from tilefoundry.runtime.resource import DictResource


@module(entry="step")
class Small:
    @func
    def step(x: Tensor[(4,), "f32"], w: ConstTensor[(4,), "f32"], table: ConstTensor[(32, 32), "f32"]):
        return x * w


def raw(seed: int) -> dict[str, torch.Tensor]:
    """The raw tensors of one Small checkpoint; each seed gives different values."""
    gen = torch.Generator().manual_seed(seed)
    return {"w": torch.randn(4, generator=gen), "table": torch.randn(32, 32, generator=gen)}


def _kill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _arm(target: Path, mode: str) -> None:
    from tilefoundry.runtime.resource import prepared

    real_exchange = prepared._exchange
    if mode == "kill-after-exchange":
        def exchange(a: Path, b: Path) -> bool:
            done = real_exchange(a, b)
            if done:
                _kill()
            return done

        prepared._exchange = exchange  # type: ignore[assignment]
        return
    prepared._exchange = lambda a, b: False  # type: ignore[assignment]  # the two-rename swap
    real_replace = os.replace
    partial_prefix = f".{target.name}.partial-"

    def replace(src: Any, dst: Any, **kw: Any) -> None:
        src_path, dst_path = Path(src), Path(dst)
        if mode == "kill-before-swap" and src_path == target:
            _kill()
        real_replace(src, dst, **kw)
        if mode == "kill-between-renames" and src_path == target:
            _kill()
        if mode == "kill-after-swap" and dst_path == target and src_path.name.startswith(partial_prefix):
            _kill()

    os.replace = replace  # type: ignore[assignment]


def _pause_after_fill() -> None:
    from tilefoundry.runtime.resource import prepared

    real_save = prepared.save_file

    def save_file(*args: Any, **kw: Any) -> None:
        real_save(*args, **kw)
        print("filled", flush=True)
        sys.stdin.readline()

    prepared.save_file = save_file  # type: ignore[assignment]


def main(argv: list[str]) -> int:
    out, seed = Path(argv[1]), int(argv[2])
    mode = argv[3] if len(argv) > 3 else ""
    if mode == "pause":
        _pause_after_fill()
    elif mode:
        _arm(Path(os.path.realpath(out)), mode)
    try:
        Small.prepare(DictResource(raw(seed)), str(out))
    except (OSError, ValueError) as e:
        print(f"refused: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""The command line's refusal form: exit status 2, one stderr line ``tilefoundry <sub>: ...``, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from tilefoundry.cli.main import SUBCOMMANDS, main

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _assert_refusal(command: str, status: int, out: str, err: str, words: Sequence[str]) -> str:
    assert status == 2, (out, err)
    assert "Traceback" not in err and "Traceback" not in out
    lines = err.splitlines()
    assert len(lines) == 1, err
    line = lines[0]
    prefix = f"tilefoundry {command}:" if command else "tilefoundry:"
    assert line.startswith(prefix), line
    for word in words:
        assert word in line, (word, line)
    return line


def refused(capsys: pytest.CaptureFixture[str], argv: Sequence[str], *words: str) -> str:
    """Run ``tilefoundry argv`` in this process; assert the refusal form and ``words``; return the stderr line."""
    status = main(list(argv))
    captured = capsys.readouterr()
    return _assert_refusal(_command(argv), status, captured.out, captured.err, words)


def run_check(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``tilefoundry check argv`` in this process: (exit status, stdout, stderr)."""
    status = main(["check", *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def _command(argv: Sequence[str]) -> str:
    return argv[0] if argv and argv[0] in SUBCOMMANDS else ""


def refused_subprocess(argv: Sequence[str], *words: str, guard_network: bool = False) -> str:
    """Run ``tilefoundry argv`` as a separate process (``python -m``); assert the refusal form and ``words``.

    ``guard_network`` makes every socket connection in that process raise, so reaching the network shows.
    """
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1")
    for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        env.pop(key, None)  # the command must set them itself
    if guard_network:
        code = ("import socket, sys\n"
                "def _no(*a, **k):\n    raise AssertionError('the command tried to reach the network')\n"
                "socket.socket.connect = _no\nsocket.create_connection = _no\n"
                "from tilefoundry.cli.main import SUBCOMMANDS, main\nsys.exit(main(sys.argv[1:]))\n")
        cmd = [sys.executable, "-c", code, *argv]
    else:
        cmd = [sys.executable, "-m", "tilefoundry.cli.main", *argv]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    return _assert_refusal(_command(argv), done.returncode, done.stdout, done.stderr, words)

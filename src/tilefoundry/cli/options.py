"""The options several subcommands share, each parsed and checked in one place.

Every value is checked where it is parsed, so a bad one is refused before any work, in the one-line form
of :mod:`.refusal`. Each check is the Python API's own (the message is the same either way).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, NoReturn

from .refusal import refusal_line

__all__ = ["SEED", "CommandParser", "UsageError", "add_device_option", "checked"]


class UsageError(Exception):
    """A command line argparse refused; ``str(error)`` is the one line to print on stderr."""


class CommandParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one-line refusals (``tilefoundry <subcommand>: refused: ...``).

    Instead of printing the usage and exiting, :meth:`error` raises :class:`UsageError`, which ``main``
    prints and turns into exit status 2.
    """

    def error(self, message: str) -> NoReturn:
        command = self.prog.split(" ", 1)[1] if " " in self.prog else ""
        hint = f" (see {self.prog} --help)"
        raise UsageError(refusal_line(command, message + hint))


def checked(convert: Callable[[str], Any], check: Callable[[Any], Any] | None = None,
            what: str = "a value") -> Callable[[str], Any]:
    """An argparse ``type=`` that converts the text, then runs the API's own ``check`` on the value.

    A conversion that fails is refused as not being ``what``; a ``ValueError`` / ``TypeError`` of ``check``
    is refused with its own message (the one the Python API raises).
    """

    def parse(text: str) -> Any:
        try:
            value = convert(text)
        except (ValueError, TypeError, OverflowError):
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if check is not None:
            try:
                result = check(value)
            except (ValueError, TypeError) as error:
                raise argparse.ArgumentTypeError(str(error)) from None
            if result is not None:
                value = result
        return value

    return parse


def _device(text: str) -> str:
    from ..runtime.resource.device import resolve_run_device

    resolve_run_device(text)
    return text


def add_device_option(parser: argparse.ArgumentParser, help_text: str) -> None:
    """``--device``: cpu, cuda or cuda:N, present on this machine (default cpu); the same for every subcommand."""
    parser.add_argument("--device", default="cpu", type=checked(str, _device, "a device"),
                        help=f"{help_text}: cpu, cuda or cuda:N (default cpu)")


def _seed(value: int) -> int:
    from ..models.generation import check_seed

    return check_seed(value)


SEED = checked(int, _seed, "an integer")
"""``--seed``: an integer in [0, 2**64), as every subcommand takes it (``type=SEED``)."""

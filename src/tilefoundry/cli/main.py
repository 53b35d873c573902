"""Entry point of the ``tilefoundry`` command.

Each subcommand lives in its own module exposing ``NAME``, ``HELP``, ``add_arguments(parser)`` and
``run(args) -> int``; this file only assembles them.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Subcommand modules, in the order --help lists them.
SUBCOMMANDS = ("prepare", "generate", "check", "models")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every available subcommand."""
    parser = argparse.ArgumentParser(
        prog="tilefoundry",
        description="Author a model once, prepare its weights, run it on the reference evaluator or a fast "
        "runtime twin, and check the two against each other.",
    )
    subs = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        mod = importlib.import_module(f"tilefoundry.cli.{name}_cmd")
        sub = subs.add_parser(mod.NAME, help=mod.HELP, description=mod.DESCRIPTION,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
        mod.add_arguments(sub)
        sub.set_defaults(_run=mod.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen subcommand; returns its exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    return int(args._run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())

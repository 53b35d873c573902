"""Entry point of the ``tilefoundry`` command.

Each subcommand lives in its own module exposing ``NAME``, ``HELP``, ``add_arguments(parser)`` and
``run(args) -> int``; this file only assembles them. Whatever a subcommand refuses (a bad option, a bad file,
an argparse error) ends here as exit status 2 and one line on stderr, ``tilefoundry <subcommand>: refused:
...`` (see :mod:`.refusal`). The command never touches the network: the Hugging Face libraries are put in
offline mode before any subcommand runs. A kernel built while a command runs shows its progress on a terminal
only (a log or a pipe reading stderr sees the refusal line alone).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from .options import CommandParser, UsageError
from .refusal import Refusal, refusal_line

# Subcommand modules, in the order --help lists them.
SUBCOMMANDS = ("prepare", "generate", "chat", "check", "models", "cache")

# Environment that keeps the Hugging Face libraries (tokenizers, configs) off the network and quiet.
_OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}


def stay_offline() -> None:
    """Put the Hugging Face hub libraries in offline mode, for this process and any it starts.

    Set before transformers is imported; a hub library imported earlier (in the same process) is switched too.
    """
    os.environ.update(_OFFLINE)
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None:
        constants.HF_HUB_OFFLINE = True  # type: ignore[attr-defined]


def package_version() -> str:
    """The installed tilefoundry's version (its package metadata), or ``unknown`` when it is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tilefoundry")
    except PackageNotFoundError:
        return "unknown (not installed; run from a source tree)"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every available subcommand."""
    parser = CommandParser(
        prog="tilefoundry",
        description="Author a model once, prepare its weights, run it on the reference evaluator or a fast "
        "runtime twin, and check the two against each other.",
    )
    parser.add_argument("--version", action="version", version=f"tilefoundry {package_version()}",
                        help="print the installed version and exit")
    subs = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        mod = importlib.import_module(f"tilefoundry.cli.{name}_cmd")
        sub = subs.add_parser(mod.NAME, help=mod.HELP, description=mod.DESCRIPTION,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
        mod.add_arguments(sub)
        sub.set_defaults(_run=mod.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen subcommand; returns its exit status (2: refused, reason on stderr)."""
    stay_offline()
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:  # named with the subcommand they were given to
            command = getattr(args, "command", None) or ""
            where = f"tilefoundry {command}".strip()
            raise UsageError(refusal_line(command, f"unrecognized arguments: {' '.join(extra)} (see {where} --help)"))
    except UsageError as error:
        print(error, file=sys.stderr)
        return 2
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    # Imported once a command runs: --help stays light.
    from ..codegen.build import build_progress
    from ..runtime.resource.prepared import CacheRootError

    try:
        with build_progress("terminal"):  # a kernel build's line on a terminal only: stderr stays the refusal's
            return int(args._run(args) or 0)
    except (Refusal, CacheRootError) as refusal:  # a cache root that cannot be a folder: every command says it
        print(refusal_line(args.command, str(refusal)), file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: one line, no traceback, the shell's status for SIGINT
        print(f"tilefoundry {args.command}: interrupted (Ctrl-C)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

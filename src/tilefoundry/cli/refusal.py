"""How a subcommand refuses its request: :class:`Refusal`, and the one line it becomes on stderr.

A refusal on the command line is exit status 2 and exactly one line on stderr,
``tilefoundry <subcommand>: refused: <what was wrong, named, and what is allowed>``, never a traceback.
"""

from __future__ import annotations

__all__ = ["Refusal", "refusal_line"]


class Refusal(Exception):
    """The command cannot do what it was asked; ``str(error)`` names what and the way out."""


def refusal_line(command: str, reason: str) -> str:
    """The stderr line of a refusal by ``tilefoundry <command>``: one line, whatever ``reason`` holds."""
    text = " ".join(part.strip() for part in reason.splitlines() if part.strip()) or "refused"
    prefix = f"tilefoundry {command}:" if command else "tilefoundry:"
    return f"{prefix} refused: {text}"

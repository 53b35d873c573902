"""The exception a subcommand raises to refuse its request: the reason goes to stderr, the exit status is 2."""

from __future__ import annotations

__all__ = ["Refusal"]


class Refusal(Exception):
    """The command cannot do what it was asked; ``str(error)`` names what and the way out."""

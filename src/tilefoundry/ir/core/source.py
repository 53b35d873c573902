"""Source locations of authored calls, so an error can point at the line a person wrote."""

from __future__ import annotations

import linecache
import sys
from dataclasses import dataclass
from pathlib import Path

# Frames inside these folders are the framework's own; the first frame outside them is the author's.
_PACKAGE = Path(__file__).resolve().parents[2]
INTERNAL_DIRS = tuple(str(_PACKAGE / sub) for sub in ("ir", "dsl", "evaluator"))


@dataclass(frozen=True)
class SourceLoc:
    """A file, line number and the text of that line."""

    filename: str
    lineno: int
    text: str

    def __str__(self) -> str:
        text = f": `{self.text}`" if self.text else ""
        return f"{self.filename}:{self.lineno}{text}"


def user_source() -> SourceLoc | None:
    """Location of the innermost frame that is not framework code (None when there is none)."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(INTERNAL_DIRS):
            text = linecache.getline(filename, frame.f_lineno).strip()
            return SourceLoc(filename, frame.f_lineno, text)
        frame = frame.f_back
    return None

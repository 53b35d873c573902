"""What codegen hands on: a LinkableModule (generated source and its entries' ABIs) and, once built, a
LinkedModule (the shared library and the same metadata) that the runtime's loader binds (spec 1.1.3)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..runtime.abi import EntryABI
from ..target import Target


@dataclass(frozen=True)
class LinkableModule:
    """Generated source for one target, before it is built.

    Attributes:
        name: the Module's name.
        target: the target the source is for.
        source: the translation unit (it includes only ``<tilefoundry/runtime.h>``).
        entries: the EntryABI of every exported function (inputs, then ``output_count`` outputs).
        entry: the name of the Module's entry among them.
        tir: the printed TIR the source was generated from ('' for hand-written source).
        include_dirs: folders holding the files the source includes by relative path (``#include "x.cuh"``);
            they are put on the include path and their files are part of the disk cache key.
    """

    name: str
    target: Target
    source: str
    entries: tuple[EntryABI, ...]
    entry: str
    tir: str
    include_dirs: tuple[Path, ...] = ()

    @property
    def entry_abi(self) -> EntryABI | None:
        """The EntryABI of the entry function (None for a hand-written library exporting functions of its own)."""
        return next((e for e in self.entries if e.name == self.entry), None)


@dataclass(frozen=True)
class LinkedModule:
    """A built library and its metadata.

    Attributes:
        library: the shared library (in the disk cache).
        source: the source it was built from.
        entry: the entry's EntryABI (``output_count`` trailing outputs); its name is the exported symbol (None
            for a hand-written library, whose functions the caller looks up itself).
        entries: every exported function's EntryABI.
        target: the target it runs on.
        tir: the printed TIR the source was generated from.
        diagnostics: what the compiler printed while building it ('' when it printed nothing, or when the
            library came from the cache).
    """

    library: Path
    source: str
    entry: EntryABI | None
    entries: tuple[EntryABI, ...]
    target: Target
    tir: str = ""
    diagnostics: str = ""

"""The build step: a LinkableModule becomes a LinkedModule, through the disk cache.

The library is looked up by its key first; only a miss runs the compiler, once per key however many
processes ask at the same time. A CPU build includes the runtime through a precompiled header
(:mod:`.pch`: made once per compiler, flags and headers; the plain build when there is none, or when the
compiler rejects it). A failed build raises :class:`BuildError` with the compiler's
diagnostics and the command. ``$TILEFOUNDRY_DUMP`` names a folder that receives every generated source (and
its TIR).

The key digests what decides the library (:func:`base_key`): the source as the compiler reads it, without its
whole-line comments (those name the Python file and line a kernel came from, so the same kernel written in
another file or at another line is one entry), the toolchain's flags and versions, and the included files.

A build that runs longer than a moment (PROGRESS_AFTER) says so on stderr, as :func:`build_progress` picks: on a
terminal, a tqdm line with the time elapsed, cleared when the build ends; elsewhere (a log, a notebook, a pipe),
one line, no carriage returns. Code whose stderr must stay its own (a command whose refusal is one stderr line)
asks for ``build_progress("terminal")``.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal, TextIO

from tqdm import tqdm

from ..target import refuse_without_gpu
from . import pch
from .cache import DiskCache
from .linked import LinkableModule, LinkedModule
from .options import CompilerOptions
from .toolchain import CompilerNotFoundError, Toolchain, compiler_identity, toolchain

DUMP_ENV = "TILEFOUNDRY_DUMP"
# A build says that it runs once it has run this long (seconds); a shorter one (a cache lookup) says nothing.
PROGRESS_AFTER = 1.0
ProgressMode = Literal["auto", "terminal", "off"]
PROGRESS_MODES: tuple[ProgressMode, ...] = ("auto", "terminal", "off")
_progress_lock = threading.Lock()
_progress_modes: list[ProgressMode] = []  # build_progress blocks open now, innermost last


class BuildError(RuntimeError):
    """The compiler refused the generated source; the message holds its diagnostics and the command."""

    def __init__(self, name: str, command: list[str], output: str, source: Path) -> None:
        self.command = command
        self.output = output
        self.source = source
        lines = output.strip().splitlines()
        shown = "\n".join(lines[-80:])
        more = f"\n  ({len(lines) - 80} earlier lines omitted)" if len(lines) > 80 else ""
        super().__init__(f"building {name} failed; the compiler said:\n{shown}{more}\n  command: "
                         f"{' '.join(command)}\n  source kept at {source}")


def base_key(linkable: LinkableModule, tc: Toolchain) -> str:
    """The digest of everything but the compiler that decides the library: the toolchain's flags and versions,
    the source without its whole-line comments (:func:`keyed_source`), and every file of its include folders."""
    h = hashlib.sha256()
    h.update(tc.base_key_text().encode())
    h.update(b"\0")
    h.update(keyed_source(linkable.source).encode())
    for folder in linkable.include_dirs:
        for p in sorted(q for q in Path(folder).rglob("*") if q.is_file()):
            h.update(b"\0" + str(p.relative_to(folder)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:32]


def link(linkable: LinkableModule, options: CompilerOptions | None = None, cache: DiskCache | None = None,
         ) -> LinkedModule:
    """Build ``linkable`` (or take it from the disk cache) into a LinkedModule."""
    refuse_without_gpu(linkable.target, f"building {linkable.name}")
    options = options or CompilerOptions()
    cache = cache or DiskCache()
    tc = toolchain(linkable.target, options)
    key = base_key(linkable, tc)
    _dump(linkable, key)
    try:
        compiler = tc.compiler()
    except CompilerNotFoundError:
        found = cache.find(key, None)  # no compiler here: any library built from this source will do
        if found is None:
            raise
        return _linked(linkable, found, "")
    ckey = hashlib.sha256(compiler_identity(compiler).encode()).hexdigest()[:12]
    found = cache.find(key, ckey)
    if found is not None:
        return _linked(linkable, found, "")
    with cache.locked(key):
        found = cache.find(key, ckey)  # built by another process while this one waited
        if found is not None:
            return _linked(linkable, found, "")
        diagnostics: list[str] = []
        entry = cache.put(key, ckey, lambda tmp: _compile(linkable, tc, tmp, cache, diagnostics))
    return _linked(linkable, entry, diagnostics[0] if diagnostics else "")


def keyed_source(source: str) -> str:
    """``source`` as the disk cache keys it: every whole-line ``//`` comment emptied, the line kept (so the line
    numbers the compiler records stay), but one ending in a backslash (it runs on into the next line).

    Generated code's whole-line comments say where each part came from (``// from @func rms_norm at
    readme.py:7``, a Python line's text) and never change the binary.
    """
    lines = source.split("\n")
    for i, line in enumerate(lines):
        if line.lstrip().startswith("//") and not line.rstrip().endswith("\\"):
            lines[i] = ""
    return "\n".join(lines)


def library_name(linkable: LinkableModule) -> str:
    """The file name of the library in its cache entry."""
    return f"{linkable.name}.so"


def source_name(linkable: LinkableModule) -> str:
    """The file name of the source in its cache entry (``.cu`` for CUDA)."""
    return f"{linkable.name}.{'cu' if linkable.target.kind == 'cuda' else 'cpp'}"


def _linked(linkable: LinkableModule, entry: Path, diagnostics: str) -> LinkedModule:
    os.utime(entry)  # most recently used
    return LinkedModule(entry / library_name(linkable), linkable.source, linkable.entry_abi, linkable.entries,
                        linkable.target, linkable.tir, diagnostics)


def _compile(linkable: LinkableModule, tc: Toolchain, tmp: Path, cache: DiskCache, diagnostics: list[str]) -> dict:
    source = tmp / source_name(linkable)
    source.write_text(linkable.source)
    if linkable.tir:
        (tmp / f"{linkable.name}.tir").write_text(linkable.tir + "\n")
    command = tc.command(source, tmp / library_name(linkable), linkable.include_dirs)
    what = f"compiling {linkable.name} for {linkable.target} ({Path(command[0]).name})"
    include = None
    if pch.applies(linkable):
        with _Progress(f"precompiling the runtime header for {linkable.target} ({Path(command[0]).name})"):
            include = pch.header(cache, tc, Path(command[0]))
    built = rejected = False
    if include is not None:  # the same command on the precompiled runtime header
        with_pch = [command[0], "-Winvalid-pch", "-include", str(include), *command[1:]]
        with _Progress(what):
            proc = subprocess.run(with_pch, capture_output=True, text=True)
        output = (proc.stdout + proc.stderr).strip()
        rejected = pch.rejected(output, include)
        if rejected:  # g++ could not use it: the next build makes a new one
            pch.discard(include)
            output = pch.without_pch_lines(output)
        # a build that warned it parsed the headers' text instead is complete; one that failed on the PCH is redone
        built = not rejected or proc.returncode == 0
        if built:
            command = with_pch
    if not built:
        with _Progress(what):
            proc = subprocess.run(command, capture_output=True, text=True)
        output = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0 or not (tmp / library_name(linkable)).is_file():
        failed = cache.dir / ".failed"
        failed.mkdir(parents=True, exist_ok=True)
        kept = failed / source.name
        kept.write_text(linkable.source)
        raise BuildError(linkable.name, command, output or f"(exit status {proc.returncode}, no output)", kept)
    diagnostics.append(output)
    return {"name": linkable.name, "entry": linkable.entry, "target": str(linkable.target), "command": command,
            "diagnostics": output, "built_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "pch": str(include) if include is not None and not rejected else None}


def _dump(linkable: LinkableModule, key: str) -> None:
    folder = os.environ.get(DUMP_ENV)
    if not folder:
        return
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{linkable.name}-{key[:12]}"
    (out / f"{stem}{Path(source_name(linkable)).suffix}").write_text(linkable.source)
    if linkable.tir:
        (out / f"{stem}.tir").write_text(linkable.tir + "\n")


@contextmanager
def build_progress(mode: ProgressMode) -> Iterator[None]:
    """Within the block, every build of this process (any thread) says it runs as ``mode`` asks.

    ``"auto"`` (the default outside any block): a tqdm line on a terminal's stderr, one line per build
    elsewhere. ``"terminal"``: the terminal's line only, nothing in a log or a pipe (for code whose stderr is
    read, e.g. a command whose refusal is exactly one line). ``"off"``: nothing. Blocks nest; the innermost
    open one decides.
    """
    if mode not in PROGRESS_MODES:
        raise ValueError(f"build_progress: mode {mode!r} is not one of {', '.join(map(repr, PROGRESS_MODES))}")
    with _progress_lock:
        _progress_modes.append(mode)
    try:
        yield
    finally:
        with _progress_lock:  # its own entry: the innermost of its mode (another thread's block may be open)
            del _progress_modes[len(_progress_modes) - 1 - _progress_modes[::-1].index(mode)]


def progress_mode() -> ProgressMode:
    """How builds say they run now (see :func:`build_progress`)."""
    with _progress_lock:
        return _progress_modes[-1] if _progress_modes else "auto"


class _Progress:
    """Says on stderr that a build runs, once it has run longer than PROGRESS_AFTER (as :func:`progress_mode`
    allows): on a terminal a tqdm line ``tilefoundry: compiling ... 00:12``, cleared when the build ends;
    elsewhere the one line ``tilefoundry: compiling ...``. A step that ends sooner (a lookup) says nothing."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.done = threading.Event()
        self.thread: threading.Thread | None = None
        self.bar: tqdm | None = None

    def __enter__(self) -> _Progress:
        mode = progress_mode()
        stream = sys.stderr
        if mode == "off" or stream is None:
            return self
        if _is_terminal(stream):
            self.bar = tqdm(total=None, desc=self.what, bar_format="tilefoundry: {desc} ... {elapsed}", file=stream,
                            leave=False, delay=PROGRESS_AFTER, mininterval=0.0)
            self.thread = threading.Thread(target=self._tick, args=(self.bar,), daemon=True)
        elif mode == "auto":
            self.thread = threading.Thread(target=self._line, args=(stream,), daemon=True)
        if self.thread is not None:
            self.thread.start()
        return self

    def _tick(self, bar: tqdm) -> None:
        while not self.done.wait(0.5):
            bar.update(0)  # redraws the elapsed time, once the bar's delay has passed

    def _line(self, stream: TextIO) -> None:
        if not self.done.wait(PROGRESS_AFTER):
            stream.write(f"tilefoundry: {self.what} ...\n")
            stream.flush()

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        if self.thread is not None:
            self.thread.join()
        if self.bar is not None:
            self.bar.close()  # clears the line it drew (leave=False), if it drew one


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or closed
        return False

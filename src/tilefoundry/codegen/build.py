"""The build step: a LinkableModule becomes a LinkedModule, through the disk cache.

The library is looked up by its key first; only a miss runs the compiler, once per key however many
processes ask at the same time. A CPU build includes the runtime through a precompiled header
(:mod:`.pch`: made once per compiler, flags and headers; the plain build when there is none, or when the
compiler rejects it). A failed build raises :class:`BuildError` with the compiler's
diagnostics and the command. On a terminal, a build that runs longer than a moment shows a progress
line. ``$TILEFOUNDRY_DUMP`` names a folder that receives every generated source (and its TIR).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from . import pch
from .cache import DiskCache
from .linked import LinkableModule, LinkedModule
from .options import CompilerOptions
from .toolchain import CompilerNotFoundError, Toolchain, compiler_identity, toolchain

DUMP_ENV = "TILEFOUNDRY_DUMP"
# A build shows its progress line once it has run this long (seconds), and only on a terminal.
PROGRESS_AFTER = 1.0


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
    the source, and every file of its include folders."""
    h = hashlib.sha256()
    h.update(tc.base_key_text().encode())
    h.update(b"\0")
    h.update(linkable.source.encode())
    for folder in linkable.include_dirs:
        for p in sorted(q for q in Path(folder).rglob("*") if q.is_file()):
            h.update(b"\0" + str(p.relative_to(folder)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:32]


def link(linkable: LinkableModule, options: CompilerOptions | None = None, cache: DiskCache | None = None,
         ) -> LinkedModule:
    """Build ``linkable`` (or take it from the disk cache) into a LinkedModule."""
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


class _Progress:
    """A one-line 'compiling ... N s' on stderr while a build runs longer than PROGRESS_AFTER, on a terminal."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.done = threading.Event()
        self.thread: threading.Thread | None = None
        self.shown = False

    def __enter__(self) -> _Progress:
        if sys.stderr.isatty():
            self.thread = threading.Thread(target=self._run, daemon=True)
            self.thread.start()
        return self

    def _run(self) -> None:
        start = time.monotonic()
        if self.done.wait(PROGRESS_AFTER):
            return
        while not self.done.is_set():
            sys.stderr.write(f"\rtilefoundry: {self.what} ... {time.monotonic() - start:.0f} s")
            sys.stderr.flush()
            self.shown = True
            self.done.wait(0.5)

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        if self.thread is not None:
            self.thread.join()
        if self.shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()

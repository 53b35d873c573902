"""A precompiled runtime header for CPU builds: the fixed include set parsed once, not once a kernel.

Every generated CPU translation unit starts with ``#include <tilefoundry/runtime.h>``, which under
``-DTILEFOUNDRY_TARGET_CPU -DTILEFOUNDRY_HOST_ENTRY`` brings in CuTe, the CUDA toolkit's type headers and
tvm-ffi: about 235,000 preprocessed lines whose parsing is two thirds of a row kernel's g++ time. The build
therefore compiles that include once into a GCC precompiled header and builds each kernel with
``-include <folder>/runtime_pch.h -Winvalid-pch``; g++ finds ``runtime_pch.h.gch`` beside it.

A PCH is valid only for the exact compiler and flags that made it, and for the headers it read, so it is
keyed by the compiler's identity, every flag of the toolchain (``-O``, ``-march``, the target macros, the
include folders, extra flags), the runtime headers' digest, the tvm-ffi version and the CuTe / CUDA headers'
identity. It lives in ``<cache>/kernels/pch/<key>/`` beside the libraries, built once per key under the
cache's lock in a temporary folder renamed into place, with the file's size and mtime recorded; a PCH whose
file no longer matches that record is rebuilt. Builds fall back to the plain command when no PCH can be
made (a failed PCH build is remembered for its key), and when g++ rejects or cannot read one (it then warns
under ``-Winvalid-pch``, or fails naming the precompiled header): the PCH is discarded and the next build
makes a new one. ``$TILEFOUNDRY_PCH=0`` turns precompiled headers off. Only the newest few PCHs are kept
(each is a few hundred MB).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from .cache import PCH_FOLDER, DiskCache, is_made, made_folder, remove_made
from .linked import LinkableModule
from .toolchain import Toolchain, compiler_identity, cuda_include_dirs

PCH_ENV = "TILEFOUNDRY_PCH"
HEADER = "runtime_pch.h"
INCLUDE = "#include <tilefoundry/runtime.h>"
RECORD = "pch.json"
FAILED = "failed.json"
# How many precompiled headers (one per compiler, flags and headers) the cache keeps.
KEEP = 3


def enabled() -> bool:
    """False when ``$TILEFOUNDRY_PCH`` is ``0`` (or ``off``/``no``/``false``)."""
    return os.environ.get(PCH_ENV, "1").strip().lower() not in ("0", "off", "no", "false")


def applies(linkable: LinkableModule) -> bool:
    """Whether ``linkable`` can be built on the PCH: a CPU source whose first line of code is the runtime
    include (a ``#define`` before it would change what the header means)."""
    if linkable.target.kind != "cpu":
        return False
    for line in linkable.source.splitlines():
        text = line.strip()
        if not text or text.startswith("//"):
            continue
        return text == INCLUDE
    return False


def key(tc: Toolchain, compiler: Path) -> str:
    """The digest of everything a precompiled header's validity depends on."""
    h = hashlib.sha256()
    h.update(compiler_identity(compiler).encode() + b"\0" + tc.base_key_text().encode())
    try:
        h.update(b"\0cutlass=" + importlib.metadata.version("nvidia-cutlass").encode())
    except importlib.metadata.PackageNotFoundError:
        pass
    for d in cuda_include_dirs()[:1]:
        st = (d / "cuda_runtime_api.h").stat()
        h.update(f"\0cuda={d}@{st.st_mtime_ns}:{st.st_size}".encode())
    return h.hexdigest()[:24]


def folder(cache: DiskCache, pch_key: str) -> Path:
    """The folder of one precompiled header."""
    return cache.dir / PCH_FOLDER / pch_key


def header(cache: DiskCache, tc: Toolchain, compiler: Path) -> Path | None:
    """The header to ``-include`` (its ``.gch`` beside it), made now if needed; None when there is none to use
    (turned off, or it cannot be made for this compiler and these flags)."""
    if not enabled():
        return None
    pch_key = key(tc, compiler)
    path = folder(cache, pch_key)
    if _valid(path):
        os.utime(path)
        return path / HEADER
    if (cache.dir / PCH_FOLDER / f"{pch_key}.{FAILED}").is_file():
        return None
    with cache.locked(f"pch-{pch_key}"):
        if _valid(path):  # made by another process while this one waited
            return path / HEADER
        made = _make(cache, tc, compiler, pch_key)
    if made:
        _prune(cache, keep=path)
    return path / HEADER if made else None


def discard(include: Path) -> None:
    """Remove the precompiled header of ``include`` (g++ rejected it); the next build makes a new one."""
    if is_made(include.parent):
        shutil.rmtree(include.parent, ignore_errors=True)


def rejected(output: str, include: Path) -> bool:
    """Whether the compiler's ``output`` says it could not use the precompiled header of ``include``."""
    return "[-Winvalid-pch]" in output or "precompiled header" in output or f"{include.name}.gch:" in output \
        or f"{include}: No such file" in output


def without_pch_lines(output: str) -> str:
    """``output`` less g++'s ``-Winvalid-pch`` warnings (the build did not use the PCH, and says so otherwise)."""
    return "\n".join(line for line in output.splitlines() if not re.search(r"\[-Winvalid-pch\]", line)).strip()


def _command(tc: Toolchain, compiler: Path, source: Path, output: Path) -> list[str]:
    flags = [f for f in tc.flags if f != "-shared"]  # the rest must be the kernel build's flags exactly
    return [str(compiler), *flags, "-x", "c++-header", str(source), "-o", str(output)]


def _valid(path: Path) -> bool:
    try:
        record = json.loads((path / RECORD).read_text())
        st = (path / f"{HEADER}.gch").stat()
        return (path / HEADER).is_file() and record["size"] == st.st_size and record["mtime_ns"] == st.st_mtime_ns
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _make(cache: DiskCache, tc: Toolchain, compiler: Path, pch_key: str) -> bool:
    final = folder(cache, pch_key)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = made_folder(final.parent, f".{pch_key[:12]}-")
    try:
        (tmp / HEADER).write_text(f"// The runtime include of generated CPU code, precompiled.\n{INCLUDE}\n")
        command = _command(tc, compiler, tmp / HEADER, tmp / f"{HEADER}.gch")
        proc = subprocess.run(command, capture_output=True, text=True)
        gch = tmp / f"{HEADER}.gch"
        if proc.returncode != 0 or not gch.is_file():
            failed = final.parent / f"{pch_key}.{FAILED}"
            failed.write_text(json.dumps({"command": command, "output": (proc.stdout + proc.stderr)[-4000:]}) + "\n")
            return False
        st = gch.stat()
        (tmp / RECORD).write_text(json.dumps({"command": command, "size": st.st_size, "mtime_ns": st.st_mtime_ns},
                                             indent=2) + "\n")
        if final.exists():  # one left behind, invalid
            remove_made(final)
        os.replace(tmp, final)
        return True
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _prune(cache: DiskCache, keep: Path) -> None:
    """Remove all but the KEEP most recently used precompiled headers (``keep`` stays)."""
    root = cache.dir / PCH_FOLDER
    made = [p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".") and p != keep and is_made(p)]
    made.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    for old in made[KEEP - 1:]:
        shutil.rmtree(old, ignore_errors=True)


"""Building and loading the decode engine's hand-written CUDA kernels (``kernels/engine_kernels.cu``).

The kernels are one translation unit, built with nvcc for sm_90a into a shared library that exports
tvm-ffi functions, and kept in a content-addressed folder under the cache root
(``$TILEFOUNDRY_CACHE/engine/engine_kernels-<key>``): the key digests the sources, the runtime
headers, the flags, the compiler's version and tvm-ffi's, so a change to any of them builds anew and
anything else reuses the library. A build happens once per key however many processes ask at once
(an ``flock`` beside the folder), and the folder appears whole (``write_folder``).

This is the one place that builds and loads them: when the compile path's build, disk cache and
loader (``tilefoundry.codegen``) land, :func:`build_kernels` becomes a call of theirs.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..runtime.resource.prepared import cache_root, write_folder

KERNEL_DIR = Path(__file__).resolve().parent / "kernels"
UNIT = "engine_kernels.cu"
LIBRARY = "engine_kernels.so"
BUILD_INFO = "build.json"
ARCH = "sm_90a"

ENTRIES = (
    "gemv", "gemv_residual", "gemv_swiglu", "gemv_argmax",
    "rmsnorm_gemv", "rmsnorm_gemv_residual", "rmsnorm_gemv_swiglu", "rmsnorm_gemv_argmax",
    "decode_attention", "attention_workspace_bytes", "qk_norm_rope_cache", "rope_cache",
    "rmsnorm", "add_rmsnorm", "swiglu", "set_pdl", "pdl", "set_gemv_tuning",
)
"""Every function the library exports."""


class KernelBuildError(RuntimeError):
    """nvcc refused the kernels, or something the build needs is missing; the message says which."""


def runtime_include_dir() -> Path:
    """The repository's ``include`` folder holding ``tilefoundry/runtime.h`` (``$TILEFOUNDRY_INCLUDE`` overrides)."""
    env = os.environ.get("TILEFOUNDRY_INCLUDE")
    path = Path(env) if env else Path(__file__).resolve().parents[3] / "include"
    if not (path / "tilefoundry" / "runtime.h").is_file():
        raise KernelBuildError(f"the runtime headers are not at {path} (tilefoundry/runtime.h); point "
                               "$TILEFOUNDRY_INCLUDE at the repository's include folder")
    return path


def cutlass_include_dir() -> Path:
    """CuTe's headers, from the installed ``nvidia-cutlass`` wheel."""
    spec = importlib.util.find_spec("cutlass_library")
    if spec is None or spec.origin is None:
        raise KernelBuildError("CuTe's headers come from the nvidia-cutlass wheel, which is not installed: "
                               "pip install --no-deps nvidia-cutlass==4.2.0.0")
    path = Path(spec.origin).parent / "source" / "include"
    if not (path / "cute" / "tensor.hpp").is_file():
        raise KernelBuildError(f"the nvidia-cutlass wheel has no CuTe headers at {path}; reinstall it")
    return path


def find_nvcc() -> Path:
    """nvcc: ``$TILEFOUNDRY_NVCC``, else the one on PATH."""
    spec = os.environ.get("TILEFOUNDRY_NVCC") or "nvcc"
    found = shutil.which(spec)
    if found is None:
        raise KernelBuildError(f"the engine's kernels are built with {spec!r}, which is not installed or not on "
                               "PATH; install the CUDA toolkit or name nvcc with $TILEFOUNDRY_NVCC")
    return Path(found)


def build_command(source: Path, output: Path, *, nvcc: Path | None = None, cubin: bool = False) -> list[str]:
    """The nvcc command building ``source`` into the shared library ``output`` (or a cubin, to read its SASS)."""
    from tvm_ffi import libinfo

    includes = [f"-I{runtime_include_dir()}", "-isystem", str(cutlass_include_dir())]
    for d in dict.fromkeys([libinfo.find_include_path(), libinfo.find_dlpack_include_path()]):
        includes += ["-isystem", str(d)]
    command = [str(nvcc or find_nvcc()), "-std=c++17", "-O3", "-gencode", f"arch=compute_90a,code={ARCH}",
               "-DTILEFOUNDRY_TARGET_CUDA", *includes, "-Xcompiler", "-fPIC,-fvisibility=hidden,-Wall,-Wextra"]
    if cubin:
        return [*command, "-cubin", str(source), "-o", str(output)]
    lib = Path(libinfo.find_libtvm_ffi()).parent
    return [*command, "-shared", str(source), "-o", str(output), f"-L{lib}", "-ltvm_ffi", "-Xlinker",
            f"-rpath,{lib}"]


def _sources() -> list[Path]:
    return sorted(p for p in KERNEL_DIR.iterdir() if p.suffix in (".cu", ".cuh"))


@functools.cache
def _nvcc_version(nvcc: str) -> str:
    return subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout.strip()


def build_key(nvcc: Path) -> str:
    """The digest naming the library: sources, runtime headers, flags, nvcc's version, tvm-ffi's version."""
    import tvm_ffi

    h = hashlib.sha256()
    for p in _sources():
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    headers = runtime_include_dir() / "tilefoundry"
    for p in sorted(headers.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(headers)).encode() + b"\0" + p.read_bytes() + b"\0")
    h.update(" ".join(build_command(Path(UNIT), Path(LIBRARY), nvcc=nvcc)).encode())
    h.update(_nvcc_version(str(nvcc)).encode())
    h.update(tvm_ffi.__version__.encode())
    return h.hexdigest()[:24]


@contextmanager
def _build_lock(folder: Path) -> Iterator[None]:
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}.build-lock", "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def build_kernels(cache: Path | None = None) -> Path:
    """The built library (built now when its key has none yet); ``cache`` defaults to the cache root.

    Raises KernelBuildError with nvcc's diagnostics and the command when the build fails.
    """
    nvcc = find_nvcc()
    folder = (cache if cache is not None else cache_root()) / "engine" / f"engine_kernels-{build_key(nvcc)}"
    library = folder / LIBRARY
    if library.is_file():
        return library
    with _build_lock(folder):
        if library.is_file():  # another process built it while this one waited
            return library

        def fill(tmp: Path) -> None:
            command = build_command(KERNEL_DIR / UNIT, tmp / LIBRARY, nvcc=nvcc)
            proc = subprocess.run(command, capture_output=True, text=True)
            output = (proc.stdout + proc.stderr).strip()
            if proc.returncode != 0 or not (tmp / LIBRARY).is_file():
                raise KernelBuildError(f"building the engine's kernels failed; nvcc said:\n{output}\n"
                                       f"  command: {' '.join(command)}")
            (tmp / BUILD_INFO).write_text(json.dumps({"command": command, "diagnostics": output}, indent=2) + "\n")

        write_folder(folder, fill, owned=lambda existing: {LIBRARY, BUILD_INFO}, what="the engine kernel build",
                     kind="a build of the engine's kernels")
    return library


def build_diagnostics(library: Path) -> str:
    """What nvcc printed while building ``library`` ('' when it printed nothing)."""
    return json.loads((library.parent / BUILD_INFO).read_text())["diagnostics"]


@functools.cache
def load_kernels() -> Any:
    """The kernels as a tvm-ffi Module (built on first use), loaded once per process.

    Loading needs no GPU; calling a kernel does (see :func:`require_cuda`).
    """
    import tvm_ffi

    return tvm_ffi.load_module(str(build_kernels()))


def require_cuda() -> None:
    """Raise RuntimeError unless torch sees a CUDA device to run the kernels on."""
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("the decode engine's kernels run on a CUDA GPU (built for sm_90a), and torch sees none "
                           "here (torch.cuda.is_available() is False)")

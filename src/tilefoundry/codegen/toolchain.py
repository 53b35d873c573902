"""The compiler and flags that build generated code, per target, and what identifies them.

CPU target: g++ (``$TILEFOUNDRY_CXX`` or ``CompilerOptions.compiler`` to change it) with OpenMP, the
CuTe headers of the installed ``nvidia-cutlass`` wheel, the CUDA toolkit's include folders (CuTe reads
``cuda_runtime_api.h`` even on the host), the repository's runtime headers and tvm-ffi's include and
library folders. CUDA target: nvcc with ``-gencode arch=compute_X,code=sm_X`` for the target's architecture
(``CudaTarget.arch``, part of the flags and so of the disk cache key), warnings of host code on, the same
include folders, and tvm-ffi linked with its folder on the rpath (``-Xlinker -rpath,...``: nvcc refuses
``-Wl,``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import platform
import shutil
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..target import CpuTarget, CudaTarget, Target
from .options import CompilerOptions


class ToolchainError(RuntimeError):
    """Something the build needs is missing (headers, a package); the message names it and the fix."""


class CompilerNotFoundError(ToolchainError, FileNotFoundError):
    """The target's compiler is not installed or not on PATH."""


@dataclass(frozen=True)
class Toolchain:
    """How one target builds: the compiler, its flags, and what identifies the result."""

    target: Target
    compiler_spec: str
    flags: tuple[str, ...]
    tvm_ffi_version: str
    headers_digest: str

    def base_key_text(self) -> str:
        """Everything but the compiler's own identity that decides the bytes of a build."""
        return "\n".join([f"target={self.target}", f"tvm-ffi={self.tvm_ffi_version}",
                          f"headers={self.headers_digest}", "flags=" + " ".join(self.flags)])

    def compiler(self) -> Path:
        """The compiler executable; CompilerNotFoundError names it and the way to provide one."""
        return find_compiler(self.compiler_spec, self.target)

    def command(self, source: Path, output: Path, include_dirs: tuple[Path, ...] = ()) -> list[str]:
        """The full command line building ``source`` into the shared library ``output`` (``include_dirs``:
        folders of the files it includes by relative path)."""
        includes = [f"-I{d}" for d in include_dirs]
        return [str(self.compiler()), *self.flags, *includes, str(source), "-o", str(output), *self._link_flags()]

    def _link_flags(self) -> list[str]:
        lib = tvm_ffi_library_dir()
        # nvcc refuses -Wl,...: it hands the linker its own options through -Xlinker
        rpath = ["-Xlinker", f"-rpath,{lib}"] if isinstance(self.target, CudaTarget) else [f"-Wl,-rpath,{lib}"]
        return [f"-L{lib}", "-ltvm_ffi", *rpath]


def toolchain(target: Target, options: CompilerOptions) -> Toolchain:
    """The toolchain that builds for ``target`` under ``options``."""
    import tvm_ffi

    if isinstance(target, CpuTarget):
        spec = options.compiler or os.environ.get("TILEFOUNDRY_CXX") or "g++"
        flags = _cpu_flags(options)
    elif isinstance(target, CudaTarget):
        spec = options.compiler or os.environ.get("TILEFOUNDRY_NVCC") or "nvcc"
        flags = _cuda_flags(target, options)
    else:  # pragma: no cover - resolve_target admits no other kind
        raise TypeError(f"unknown target {target!r}")
    return Toolchain(target, spec, tuple(flags), tvm_ffi.__version__, runtime_headers_digest())


def _include_flags() -> list[str]:
    flags = [f"-I{runtime_include_dir()}"]
    for d in (cutlass_include_dir(), *cuda_include_dirs(), *tvm_ffi_include_dirs()):
        flags += ["-isystem", str(d)]
    return flags


def _cpu_flags(options: CompilerOptions) -> list[str]:
    flags = ["-std=c++17", f"-O{options.opt_level}", "-fPIC", "-shared", "-fvisibility=hidden", "-fopenmp",
             "-ffp-contract=off", "-Wall", "-Wextra"]
    march = cpu_march(options.cpu_arch)
    if march:
        flags.append(f"-march={march}")
    flags += ["-DTILEFOUNDRY_TARGET_CPU", "-DTILEFOUNDRY_HOST_ENTRY", *_include_flags(), *options.extra_flags]
    return flags


def _cuda_flags(target: CudaTarget, options: CompilerOptions) -> list[str]:
    arch = target.arch
    compute = arch.replace("sm_", "compute_")
    return ["-std=c++17", f"-O{options.opt_level}", f"-Xptxas=-O{options.opt_level}", "-gencode",
            f"arch={compute},code={arch}", "-Xcompiler",
            "-fPIC,-fvisibility=hidden,-Wall,-Wextra", "-shared", "-DTILEFOUNDRY_TARGET_CUDA",
            "-DTILEFOUNDRY_HOST_ENTRY", *_include_flags(), *options.extra_flags]


def find_compiler(spec: str, target: Target) -> Path:
    """Resolve a compiler name or path; a clear CompilerNotFoundError when there is none."""
    found = shutil.which(spec)
    if found is None:
        var = "TILEFOUNDRY_CXX" if isinstance(target, CpuTarget) else "TILEFOUNDRY_NVCC"
        raise CompilerNotFoundError(
            f"the {target.kind.upper()} target compiles with {spec!r}, which is not installed or not on PATH; "
            f"install it, or name another compiler with ${var} or CompilerOptions(compiler=...)")
    return Path(found).resolve()


@cache
def _file_digest(path: str, mtime_ns: int, size: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def compiler_identity(path: Path) -> str:
    """The compiler's path and a digest of its executable: any other compiler, or version, differs."""
    st = path.stat()
    return f"{path}@{_file_digest(str(path), st.st_mtime_ns, st.st_size)[:16]}"


def runtime_include_dir() -> Path:
    """The repository's ``include`` folder (``$TILEFOUNDRY_INCLUDE`` overrides it)."""
    env = os.environ.get("TILEFOUNDRY_INCLUDE")
    path = Path(env) if env else Path(__file__).resolve().parents[3] / "include"
    if not (path / "tilefoundry" / "runtime.h").is_file():
        raise ToolchainError(f"the runtime headers are not at {path} (tilefoundry/runtime.h); point "
                             "$TILEFOUNDRY_INCLUDE at the repository's include folder")
    return path


def runtime_headers_digest() -> str:
    """A digest of every runtime header: generated code compiled against other headers is rebuilt."""
    root = runtime_include_dir() / "tilefoundry"
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:16]


def cutlass_include_dir() -> Path:
    """CuTe's headers, from the installed ``nvidia-cutlass`` wheel (never a copy in the repository)."""
    spec = importlib.util.find_spec("cutlass_library")
    if spec is None or spec.origin is None:
        raise ToolchainError("CuTe's headers come from the nvidia-cutlass wheel, which is not installed: "
                             "pip install --no-deps nvidia-cutlass==4.2.0.0 (make venv does)")
    path = Path(spec.origin).parent / "source" / "include"
    if not (path / "cute" / "tensor.hpp").is_file():
        raise ToolchainError(f"the nvidia-cutlass wheel has no CuTe headers at {path}; reinstall it")
    return path


def cuda_include_dirs() -> list[Path]:
    """The CUDA toolkit's include folder (and its cccl folder): CuTe includes them even on the host.

    Looked for in ``$CUDA_HOME``, ``$CUDA_PATH``, ``/usr/local/cuda``, then beside ``nvcc`` on PATH, in that
    order and without resolving links, so that two processes with different PATHs build with one flag set.
    """
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    nvcc = shutil.which("nvcc")
    if nvcc is not None:
        candidates.append(str(Path(nvcc).parent.parent))
    for root in candidates:
        if root and (Path(root) / "include" / "cuda_runtime_api.h").is_file():
            inc = Path(root) / "include"
            return [inc] + ([inc / "cccl"] if (inc / "cccl").is_dir() else [])
    raise ToolchainError("CuTe needs the CUDA toolkit's headers (cuda_runtime_api.h), also for the CPU target; "
                         "install the CUDA toolkit or set $CUDA_HOME to it")


def tvm_ffi_include_dirs() -> list[Path]:
    """tvm-ffi's C++ headers and DLPack's."""
    from tvm_ffi import libinfo

    dirs = [Path(libinfo.find_include_path()), Path(libinfo.find_dlpack_include_path())]
    return list(dict.fromkeys(dirs))


def tvm_ffi_library_dir() -> Path:
    """The folder of ``libtvm_ffi``, linked against and put on the library's rpath."""
    from tvm_ffi import libinfo

    return Path(libinfo.find_libtvm_ffi()).parent


_X86_LEVELS = (
    ("x86-64-v4", {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}),
    ("x86-64-v3", {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"}),
    ("x86-64-v2", {"cx16", "lahf_lm", "popcnt", "sse4_1", "sse4_2", "ssse3"}),
)


@cache
def _native_x86_level() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "x86-64"
    flags: set[str] = set()
    for line in text.splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    have = set()
    for level, need in reversed(_X86_LEVELS):
        if need <= flags:
            have.add(level)
        else:
            break
    for level, _ in _X86_LEVELS:
        if level in have:
            return level
    return "x86-64"


def cpu_march(arch: str) -> str | None:
    """The ``-march`` value for ``CompilerOptions.cpu_arch`` (None: leave the compiler's default).

    ``native`` is resolved here, to the x86-64 level this CPU supports, so that the flags (and so the
    cache key) name the instruction set a library was built for.
    """
    if arch == "generic":
        return None
    if arch != "native":
        return arch
    if platform.machine() not in ("x86_64", "AMD64"):
        return None
    return _native_x86_level()

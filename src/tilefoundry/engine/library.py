"""Building and loading the decode engine's hand-written CUDA kernels (``kernels/engine_kernels.cu``).

The kernels are one translation unit that includes its ``.cuh`` files by relative path. They are built and
loaded through the compile path's own machinery, as a jitted kernel is: the build step
(``tilefoundry.codegen.link``: nvcc for the CUDA target's architecture, sm_90a, with the toolchain's flags),
its content-addressed disk cache under the cache root (``$TILEFOUNDRY_CACHE/kernels/<key>``: the key digests
the source, every file of the kernel folder, the runtime headers, the flags, nvcc and tvm-ffi, so a change to
any of them builds anew, once however many processes ask) and the tvm-ffi loader
(``tilefoundry.runtime.loader.load_library``).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from ..codegen import BuildError, DiskCache, LinkableModule, LinkedModule, ToolchainError, link
from ..target import CudaTarget

KERNEL_DIR = Path(__file__).resolve().parent / "kernels"
UNIT = "engine_kernels.cu"
NAME = "engine_kernels"
TARGET = CudaTarget()
ARCH = TARGET.arch

ENTRIES = (
    "gemv", "gemv_residual", "gemv_swiglu", "gemv_argmax", "gemv_greedy",
    "rmsnorm_gemv", "rmsnorm_gemv_residual", "rmsnorm_gemv_swiglu", "rmsnorm_gemv_argmax", "rmsnorm_gemv_greedy",
    "decode_attention", "attention_workspace_bytes", "qk_norm_rope_cache", "rope_cache",
    "rmsnorm", "add_rmsnorm", "swiglu", "set_pdl", "pdl", "set_gemv_tuning", "set_gemv_stream",
)
"""Every function the library exports."""


class KernelBuildError(RuntimeError):
    """nvcc refused the kernels, or something the build needs is missing; the message says which."""


def linkable() -> LinkableModule:
    """The kernels as the build step takes them: the unit's source, its folder on the include path."""
    return LinkableModule(NAME, TARGET, (KERNEL_DIR / UNIT).read_text(), (), "", "", (KERNEL_DIR,))


def _linked(cache: Path | None = None) -> LinkedModule:
    try:
        return link(linkable(), cache=DiskCache(cache) if cache is not None else None)
    except (BuildError, ToolchainError) as e:
        raise KernelBuildError(f"building the engine's kernels failed: {e}") from e


def build_kernels(cache: Path | None = None) -> Path:
    """The built library (built now when its key has none yet); ``cache`` defaults to the cache root.

    Raises KernelBuildError with nvcc's diagnostics and the command when the build fails, or naming what is
    missing (nvcc, the CuTe headers).
    """
    return _linked(cache).library


def build_diagnostics(library: Path) -> str:
    """What nvcc printed while building ``library`` ('' when it printed nothing)."""
    return str(DiskCache.metadata(library.parent)["diagnostics"])


@functools.cache
def load_kernels() -> Any:
    """The kernels as a tvm-ffi Module (built on first use), loaded once per process.

    Loading needs no GPU; calling a kernel does (see :func:`require_cuda`).
    """
    from ..runtime.loader import load_library

    return load_library(_linked())


def require_cuda() -> None:
    """Raise RuntimeError unless torch sees a CUDA device to run the kernels on."""
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("the decode engine's kernels run on a CUDA GPU (built for sm_90a), and torch sees none "
                           "here (torch.cuda.is_available() is False)")

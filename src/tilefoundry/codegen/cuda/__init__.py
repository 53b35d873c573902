"""The CUDA target's code generator: not built yet.

The CUDA emitter (kernel qualifier ``__global__``, launch geometry embedded in the host entry, launch
on the caller's stream from ``TVMFFIEnvGetStream``) is the next step of the compile path. It plugs in
beside ``codegen/cpu`` as a :class:`~tilefoundry.codegen.kernel.KernelEmitter` /
:class:`~tilefoundry.codegen.host.HostEmitter` pair; lowering, the build step (nvcc with ``-gencode``
from ``CudaTarget.arch``), the disk cache and the loader already serve both targets.
"""

from __future__ import annotations

from ...tir.function import TirModule


class CudaBackendMissing(NotImplementedError):
    """jit / build for a CUDA target before the CUDA code generator exists."""


def emit_cuda(mod: TirModule) -> str:
    """Refuses: the CUDA code generator is not built yet."""
    raise CudaBackendMissing(
        f"cannot compile {mod.name} for {mod.target}: the CUDA back end is not built yet (the compile path runs "
        "on the CPU target today); use target='cpu' (or CpuTarget())")


__all__ = ["CudaBackendMissing", "emit_cuda"]

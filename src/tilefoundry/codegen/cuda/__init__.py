"""The CUDA target's code generator: ``__global__`` kernels on the runtime headers, host entries that check
every argument and launch on the caller's stream with the geometry codegen derived."""

from .emit import LaunchConfig, emit_cuda

__all__ = ["LaunchConfig", "emit_cuda"]

"""The decode engine's groundwork: hand-written CUDA kernels for batch-1 decode, and the layouts they read.

The kernels (``kernels/*.cu``, one translation unit) are gaps of the compiler: it cannot yet express them
from ``@func``s. :func:`load_kernels` builds them with nvcc (cached on disk) and loads them as a tvm-ffi
module whose functions take torch tensors; outputs are preallocated by the caller and passed last, before
the scalars. ``packing`` lays weights out as the fused kernels read them; ``workspace`` sizes the scratch
buffers two kernels keep between launches; ``step`` launches one decoder step from them; ``reference`` is
each kernel's meaning in torch.
"""

from .library import ENTRIES, KernelBuildError, build_kernels, load_kernels, require_cuda
from .packing import pack_gate_up, pack_qkv
from .step import DecoderShape, LayerWeights, StepBuffers, decode_step
from .workspace import argmax_workspace, attention_workspace

__all__ = ["ENTRIES", "DecoderShape", "KernelBuildError", "LayerWeights", "StepBuffers", "argmax_workspace",
           "attention_workspace", "build_kernels", "decode_step", "load_kernels", "pack_gate_up", "pack_qkv",
           "require_cuda"]

"""The decode engine: fast batch-1 generation from a loaded runtime twin, and the kernels it runs.

``DecodeEngine(twin, capacity)`` owns its KV cache and updates it in place, packs the weights once, and on CUDA
replays the whole decode step as one CUDA graph per token (:mod:`.decode_engine`). Its kernels are the slots of
a :class:`KernelSet` (:mod:`.slots`): :class:`CompiledKernels` compiles every slot from a DSL ``@func``
(:mod:`.compiled_kernels`; the default on a CPU and for a bf16 model on CUDA), :class:`TorchKernels` fills them
with torch, and a compiled or hand-written kernel takes a slot by overriding one method. A model family describes
itself to the engine with a :class:`DecoderSpec` and :class:`DecoderWeights` (:mod:`.decoder`); the engine
imports no model family.

The hand-written CUDA kernels for batch-1 decode (``kernels/*.cu``, one translation unit) are gaps of the
compiler: it cannot yet express them from ``@func``s. :func:`load_kernels` builds them with nvcc (cached on
disk) and loads them as a tvm-ffi module whose functions take torch tensors; outputs are preallocated by the
caller and passed last, before the scalars. ``packing`` lays weights out as the fused kernels read them (the
engine packs with it); ``workspace`` sizes the scratch buffers two kernels keep between launches;
``reference`` is each kernel's meaning in torch. :mod:`.parallel` splits a model over the ranks of a
tensor-parallel group (:class:`TensorParallel`), each rank's engine running its slices through
:class:`ParallelKernels`.
"""

from .compiled_kernels import CompiledKernels
from .cuda_kernels import CudaKernels
from .decode_engine import DecodeEngine, EngineStats, default_kernels, greedy_choice
from .decoder import DecoderLayerWeights, DecoderSpec, DecoderWeights
from .library import ENTRIES, KernelBuildError, build_kernels, load_kernels, require_cuda
from .packed import PackedDecoder, PackedLayer, pack_decoder
from .packing import pack_gate_up, pack_qkv
from .parallel import TensorParallel, TensorParallelError, active_parallel
from .parallel_kernels import ParallelKernels
from .slots import KernelSet, StepPositions
from .torch_kernels import TorchKernels
from .workspace import argmax_workspace, attention_workspace

__all__ = ["ENTRIES", "CompiledKernels", "CudaKernels", "DecodeEngine", "DecoderLayerWeights", "DecoderSpec",
           "DecoderWeights", "EngineStats", "KernelBuildError", "KernelSet", "PackedDecoder", "PackedLayer",
           "ParallelKernels", "StepPositions", "TensorParallel", "TensorParallelError", "TorchKernels",
           "active_parallel", "argmax_workspace", "attention_workspace", "build_kernels", "default_kernels",
           "greedy_choice", "load_kernels", "pack_decoder", "pack_gate_up", "pack_qkv", "require_cuda"]

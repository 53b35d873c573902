"""The decode engine: fast batch-1 generation from a loaded runtime twin, and the kernels it runs.

``DecodeEngine(twin, capacity)`` owns its KV cache and updates it in place, packs the weights once, and on CUDA
replays the whole decode step as one CUDA graph per token (:mod:`.decode_engine`). Its kernels are the slots of
a :class:`KernelSet` (:mod:`.slots`): :class:`CompiledKernels` compiles every slot from a DSL ``@func``
(:mod:`.compiled_kernels`; the default on a CPU and for a bf16 model on CUDA), :class:`TorchKernels` fills them
with torch, and another kernel takes a slot by overriding one method. A model family describes itself to the
engine with a :class:`DecoderSpec` and :class:`DecoderWeights` (:mod:`.decoder`); the engine imports no model
family.

``packing`` lays weights out as the fused slots read them (q/k/v side by side, gate/up interleaved; the engine
packs with it); ``workspace`` keeps the buffers a slot writes between two of its kernels; ``reference`` is each
slot's meaning in torch. :mod:`.parallel` splits a model over the ranks of a tensor-parallel group
(:class:`TensorParallel`), each rank's engine running its slices through :class:`ParallelKernels`.

The engine's hand-written CUDA kernels (``kernels/*.cu``, about 2,400 lines, and ``CudaKernels``) were retired
when the compiled slots matched them (issue 22): the whole Qwen3-1.7B step 1,827 us compiled against 1,845 us
hand-written on an H100 (``bench/engine_kernels_h100.json`` at ff413b2). What they taught is now a schedule or an
epilogue the compiler chooses: weights streamed through a ring of bulk copies (``lower/matmul.py``'s streamed schedule,
``runtime/cuda/ops/matmul_stream.cuh``), each launch overlapping the one before it (programmatic dependent launch,
``runtime/cuda/dependent_launch.cuh``), the greedy head choosing the next token on the device (the ``choose`` slot).
"""

from .compiled_kernels import CompiledKernels
from .decode_engine import DecodeEngine, EngineStats, default_kernels, greedy_choice
from .decoder import DecoderLayerWeights, DecoderSpec, DecoderWeights
from .packed import PackedDecoder, PackedLayer, pack_decoder
from .packing import pack_gate_up, pack_qkv
from .parallel import TensorParallel, TensorParallelError, active_parallel
from .parallel_kernels import ParallelKernels
from .slots import KernelSet, StepPositions
from .torch_kernels import TorchKernels

_RETIRED = ("CudaKernels", "load_kernels", "build_kernels", "require_cuda", "KernelBuildError", "ENTRIES",
            "argmax_workspace", "attention_workspace")
"""The names of the retired hand-written kernels' module (issue 22), refused with the way forward."""


def __getattr__(name: str) -> object:
    """A retired name says what replaced it (``from tilefoundry.engine import CudaKernels`` raises ImportError)."""
    if name in _RETIRED:
        raise ImportError(f"tilefoundry.engine.{name} was retired with the engine's hand-written CUDA kernels: "
                          "every slot is compiled from the DSL now (CompiledKernels, the default for a bf16 model on "
                          "CUDA and on a CPU; DecodeEngine(twin, capacity) picks it), TorchKernels elsewhere")
    raise AttributeError(f"module 'tilefoundry.engine' has no attribute {name!r}")


__all__ = ["CompiledKernels", "DecodeEngine", "DecoderLayerWeights", "DecoderSpec", "DecoderWeights", "EngineStats",
           "KernelSet", "PackedDecoder", "PackedLayer", "ParallelKernels", "StepPositions", "TensorParallel",
           "TensorParallelError", "TorchKernels", "active_parallel", "default_kernels", "greedy_choice",
           "pack_decoder", "pack_gate_up", "pack_qkv"]

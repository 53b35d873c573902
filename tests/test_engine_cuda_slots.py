"""CudaKernels on the CPU: which model it takes, which kernel each slot calls with which arguments (a recording
library stands in for the CUDA one), and what falls back to the torch slots. The kernels themselves run in
tests/gpu (test_engine_kernels.py, test_engine_cuda.py)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tilefoundry.engine import CudaKernels, DecoderSpec, StepPositions, TorchKernels, default_kernels

SPEC = DecoderSpec(hidden=256, heads=4, kv_heads=2, head_dim=64, vocab=512, eps=1e-6, max_positions=2048)
BF16 = torch.bfloat16


class Recorder:
    """A kernel library that records each call (name and arguments) instead of launching anything."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def __getattr__(self, name: str) -> Any:
        if name == "attention_workspace_bytes":
            return lambda *args: 1024

        def call(*args: Any) -> None:
            self.calls.append((name, args))

        return call


def at(length: int) -> StepPositions:
    return StepPositions(torch.tensor([length], dtype=torch.int32), torch.tensor([length + 1], dtype=torch.int32),
                         length)


def test_it_takes_bf16_models_of_its_shapes_on_cuda_only() -> None:
    cuda = torch.device("cuda", 0)
    assert CudaKernels.unsupported(SPEC, BF16, cuda) is None
    assert "CUDA" in CudaKernels.unsupported(SPEC, BF16, torch.device("cpu"))
    assert "bf16" in CudaKernels.unsupported(SPEC, torch.float32, cuda)
    odd_head = DecoderSpec(hidden=256, heads=4, kv_heads=2, head_dim=32, vocab=512, eps=1e-6, max_positions=64)
    assert "head_dim" in CudaKernels.unsupported(odd_head, BF16, cuda)
    wide_group = DecoderSpec(hidden=256, heads=32, kv_heads=2, head_dim=64, vocab=512, eps=1e-6, max_positions=64)
    assert "query heads per KV head" in CudaKernels.unsupported(wide_group, BF16, cuda)
    assert not isinstance(default_kernels(BF16, torch.device("cpu")), CudaKernels)


def test_each_slot_calls_its_kernel() -> None:
    lib = Recorder()
    k = CudaKernels(lib)
    x, norm, out = torch.zeros(1, 256, dtype=BF16), torch.ones(256, dtype=BF16), torch.zeros(1, 384, dtype=BF16)
    w = torch.zeros(384, 256, dtype=BF16)
    k.norm_linear(x, norm, w, None, out, 1e-6)
    qkv, q = torch.zeros(1, 512, dtype=BF16), torch.zeros(1, 4, 64, dtype=BF16)
    cache = torch.zeros(16, 2, 64, dtype=BF16)
    table = torch.zeros(64, 64, dtype=BF16)
    pos = at(3)
    k.rope_cache(qkv, norm[:64], norm[:64], table, table, q, cache, cache, 1e-6, pos)
    k.rope_cache(qkv, None, None, table, table, q, cache, cache, 1e-6, pos)
    k.attention(q, cache, cache, q, 0.125, pos)
    k.attention(q, cache, cache, q, 0.125, pos)
    k.linear_residual(x, w.t().contiguous(), x, x)
    k.norm_swiglu(x, norm, w, out, 1e-6)
    k.head(x, norm, w, out, 1e-6)
    names = [name for name, _ in lib.calls]
    assert names == ["rmsnorm_gemv", "qk_norm_rope_cache", "rope_cache", "decode_attention", "decode_attention",
                     "gemv_residual", "rmsnorm_gemv_swiglu", "rmsnorm_gemv"]
    rope = lib.calls[1][1]
    assert rope[5] is pos.position, "the kernel reads the position from the device tensor (graph-safe)"
    first, second = lib.calls[3][1], lib.calls[4][1]
    assert first[3] is pos.position and first[5] is second[5], "one attention workspace per step shape, kept"
    assert first[5].dtype == torch.uint8 and first[6] == 0.125


def test_what_the_kernels_do_not_take_runs_the_torch_slots() -> None:
    lib = Recorder()
    k = CudaKernels(lib)
    # a q/k/v bias (Qwen2), a prefill chunk of more than 16 tokens, and f32 activations: torch computes them
    x, norm, w = torch.randn(1, 256, dtype=BF16), torch.ones(256, dtype=BF16), torch.randn(8, 256, dtype=BF16)
    out = torch.zeros(1, 8, dtype=BF16)
    k.norm_linear(x, norm, w, torch.ones(8, dtype=BF16), out, 1e-6)
    want = torch.zeros_like(out)
    TorchKernels().norm_linear(x, norm, w, torch.ones(8, dtype=BF16), want, 1e-6)
    assert torch.equal(out, want)
    long_x, long_out = torch.randn(17, 256, dtype=BF16), torch.zeros(17, 8, dtype=BF16)
    k.head(long_x, norm, w, long_out, 1e-6)
    f32 = torch.randn(1, 256)
    k.linear_residual(f32, torch.randn(256, 256), f32.clone(), torch.zeros(1, 256))
    assert lib.calls == [], f"no kernel may run on what it does not take: {[n for n, _ in lib.calls]}"


@pytest.mark.skipif(torch.cuda.is_available(), reason="the engine's default on a machine without CUDA")
def test_a_cpu_engine_defaults_to_the_compiled_slots() -> None:
    assert default_kernels(BF16, torch.device("cpu")).name == "compiled"

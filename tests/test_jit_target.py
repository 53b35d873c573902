"""The default target "cuda" is this machine's GPU: resolved to its compute capability, and refused before any
build where torch sees none (spec 1.3 keeps the default). The GPU is simulated here (torch.cuda's two calls that
target resolution reads); no compiler runs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch

from tests import compile_kernels as K
from tests import cuda_unit
from tilefoundry import CompilerOptions, compile, func, jit, lower  # noqa: A004 - the public verb
from tilefoundry.codegen import build, generate
from tilefoundry.codegen.toolchain import toolchain
from tilefoundry.dsl import Tensor
from tilefoundry.target import CudaTarget, resolve_target


def _gpu(monkeypatch: pytest.MonkeyPatch, capability: tuple[int, int] | None) -> None:
    """Make torch see one GPU of ``capability`` (None: no GPU)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: capability is not None)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)


@pytest.fixture
def no_build(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    """jit's compile step records what it was asked and builds nothing; the build step itself fails the test."""
    import tilefoundry.runtime.pipeline as pipeline

    asked: list[dict[str, Any]] = []
    monkeypatch.setattr(pipeline, "compile", lambda fn, **kw: asked.append(kw) or object())

    def compiler_ran(*args: object) -> None:
        raise AssertionError("a compiler ran")

    monkeypatch.setattr(build, "_compile", compiler_ran)
    jit.cache_clear()
    yield asked
    jit.cache_clear()


@pytest.mark.parametrize(("capability", "arch", "text"), [
    ((9, 0), "sm_90a", "cuda:nvidia.h200_sxm:sm_90a"),
    ((8, 6), "sm_86", "cuda:sm_86"),
    ((8, 0), "sm_80", "cuda:nvidia.a100:sm_80"),
    ((10, 0), "sm_100a", "cuda:nvidia.b200:sm_100a"),
    ((7, 5), "sm_75", "cuda:sm_75"),
])
def test_cuda_resolves_to_the_present_gpus_compute_capability(monkeypatch: pytest.MonkeyPatch,
                                                             no_build: list[dict[str, Any]],
                                                             capability: tuple[int, int], arch: str,
                                                             text: str) -> None:
    _gpu(monkeypatch, capability)
    target = resolve_target("cuda")
    assert isinstance(target, CudaTarget) and target.arch == arch and str(target) == text
    assert not target.without_gpu
    assert lower(K.swiglu).target == target  # the default target of lower, jit and compile is this one
    flags = toolchain(target, CompilerOptions()).flags
    assert f"arch=compute_{arch[3:]},code={arch}" in flags
    jit(K.swiglu)  # with a GPU, the default is built
    assert no_build == [{"target": "cuda", "options": CompilerOptions()}]


def test_an_architecture_or_a_device_is_named_after_cuda() -> None:
    assert resolve_target("cuda:sm_90a") == CudaTarget() == CudaTarget("sm_90a")
    # sm_90a is CudaTarget(): the recorded CUDA unit's sources (and the GPU suite's cache entries) are unchanged
    assert generate(lower(K.rms_norm, "cuda:sm_90a")).source == cuda_unit.source_of(K.rms_norm)
    assert resolve_target("cuda:nvidia.a100") == CudaTarget("nvidia.a100") == CudaTarget("sm_80")
    assert resolve_target("cuda:sm_86").arch == "sm_86" and str(resolve_target("cuda:sm_120")) == "cuda:sm_120"
    # the architecture's number, which a generation's features are asked by (clusters, bulk copies from 90)
    assert [CudaTarget(arch).sm for arch in ("sm_90a", "sm_86", "sm_100a", "sm_120")] == [90, 86, 100, 120]
    with pytest.raises(ValueError, match=r"unknown CUDA device 'sm_9'.*an architecture such as 'sm_86'"):
        resolve_target("cuda:sm_9")
    with pytest.raises(ValueError, match=r"unknown target 'gpu'; use 'cuda' \(this machine's GPU\), 'cuda:sm_90a'"):
        resolve_target("gpu")


def test_without_a_gpu_jit_refuses_the_default_target_in_one_line_before_any_build(
        monkeypatch: pytest.MonkeyPatch, no_build: list[dict[str, Any]]) -> None:
    _gpu(monkeypatch, None)
    for call in (lambda: jit(K.swiglu), lambda: jit(K.swiglu, target="cuda")):
        with pytest.raises(ValueError) as info:
            call()
        message = str(info.value)
        assert "\n" not in message
        assert message.startswith('jit: target "cuda" builds for this machine\'s GPU, and torch sees none')
        assert 'target="cpu"' in message and 'target="cuda:sm_90a"' in message
    assert no_build == [] and jit.cache_info() == {"size": 0}


def test_without_a_gpu_a_declared_cuda_target_is_refused_and_a_named_architecture_builds(
        monkeypatch: pytest.MonkeyPatch, no_build: list[dict[str, Any]]) -> None:
    _gpu(monkeypatch, None)

    @func(target="cuda")
    def on_gpu(x: Tensor[(4,), "f32"]):
        return x + 1.0

    @func(target=CudaTarget("nvidia.a100"))
    def on_a100(x: Tensor[(4,), "f32"]):
        return x + 1.0

    with pytest.raises(ValueError, match='jit: target "cuda" builds for this machine'):
        jit(on_gpu)
    jit(K.swiglu, target="cuda:sm_90a")
    jit(K.swiglu, target=CudaTarget("nvidia.h100_sxm"))
    jit(on_a100)  # the Module names its device: built for it
    jit(K.swiglu, target="cpu")
    assert [kw["target"] for kw in no_build] == ["cuda:sm_90a", CudaTarget("nvidia.h100_sxm"), "cuda", "cpu"]
    assert lower(K.swiglu).target == CudaTarget()  # lowering (printing TIR) needs no GPU


def test_without_a_gpu_compile_refuses_the_default_target_before_the_compiler_runs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _gpu(monkeypatch, None)
    monkeypatch.setattr(build, "_compile", lambda *a: pytest.fail("a compiler ran"))
    with pytest.raises(ValueError, match='building swiglu: target "cuda" builds for this machine.*target="cpu"'):
        compile(K.swiglu)

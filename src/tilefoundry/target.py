"""Compile targets: where generated code runs. Metadata until lowering and codegen read it."""

from __future__ import annotations

from dataclasses import dataclass

# Device names people write, and the architecture codegen builds for.
_CUDA_DEVICES = {
    "nvidia.h100_sxm": "sm_90a",
    "nvidia.h100_pcie": "sm_90a",
    "nvidia.h200_sxm": "sm_90a",
    "nvidia.a100": "sm_80",
    "nvidia.l4": "sm_89",
    "nvidia.b200": "sm_100a",
}


@dataclass(frozen=True)
class CudaTarget:
    """An NVIDIA GPU, named by device (``CudaTarget("nvidia.h200_sxm")``); ``arch`` drives nvcc flags."""

    device: str = "nvidia.h200_sxm"

    def __post_init__(self) -> None:
        if self.device not in _CUDA_DEVICES:
            raise ValueError(f"unknown CUDA device {self.device!r}; known: {', '.join(sorted(_CUDA_DEVICES))}")

    @property
    def arch(self) -> str:
        """The SM architecture, e.g. ``sm_90a``."""
        return _CUDA_DEVICES[self.device]

    @property
    def kind(self) -> str:
        """``"cuda"``."""
        return "cuda"

    def __str__(self) -> str:
        return f"cuda:{self.device}:{self.arch}"


@dataclass(frozen=True)
class CpuTarget:
    """The host CPU: CTAs become iterations of a parallel loop, the thread level has extent 1."""

    @property
    def kind(self) -> str:
        """``"cpu"``."""
        return "cpu"

    def __str__(self) -> str:
        return "cpu"


Target = CudaTarget | CpuTarget


def resolve_target(spec: str | Target) -> Target:
    """``"cuda"`` / ``"cpu"`` / a target instance to a target instance."""
    if isinstance(spec, (CudaTarget, CpuTarget)):
        return spec
    if spec == "cuda":
        return CudaTarget()
    if spec == "cpu":
        return CpuTarget()
    raise ValueError(f"unknown target {spec!r}; use 'cuda', 'cpu', CudaTarget(device) or CpuTarget()")

"""Compile targets: where generated code runs. Metadata until lowering and codegen read it.

``"cuda"`` means this machine's GPU: it resolves to the compute capability of torch's current CUDA device
(9.0 builds sm_90a, as ``CudaTarget()``; 8.6 builds sm_86). Where torch sees no GPU it still resolves, to the
default ``CudaTarget()`` (lowering and printing TIR need no GPU), but that target is marked
:attr:`CudaTarget.without_gpu` and building it is refused (:func:`refuse_without_gpu`): naming the
architecture (``"cuda:sm_90a"``) or the device (``CudaTarget("nvidia.h200_sxm")``) builds CUDA code anyway.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Device names people write, and the architecture codegen builds for.
_CUDA_DEVICES = {
    "nvidia.h100_sxm": "sm_90a",
    "nvidia.h100_pcie": "sm_90a",
    "nvidia.h200_sxm": "sm_90a",
    "nvidia.a100": "sm_80",
    "nvidia.l4": "sm_89",
    "nvidia.b200": "sm_100a",
}
# The device that stands for an architecture: a target named by that architecture, or resolved from a GPU of it,
# is this device's (so ``CudaTarget("sm_90a") == CudaTarget()``, one generated source and one cache entry).
_ARCH_DEVICE = {"sm_90a": "nvidia.h200_sxm", "sm_80": "nvidia.a100", "sm_89": "nvidia.l4", "sm_100a": "nvidia.b200"}
# An architecture named by itself: sm_XY or sm_XYZ, with "a" for the architecture-specific features.
_ARCH = re.compile(r"sm_[1-9][0-9]{1,2}a?")


@dataclass(frozen=True)
class CudaTarget:
    """An NVIDIA GPU, named by device (``CudaTarget("nvidia.h200_sxm")``) or by architecture
    (``CudaTarget("sm_86")``); ``arch`` drives nvcc flags.

    An architecture that a known device stands for becomes that device (``CudaTarget("sm_90a")`` is
    ``CudaTarget("nvidia.h200_sxm")``).
    """

    device: str = "nvidia.h200_sxm"
    # True for "cuda" resolved where torch sees no GPU: the architecture is the default one, not this machine's.
    # Not compared: such a target lowers and generates exactly as CudaTarget() does; only a build refuses it.
    without_gpu: bool = field(default=False, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.device in _ARCH_DEVICE:
            object.__setattr__(self, "device", _ARCH_DEVICE[self.device])
        if self.device not in _CUDA_DEVICES and not (isinstance(self.device, str) and _ARCH.fullmatch(self.device)):
            raise ValueError(f"unknown CUDA device {self.device!r}; name a device ({', '.join(sorted(_CUDA_DEVICES))}) "
                             "or an architecture such as 'sm_86' or 'sm_90a'")

    @classmethod
    def of_capability(cls, major: int, minor: int) -> CudaTarget:
        """The target of a GPU of compute capability ``major.minor``: its architecture-specific variant where a
        known device has one (9.0: sm_90a, 10.0: sm_100a), else ``sm_<major><minor>``."""
        arch = f"sm_{major}{minor}"
        return cls(f"{arch}a" if f"{arch}a" in _ARCH_DEVICE else arch)

    @property
    def arch(self) -> str:
        """The SM architecture, e.g. ``sm_90a``."""
        return _CUDA_DEVICES.get(self.device, self.device)

    @property
    def sm(self) -> int:
        """The architecture's number, e.g. 90 for ``sm_90a``: what a feature of a generation on asks for (thread-block
        clusters and bulk copies from 90)."""
        return int(self.arch.removeprefix("sm_").rstrip("a"))

    @property
    def kind(self) -> str:
        """``"cuda"``."""
        return "cuda"

    def __str__(self) -> str:
        if self.device == self.arch:
            return f"cuda:{self.arch}"
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


def gpu_capability() -> tuple[int, int] | None:
    """The compute capability of torch's current CUDA device, or None where torch sees no GPU."""
    import torch

    if not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability()
    return int(major), int(minor)


def resolve_target(spec: str | Target) -> Target:
    """``"cuda"`` (this machine's GPU), ``"cuda:<arch or device>"`` (e.g. ``"cuda:sm_90a"``), ``"cpu"`` or a
    target instance to a target instance.

    ``"cuda"`` where torch sees no GPU gives the default ``CudaTarget()`` marked ``without_gpu``: it lowers and
    generates code, and a build refuses it (:func:`refuse_without_gpu`).
    """
    if isinstance(spec, (CudaTarget, CpuTarget)):
        return spec
    if spec == "cuda":
        capability = gpu_capability()
        if capability is not None:
            return CudaTarget.of_capability(*capability)
        target = CudaTarget()
        object.__setattr__(target, "without_gpu", True)
        return target
    if spec == "cpu":
        return CpuTarget()
    if isinstance(spec, str) and spec.startswith("cuda:"):
        return CudaTarget(spec.removeprefix("cuda:"))
    raise ValueError(f"unknown target {spec!r}; use 'cuda' (this machine's GPU), 'cuda:sm_90a' (an architecture, "
                     "with or without a GPU), 'cpu', CudaTarget(device) or CpuTarget()")


def refuse_without_gpu(target: Target, verb: str) -> None:
    """Raise ValueError, in one line naming the ways out, when ``target`` is ``"cuda"`` resolved with no GPU."""
    if isinstance(target, CudaTarget) and target.without_gpu:
        raise ValueError(f'{verb}: target "cuda" builds for this machine\'s GPU, and torch sees none '
                         '(torch.cuda.is_available() is False); pass target="cpu" to compile for this CPU, or name '
                         'the GPU architecture to build CUDA code without one, e.g. target="cuda:sm_90a"')

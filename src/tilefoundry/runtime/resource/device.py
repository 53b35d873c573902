"""Checking a resource's ``device`` argument up front, before any tensor is read."""

from __future__ import annotations

import torch

__all__ = ["resolve_device", "resolve_run_device"]


def resolve_device(device: str | torch.device) -> torch.device:
    """Return ``device`` as a ``torch.device`` that can hold a tensor on this machine.

    Raises:
        TypeError: ``device`` is neither a str nor a torch.device.
        ValueError: torch does not know the device string, or knows it but cannot place a tensor there
            here (no CUDA, a GPU index past the last one, ...); the message names the device.
    """
    if isinstance(device, torch.device):
        dev = device
    elif isinstance(device, str):
        try:
            dev = torch.device(device)
        except RuntimeError as exc:
            raise ValueError(
                f"device {device!r} is not a device torch knows ({exc}); pass e.g. 'cpu', 'cuda' or 'cuda:0'"
            ) from None
    else:
        raise TypeError(
            f"device must be a str such as 'cuda:0' or a torch.device, got {type(device).__name__}"
        )
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {str(device)!r}: CUDA is not available on this machine; pass device='cpu'")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ValueError(
            f"device {str(device)!r}: this machine has {torch.cuda.device_count()} CUDA device(s), numbered "
            f"from 0; pass one of them"
        )
    try:
        torch.empty(0, device=dev)
    except (RuntimeError, NotImplementedError) as exc:
        raise ValueError(f"device {str(device)!r} cannot hold a tensor on this machine: {exc}") from None
    return dev


def resolve_run_device(device: str | torch.device) -> torch.device:
    """Return ``device`` as a ``torch.device`` a model can run on here: the CPU or a present CUDA device.

    Weights, inputs and caches are real tensors, so a device that holds no data (``meta``) or one this
    project does not run on is refused, as is one :func:`resolve_device` refuses.

    Raises:
        TypeError / ValueError: as :func:`resolve_device`; ValueError also for a device of another type.
    """
    dev = resolve_device(device)
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(
            f"device {str(device)!r} is not one a model runs on (it holds no data, or is not supported); "
            "use cpu, cuda or cuda:N"
        )
    if dev.type == "cpu" and dev.index not in (None, 0):
        raise ValueError(f"device {str(device)!r}: the CPU is one device here, with no numbered ones; use cpu")
    return dev

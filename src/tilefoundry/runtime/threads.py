"""How many CPU threads a model runs on: torch's intra-op pool and the compiled kernels' OpenMP alike.

The default is ``OMP_NUM_THREADS`` where it is set (its first level, as OpenMP reads "4,2"), as torch and
OpenMP programs take it; else the number of physical cores this process may run on: the CPUs of its affinity
mask (``taskset``, a container's cpuset), each core's hyperthread siblings counted once. More threads than that
only make the threads wait on each other: on a busy 2-core machine the decode engine ran 4-8x slower with
oversubscribed threads than with one (a CLI call beside another busy process: 64 s against 5.7 s).
"""

from __future__ import annotations

import ctypes
import os
import warnings
from pathlib import Path

__all__ = ["available_cpus", "default_threads", "physical_cores", "set_threads"]


def available_cpus() -> set[int]:
    """The CPUs this process may run on (its affinity mask; every CPU where the platform has no masks)."""
    if hasattr(os, "sched_getaffinity"):
        return set(os.sched_getaffinity(0))
    return set(range(os.cpu_count() or 1))


def physical_cores(cpus: set[int] | None = None, sysfs: Path = Path("/sys/devices/system/cpu")) -> int:
    """Distinct physical cores among ``cpus`` (default: :func:`available_cpus`), from the kernel's CPU topology
    (package and core id of each CPU); the CPU count itself where the topology cannot be read."""
    cpus = available_cpus() if cpus is None else cpus
    cores = set()
    for cpu in cpus:
        topology = sysfs / f"cpu{cpu}" / "topology"
        try:
            package = (topology / "physical_package_id").read_text().strip()
            core = (topology / "core_id").read_text().strip()
        except OSError:
            return max(len(cpus), 1)
        cores.add((package, core))
    return max(len(cores), 1)


def default_threads() -> int:
    """The thread count used when none is given: ``OMP_NUM_THREADS`` where it is set (its first level), else the
    physical cores this process may run on. A value that is not a whole number >= 1 is ignored, with a warning
    naming it."""
    value = os.environ.get("OMP_NUM_THREADS", "").strip()
    if value:
        first = value.split(",")[0].strip()
        if first.isdigit() and int(first) >= 1:
            return int(first)
        warnings.warn(f"OMP_NUM_THREADS={value!r} is not a thread count (a whole number >= 1); using the "
                      f"{physical_cores()} physical cores this process may run on", RuntimeWarning, stacklevel=2)
    return physical_cores()


def set_threads(threads: int | None = None) -> int:
    """Run torch's CPU operators and the compiled kernels' OpenMP loops on ``threads`` threads (default:
    :func:`default_threads`); returns the count.

    Sets torch's intra-op pool, ``OMP_NUM_THREADS`` for OpenMP runtimes loaded later (the compiled kernels'
    libgomp reads it when their first library loads), and the count of a libgomp already loaded.

    Raises:
        TypeError / ValueError: ``threads`` is not an integer >= 1.
    """
    if threads is None:
        threads = default_threads()
    if isinstance(threads, bool) or not isinstance(threads, int):
        raise TypeError(f"threads must be an integer >= 1, got {type(threads).__name__} {threads!r}")
    if threads < 1:
        raise ValueError(f"threads must be an integer >= 1, got {threads}")
    import torch

    torch.set_num_threads(threads)
    os.environ["OMP_NUM_THREADS"] = str(threads)
    try:  # the compiled kernels' OpenMP runtime, when one of their libraries is loaded already
        gomp = ctypes.CDLL("libgomp.so.1", mode=getattr(os, "RTLD_NOLOAD", 0) | ctypes.RTLD_GLOBAL)
    except OSError:
        return threads
    gomp.omp_set_num_threads(ctypes.c_int(threads))
    return threads

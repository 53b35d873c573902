"""What the CPU benches share: the mean time of a call over a run of calls, and their JSON with the host's facts
(machine, cores, torch and its threads, the OpenMP settings the timings depend on)."""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Callable
from typing import Any


def mean_time(fn: Callable[[], object], iters: int) -> float:
    """Seconds per call of ``fn``, over ``iters`` calls one after another."""
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - start) / iters


def write_results(path: str, results: list[dict[str, Any]]) -> None:
    """``{"meta": <the host's facts>, "results": results}`` as JSON at ``path``."""
    import torch

    meta = {"machine": platform.machine(), "cpu_count": os.cpu_count(), "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(), "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY")}
    with open(path, "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=2)
        f.write("\n")

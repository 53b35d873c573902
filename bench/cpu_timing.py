"""What the CPU benches share: their host options (iterations, threads, OpenMP wait policy, JSON), the timing of
several sides in alternating order, and their JSON with the host's facts (machine, cores, torch and its threads,
the OpenMP settings the timings depend on)."""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable, Iterable
from typing import Any


def add_host_options(parser: argparse.ArgumentParser) -> None:
    """``--iters``, ``--threads``, ``--spin`` and ``--json``, as every CPU bench takes them."""
    parser.add_argument("--iters", type=int, default=0, help="calls per repetition (0: about 50 ms worth)")
    parser.add_argument("--threads", type=int, default=0, help="threads for both sides (0: leave the defaults)")
    parser.add_argument("--spin", action="store_true", help="keep OpenMP's default (spinning) wait policy")
    parser.add_argument("--json", help="write the results here")


def sequence_bench_args(doc: str, seqs: list[int], shapes: Iterable[str], least: int, most: int,
                        why: str = "") -> argparse.Namespace:
    """The options of a bench over prompt lengths and named shapes, parsed: ``--seq`` (``seqs`` by default, each in
    [least, most]; ``why`` says why outside), ``--shapes`` (a subset of ``shapes``), ``--reps`` and the host options;
    the threads applied."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seq", type=int, nargs="+", default=seqs)
    ap.add_argument("--shapes", nargs="+", choices=sorted(shapes), help="a subset of the shapes, by name")
    ap.add_argument("--reps", type=int, default=7)
    add_host_options(ap)
    args = ap.parse_args()
    bad = [s for s in args.seq if not least <= s <= most]
    if bad:
        ap.error(f"--seq: {bad} outside [{least}, {most}]{why}")
    apply_threads(args.threads)
    return args


def apply_threads(threads: int) -> None:
    """Both sides on ``threads`` threads (torch's intra-op pool and the kernels' OpenMP CTAs); 0 leaves them."""
    if threads:
        import torch

        torch.set_num_threads(threads)
        os.environ["OMP_NUM_THREADS"] = str(threads)


def alternating_medians(sides: dict[str, Callable[[], object]], iters: int, reps: int,
                        first: str = "compiled") -> tuple[int, dict[str, float]]:
    """Seconds per call of each side: every side warmed once, then ``reps`` rounds timing each side in turn over
    ``iters`` calls (0: about 50 ms of ``first``'s calls), the median per side. Returns (iters, medians)."""
    for side in sides.values():
        side()
    iters = iters or max(3, int(0.05 / max(mean_time(sides[first], 3), 1e-7)))
    times: dict[str, list[float]] = {k: [] for k in sides}
    for _ in range(reps):
        for name, side in sides.items():
            times[name].append(mean_time(side, iters))
    return iters, {k: statistics.median(v) for k, v in times.items()}


def mean_time(fn: Callable[[], object], iters: int) -> float:
    """Seconds per call of ``fn``, over ``iters`` calls one after another."""
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - start) / iters


# The instruction sets that decide who wins a CPU GEMM: AVX-512's vectors, its bf16 dot products, and AMX's bf16
# tiles (torch's bf16 GEMM and this project's blocked tier both run on AMX where the CPU has it).
CPU_FEATURES = ("avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields in /proc/cpuinfo, by name (empty where it cannot be read)."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():  # the first processor's block ends
                    break
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        return {}
    return fields


def cpu_features() -> list[str]:
    """Which of CPU_FEATURES this machine has (from /proc/cpuinfo; empty where it cannot be read)."""
    flags = _cpuinfo().get("flags", "").split()
    return [name for name in CPU_FEATURES if name in flags]


def cpu_model() -> dict[str, str]:
    """The CPU's model name, family and model number (from /proc/cpuinfo; empty where it cannot be read): hosts
    of one name differ (an AMD EPYC of family 25 is a Zen 4, of family 26 a Zen 5, its vectors twice as wide)."""
    info = _cpuinfo()
    keys = {"model name": "name", "cpu family": "family", "model": "model"}
    return {out: info[key] for key, out in keys.items() if key in info}


def write_results(path: str, results: list[dict[str, Any]]) -> None:
    """``{"meta": <the host's facts>, "results": results}`` as JSON at ``path``."""
    import torch

    meta = {"machine": platform.machine(), "cpu": cpu_model(), "cpu_count": os.cpu_count(),
            "cpu_features": cpu_features(),
            "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"), "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY")}
    with open(path, "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=2)
        f.write("\n")

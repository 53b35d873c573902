"""Timing GPU work as CUDA-graph replays, shared by the benches (bench/kernels.py, bench/engine_kernels.py).

A variant is a launch function of a copy index; its graph holds ``launches`` back-to-back launches cycling
through the copies of its inputs and outputs (enough copies that their total exceeds L2 several times over,
so that no launch finds its data there, nor writes where the launch before it wrote: outputs torch allocates
are held so that they cycle too). One launch's time is a replay's divided by the count, the median over
replays interleaved between the variants, so launch overhead is the same for all of them (a graph's). The
ceiling is torch's device-to-device copy of 1 GiB, counted as bytes read plus bytes written.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Callable

import torch

Launch = Callable[[int], object]  # launch on copy i of the inputs


def copies_for(nbytes: int, most: int = 64) -> int:
    """Copies whose total is four times L2, so that no launch finds its data there (at least 2)."""
    l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
    return max(2, min(most, math.ceil(4 * l2 / max(nbytes, 1))))


def graph_of(launch: Launch, launches: int, copies: int) -> torch.cuda.CUDAGraph:
    """A graph of ``launches`` launches cycling through ``copies`` (warmed up outside the capture first).

    What a launch returns (the outputs torch allocates) is held until ``copies`` later launches have been
    captured, so that those outputs cycle through as many buffers as the inputs do. Dropped at once, each
    would be freed into the graph's pool and the next launch would write the same buffer again, which then
    stays in L2: a launch that returns its outputs would be timed writing to cache, one given its outputs
    (ours, the same-bytes kernel) writing to DRAM.
    """
    for i in range(min(copies, 3)):  # lazy initialisation, module loading, library handles
        launch(i)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    held: deque[object] = deque(maxlen=copies)
    with torch.cuda.graph(graph):
        for j in range(launches):
            held.append(launch(j % copies))
    held.clear()
    return graph


def time_graphs(graphs: dict[str, torch.cuda.CUDAGraph], launches: int, reps: int) -> dict[str, float]:
    """Median microseconds of one launch, replays interleaved across the variants."""
    samples: dict[str, list[float]] = {k: [] for k in graphs}
    for g in graphs.values():
        g.replay()
    torch.cuda.synchronize()
    for _ in range(reps):
        for name, g in graphs.items():
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            g.replay()
            end.record()
            end.synchronize()
            samples[name].append(start.elapsed_time(end) * 1e3 / launches)
    return {k: statistics.median(v) for k, v in samples.items()}


def copy_bandwidth(reps: int) -> float:
    """torch's device-to-device copy in TB/s, counting bytes read and written (1 GiB), median of ``reps``."""
    src = torch.empty(1 << 29, dtype=torch.bfloat16, device="cuda").normal_()
    dst = torch.empty_like(src)
    dst.copy_(src)
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e-3)
    return 2 * src.numel() * 2 / statistics.median(times) / 1e12

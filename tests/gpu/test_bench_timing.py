"""The benches' CUDA-graph timing (bench/graph_timing.py) on the GPU: what every variant of bench/kernels.py
and bench/engine_kernels.py is measured through, so that its premise holds for all of them alike.

A launch that returns what it allocates (torch eager, torch.compile) must write a different buffer at each
of ``copies`` consecutive launches, as a launch handed its outputs does; were each output freed into the
graph's pool at once, every launch would rewrite the same buffer, kept in L2.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from graph_timing import graph_of  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_outputs_a_launch_returns_cycle_through_as_many_buffers_as_the_copies() -> None:
    copies, launches = 4, 12
    inputs = [torch.full((1 << 16,), float(i), device="cuda") for i in range(copies)]
    written: list[int] = []

    def launch(i: int) -> torch.Tensor:
        out = inputs[i] * 2.0
        if torch.cuda.is_current_stream_capturing():
            written.append(out.data_ptr())
        return out

    graph = graph_of(launch, launches, copies)
    assert len(written) == launches
    for j in range(launches - copies + 1):
        window = written[j:j + copies]
        assert len(set(window)) == copies, f"launches {j}..{j + copies - 1} wrote {len(set(window))} buffers"
    graph.replay()
    torch.cuda.synchronize()


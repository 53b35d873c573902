"""Rows that no whole number of warps tiles (hidden 4095, 333, 50257, and 2000 = 250 vectors of 8), on the
GPU: each is padded over a CTA of threads, its length the bound of its layouts (lower/layouts.py, runtime
shard_layout.h), so a thread's last elements may be padding that no op reads, writes or reduces. RMSNorm,
residual + RMSNorm, softmax and SwiGLU jitted for CUDA are checked against the evaluator with the acceptance
tolerances (tests/compile_kernels.py), outputs handed in filled with NaN (all must be overwritten: the padding
of the last row of a thread would show as NaN or as a write past the tensor) and the evaluator refusing to run
meanwhile. Row counts 1, 13 and 130 from one build. The CPU suite checks the schedule and the generated text
(tests/test_compile_cuda.py) and the bounded views on the host (tests/cpp/test_bounded_rows.cpp).
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root, for tests.*

from tests import compile_kernels as K  # noqa: E402
from tests.compile_kernels import compiled_only, expectations, inputs_for  # noqa: E402

from tilefoundry import jit  # noqa: E402
from tilefoundry.runtime import CompiledModule  # noqa: E402
from tilefoundry.runtime.check import check  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

HIDDEN = (4095, 333, 50257, 2000)
KERNELS = tuple(k for hidden in HIDDEN for k in K.row_kernels(hidden))
ROW_COUNTS = (1, 13, 130)


@pytest.fixture(scope="module")
def compiled() -> dict[str, CompiledModule]:
    """Every kernel jitted for CUDA; the nvcc builds first run side by side into the disk cache."""
    from tilefoundry.codegen import generate, link
    from tilefoundry.lower import lower
    from tilefoundry.target import CudaTarget

    linkables = [generate(lower(k, CudaTarget())) for k in KERNELS]
    with ThreadPoolExecutor(max_workers=max(1, min(len(linkables), os.cpu_count() or 1))) as pool:
        list(pool.map(link, linkables))
    return {k.name: jit(k) for k in KERNELS}


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.name)
def test_a_padded_row_kernel_matches_the_evaluator(compiled: dict[str, CompiledModule], kernel: Any) -> None:
    c = compiled[kernel.name]
    for rows in ROW_COUNTS:
        inputs = inputs_for(kernel, rows, "cuda")
        report = check(compiled_only(c), kernel, inputs, expect=expectations(kernel))
        assert report.passed, f"{kernel.name} at {rows} rows:\n{report}"


def test_a_padded_row_writes_nothing_past_its_tensor(compiled: dict[str, CompiledModule]) -> None:
    """The output of 3 rows of 4095 is a view into a larger buffer whose tail holds a sentinel: the last
    thread's padding (1 element of its 16) lies past the row, and must stay unwritten."""
    kernel = K.row_kernels(4095)[3]  # swiglu
    gate, up = inputs_for(kernel, 3, "cuda")
    room = torch.full((3 * 4095 + 64,), 7.0, dtype=torch.bfloat16, device="cuda")
    out = room[: 3 * 4095].view(3, 4095)
    compiled[kernel.name](gate, up, out)
    torch.cuda.synchronize()
    assert torch.equal(room[3 * 4095:], torch.full((64,), 7.0, dtype=torch.bfloat16, device="cuda"))
    ref = torch.nn.functional.silu(gate.float()).to(torch.bfloat16).float() * up.float()
    torch.testing.assert_close(out.float(), ref, atol=1e-3, rtol=2**-6)

"""topk compiled for CUDA on the GPU, where torch leaves the answer open: rows with ties, several NaNs and signed
zeros, through each tier of ops::topk (topk_rows: a row over 4 threads of a warp, shuffles; topk_wide: 128
threads, shuffles then shared memory across warps; topk_any_width: a row known only at launch, padded over 256
threads). The values must equal torch's exactly, the indices pick them (no position twice, equal values in the
order of their positions) and equal torch's where a value occurs once in its row: tests/test_compile_topk.py's
rules, on the CPU there. Against the evaluator on rows of distinct values, the kernels run with the acceptance
set (tests/gpu/test_compile_cuda.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root, for tests.*

from tests import compile_kernels as K  # noqa: E402
from tests.compile_kernels import compiled_only  # noqa: E402
from tests.test_compile_topk import disagreements, tied_rows  # noqa: E402

from tilefoundry import jit  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.parametrize("kernel", K.TOPK, ids=lambda k: k.name)
@pytest.mark.parametrize("rows", [7, 130, 4096])
def test_ties_nans_and_signed_zeros_give_torchs_values_in_position_order(kernel, rows: int) -> None:
    compiled = jit(kernel)
    widths = (8, 33, 300, 4000) if kernel is K.topk_any_width else (None,)
    for width in widths:
        shape = {"topk_rows": (rows, K.HIDDEN), "topk_any_width": (rows, width),
                 "topk_wide": (2, rows, 2048)}[kernel.name]
        x, xb = tied_rows(shape, 33)
        inputs = tuple(t.cuda() for t in ((xb,) if kernel is K.topk_wide else (x, xb)))
        outs = compiled_only(compiled)(*inputs)
        assert disagreements(kernel.name, inputs, outs) == [], f"{kernel.name} at {rows} rows, width {width}"


@pytest.mark.parametrize("width", [8, 33, 4000])
def test_distinct_rows_of_a_length_known_at_launch_give_torchs_answer(width: int) -> None:
    compiled = jit(K.topk_any_width)
    inputs = K.distinct_rows((13, width), 34, "cuda")
    outs = compiled_only(compiled)(*inputs)
    assert disagreements("topk_any_width", inputs, outs) == []
    ref = torch.topk(inputs[0], 2, dim=-1)
    assert torch.equal(outs[1], ref.indices)  # distinct values: torch's positions exactly

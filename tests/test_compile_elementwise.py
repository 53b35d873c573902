"""What the compiled rounding, division and argmax kernels give where the evaluator has no answer to compare
with: an integer floor_div / mod by zero gives 0 (torch raises, which a kernel cannot; the process goes on). An
argmax along another axis than the last compiles: tests/test_compile_other_axes.py.
The values against the evaluator are tests/test_compile_kernels.py's (the kernels of tests/compile_kernels.py)."""

from __future__ import annotations

import pytest
import torch

from tests import compile_kernels as K
from tests.compile_kernels import evaluator_refuses
from tilefoundry import jit
from tilefoundry.dsl import DimVar

pytestmark = pytest.mark.usefixtures("compile_cache")
ROWS = DimVar("rows", 0, 1 << 20)


def test_an_integer_floor_div_or_mod_by_zero_gives_zero_and_the_lowest_value_over_minus_one_wraps() -> None:
    compiled = jit(K.rounding_and_division, target="cpu")
    x = torch.ones(2, K.HIDDEN)
    a = torch.tensor([[7, -7, 0, -(1 << 31)]], dtype=torch.int32).repeat(2, K.HIDDEN // 4)
    b = torch.zeros_like(a)
    b[1] = -1
    c, d = a.long(), b.long()
    c[0, 3], c[1, 3] = -(1 << 63), -(1 << 63)
    with evaluator_refuses():
        outs = compiled(x, x, x.bfloat16(), x.bfloat16(), a, b, c, d)
    quotient, remainder, wide_quotient, wide_remainder = outs[10], outs[11], outs[14], outs[15]
    for t in (quotient, remainder, wide_quotient, wide_remainder):
        assert torch.equal(t[0], torch.zeros_like(t[0]))  # by zero: 0
    assert torch.equal(quotient[1], -a[1]) and torch.equal(remainder[1], torch.zeros_like(a[1]))  # by -1
    assert quotient[1, 3] == -(1 << 31) and wide_quotient[1, 3] == -(1 << 63)  # wraps, as torch.floor_divide

"""An output computed element by element from an input of its own shape may be that input: the caller passes one
tensor as both, and the compiled function updates it in place (``lower/staged.py``, ``rows_in_place``; a matmul's
epilogue has the same rule, tests/test_compile_epilogue.py). ``bump`` below is greedy decoding's next step inputs
(the chosen token in row 0, the position and context one more) written so.

Anything else that reads the input (a reduction along its rows, a view of another shape, another op, the
function returning it) keeps the input and the output apart: the entry refuses one tensor passed as both.
"""

from __future__ import annotations

import pytest
import torch

from tilefoundry import func, jit, lower
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, tf

pytestmark = pytest.mark.usefixtures("compile_cache")

M = DimVar("m", 1, 65)


@func
def bump(step: Tensor[(3, 4), "i32"], keep: ConstTensor[(3, 4), "i32"], put: ConstTensor[(3, 4), "i32"],
         token: Tensor[(1,), "i64"]):
    # row 0 column 0 takes the token, the rest of column 0 one more, the other columns as they are
    return tf.where(put == 1, tf.cast(token, "i32"), step + keep)


@func
def scaled(x: Tensor[(M, 1000), "f32"], gain: ConstTensor[(1000,), "f32"]):
    return tf.where(x > 0.0, x * gain, x - 1.0)


def _aliases(fn) -> tuple[tuple[str, str], ...]:
    return lower(fn, "cpu").functions[fn.name].aliases


def test_the_next_step_inputs_are_updated_in_place() -> None:
    assert _aliases(bump) == (("out", "step"),)  # never a ConstTensor
    compiled = jit(bump, target="cpu")
    step = torch.tensor([[7, 0, 0, 0], [41, 0, 0, 0], [42, 0, 0, 0]], dtype=torch.int32)
    keep = torch.tensor([[0, 0, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0]], dtype=torch.int32)
    put = torch.tensor([[1, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]], dtype=torch.int32)
    token = torch.tensor([1234])
    want = bump(step.clone(), keep, put, token)
    got = compiled(step, keep, put, token, step)
    assert got is step
    assert torch.equal(step, want)
    assert step[:, 0].tolist() == [1234, 42, 43]


def test_wide_rows_are_updated_in_place() -> None:
    assert _aliases(scaled) == (("out", "x"),)
    compiled = jit(scaled, target="cpu")
    x = torch.randn(37, 1000)
    gain = torch.rand(1000) + 0.5
    want = scaled(x.clone(), gain)
    got = compiled(x, gain, x)
    assert got is x
    torch.testing.assert_close(x, want, rtol=0, atol=0)


def test_an_output_overlapping_its_input_elsewhere_is_refused() -> None:
    compiled = jit(scaled, target="cpu")
    memory = torch.zeros(2 * 5 * 1000 + 1)
    x = memory[:5000].view(5, 1000)
    out = memory[1:5001].view(5, 1000)
    with pytest.raises(ValueError, match=r"scaled: output out overlaps input x without being it"):
        compiled(x, torch.ones(1000), out)


@func
def normalised(x: Tensor[(M, 64), "f32"]):
    return tf.softmax(x)


@func
def broadcast(x: Tensor[(1, 64), "f32"], y: Tensor[(M, 64), "f32"]):
    return x + y


@func
def also_read(x: Tensor[(M, 64), "f32"]):
    return x * 2.0, tf.reduce(x, axes=(-1,), keepdim=False, kind="sum")


@func
def also_returned(x: Tensor[(M, 64), "f32"]):
    return x * 2.0, x


@pytest.mark.parametrize(("fn", "want"), [(normalised, ()), (broadcast, (("out", "y"),)), (also_read, ()),
                                          (also_returned, ())], ids=lambda p: getattr(p, "name", ""))
def test_no_alias_where_an_element_is_read_elsewhere(fn, want) -> None:
    """A row's reduction reads every element before any is written; a broadcast input (broadcast's x) is read by
    every row, while its other operand, read element by element, may be the output; an input another op reads or
    the function returns must survive the call."""
    assert _aliases(fn) == want


def test_a_reduction_refuses_its_input_as_its_output() -> None:
    compiled = jit(normalised, target="cpu")
    x = torch.randn(4, 64)
    with pytest.raises(ValueError, match=r"normalised: output out shares memory with input x; pass an output "
                                         r"tensor of its own"):
        compiled(x, x)

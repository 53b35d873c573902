"""Slicing traced values: Python's rules on static axes, provable bounds on DimVar axes, recorded as slice + reshape."""

from __future__ import annotations

import pytest
import torch

from tilefoundry import func
from tilefoundry.dsl import DimVar, Tensor
from tilefoundry.ir.core.errors import IRIndexError, IRTypeError

X_SHAPE = (4, 6, 8)
STATIC_KEYS = [
    (slice(None), slice(None, 3)),  # x[:, :K]
    (Ellipsis, slice(2, 5)),  # x[..., a:b]
    (slice(None), 2),  # x[:, i] drops the axis
    (slice(None), -1),  # negative int
    (-2,),
    (slice(-3, None),),  # negative start
    (slice(None), slice(-100, 100)),  # out-of-range bounds clamp
    (slice(5, 2),),  # empty
    (slice(10, 20),),  # starts past the end: empty
    (slice(None, None, 2), slice(1, None, 3)),  # steps
    (1, Ellipsis, 0),
    (None, slice(1, 3)),  # None adds an axis
    (slice(None), None, 3, None),
    (Ellipsis,),
    (3, 5, 7),
    (slice(None, -1), Ellipsis, slice(None, None, 3)),
]


def _key_id(key: tuple) -> str:
    return repr(key).replace(" ", "")


def _indexer(key):  # noqa: ANN001, ANN202
    @func
    def index(x: Tensor[X_SHAPE, "f32"]):
        return x[key] + 0.0  # one op at least, also when the index records nothing

    return index


@pytest.mark.parametrize("key", STATIC_KEYS, ids=[_key_id(k) for k in STATIC_KEYS])
def test_static_indexing_follows_python_and_torch(key: tuple) -> None:
    x = torch.arange(4 * 6 * 8, dtype=torch.float32).reshape(X_SHAPE)
    fn = _indexer(key)
    want = x[key]
    assert tuple(fn.output_types.shape) == tuple(want.shape)
    assert torch.equal(fn(x), want)
    ops = [n.op for n in fn.graph.nodes]
    assert set(ops) <= {"slice", "reshape", "constant", "add"}


def test_an_index_records_one_slice_and_one_reshape() -> None:
    @func
    def f(x: Tensor[X_SHAPE, "f32"]):
        return x[:, 2, 1:5]

    (sl, rs) = f.graph.nodes
    assert (sl.op, rs.op) == ("slice", "reshape")
    assert sl.attrs == {"starts": (0, 2, 1), "sizes": (4, 1, 4), "strides": (1, 1, 1)}
    assert rs.attrs["new_shape"] == (4, 4)


def test_a_full_index_records_nothing() -> None:
    @func
    def f(x: Tensor[X_SHAPE, "f32"]):
        assert x[...] is x and x[:] is x and x[:, :, :] is x
        return x * 2.0

    assert [n.op for n in f.graph.nodes] == ["constant", "mul"]


def test_iteration_and_len_over_a_static_leading_axis() -> None:
    @func
    def f(x: Tensor[(3, 5), "f32"]):
        a, b, c = x
        assert len(x) == 3
        return a + b * c

    x = torch.randn(3, 5)
    assert torch.equal(f(x), x[0] + x[1] * x[2])


SEQ = DimVar("seq", 1, 32)
CTX = DimVar("ctx_len", 0, 32)


@pytest.mark.parametrize("extent", [1, 2, 7])
def test_dimvar_axis_bounds_inside_its_lower_bound(extent: int) -> None:
    @func
    def f(x: Tensor[(2, SEQ, 8), "f32"]):
        return x[:, -1], x[:, -1:], x[..., :4], x[:, :1, ::2], x[:, 0]

    assert str(f.output_types[1]) == "Tensor[(2, 1, 8), f32]"
    assert str(f.output_types[2]) == "Tensor[(2, seq, 4), f32]"
    x = torch.randn(2, extent, 8)
    for got, want in zip(f(x), (x[:, -1], x[:, -1:], x[..., :4], x[:, :1, ::2], x[:, 0])):
        assert torch.equal(got, want)


def test_dimvar_axis_symbolic_extent_after_a_start() -> None:
    at_least_3 = DimVar("n", 3, 40)

    @func
    def f(x: Tensor[(at_least_3, 4), "f32"]):
        return x[2:], x[:-3], x[1::2]

    assert [str(t.shape[0]) for t in f.output_types] == ["n - 2", "n - 3", "(n)//(2)"]
    for n in (3, 4, 9):
        x = torch.randn(n, 4)
        for got, want in zip(f(x), (x[2:], x[:-3], x[1::2])):
            assert torch.equal(got, want)


def test_bounds_may_be_dimvar_expressions_provably_inside() -> None:
    @func
    def f(cache: Tensor[(1, 40, 4), "f32"], new: Tensor[(1, CTX, 4), "f32"]):
        ctx = new.shape[1]
        return cache[:, :ctx] + new, cache[:, ctx:ctx + 8]

    cache = torch.randn(1, 40, 4)
    for n in (0, 5, 31):
        new = torch.randn(1, n, 4)
        got = f(cache, new)
        assert torch.equal(got[0], cache[:, :n] + new) and torch.equal(got[1], cache[:, n:n + 8])


@pytest.mark.parametrize("body,reason", [
    (lambda x: x[:1], r"stop 1 on axis 0 of extent ctx_len, at least 0 is not inside the axis"),
    (lambda x: x[-1], r"index -1 on axis 0 of symbolic extent ctx_len, at least 0 is not inside the axis"),
    (lambda x: x[0], r"index 0 on axis 0 of symbolic extent ctx_len"),
    (lambda x: x[3:], r"start 3 on axis 0"),
])
def test_dimvar_axis_bounds_that_may_fall_outside_are_refused(body, reason: str) -> None:  # noqa: ANN001
    with pytest.raises(IRTypeError, match=reason) as info:
        @func
        def f(x: Tensor[(CTX, 4), "f32"]):
            return body(x)
    assert "narrow the DimVar's range" in str(info.value)


def test_a_dimvar_bound_reaching_past_a_static_axis_is_refused() -> None:
    with pytest.raises(IRTypeError, match=r"stop ctx_len on axis 1 of extent 16 is not inside the axis"):
        @func
        def f(cache: Tensor[(1, 16, 4), "f32"], new: Tensor[(CTX, 4), "f32"]):
            return cache[:, :new.shape[0]]


@pytest.mark.parametrize("body,exc,reason", [
    (lambda x, i: x[i], IRTypeError, r"traced \(data-dependent\) index .* tf.index_select\(x, index, dim\)"),
    (lambda x, i: x[:, i], IRTypeError, r"tf.index_select"),
    (lambda x, i: x[i:], IRTypeError, r"slice bound is a traced .* tf.index_select"),
    (lambda x, i: x[[0, 2]], IRTypeError, r"an index must be an int, a slice, \.\.\., or None, got list .*"
                                          r"tf.index_select"),
    (lambda x, i: x[4], IRIndexError, r"index 4 is out of bounds for axis 0 with size 4"),
    (lambda x, i: x[:, -7], IRIndexError, r"index -7 is out of bounds for axis 1 with size 6"),
    (lambda x, i: x[0, 0, 0], IRIndexError, r"too many indices for a tensor of rank 2"),
    (lambda x, i: x[..., 0, ...], IRTypeError, r"only have a single ellipsis"),
    (lambda x, i: x[::0], IRTypeError, r"slice step cannot be zero"),
    (lambda x, i: x[::-1], IRTypeError, r"slice step -1 is negative; steps must be >= 1"),
    (lambda x, i: x[1.5], IRTypeError, r"got float 1.5"),
    (lambda x, i: x[True], IRTypeError, r"got bool True"),
])
def test_bad_indices_are_refused(body, exc: type, reason: str) -> None:  # noqa: ANN001
    with pytest.raises(exc, match=reason) as info:
        @func
        def f(x: Tensor[(4, 6), "f32"], i: Tensor[(2,), "i64"]):
            return body(x, i)
    assert f"{__file__}:" in str(info.value), "the error points at the authored line"


def test_an_out_of_range_int_index_is_an_index_error() -> None:
    with pytest.raises(IndexError):
        @func
        def f(x: Tensor[(4, 6), "f32"]):
            return x[9]


def test_integer_like_indices_count_as_ints() -> None:
    import numpy as np

    @func
    def f(x: Tensor[(4, 6), "f32"]):
        return x[np.int64(1), np.int32(2):]

    x = torch.randn(4, 6)
    assert torch.equal(f(x), x[1, 2:])

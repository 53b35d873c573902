"""Type errors in authored code name the op, the operand types and the line that made the call.

Trace-time errors (raised while ``@func`` traces its body) are ``IRTypeError``s, a ``TypeError``.
Evaluate-time errors (inputs that do not fit the declaration, indices out of range) are TypeError /
ValueError naming the function and parameter (or the op and line) at fault.

No ``from __future__ import annotations`` here: annotations are evaluated where they are written, so
DimVars local to a test can appear in them.
"""

import inspect
from collections.abc import Callable
from typing import Any

import pytest
import torch

from tilefoundry import func
from tilefoundry.dsl import DimVar, Tensor, tf
from tilefoundry.ir.core import IRTypeError
from tilefoundry.ir.types import TensorType

FILE = "test_type_errors.py"
SEQ = DimVar("seq", 1, 64)
S2 = DimVar("s2", 1, 64)


def next_line() -> int:
    """The line number just below the caller's current line."""
    return inspect.currentframe().f_back.f_lineno + 1


def build(specs: list[tuple[tuple, str]], body: Callable[..., Any]):  # noqa: ANN201 - a Function
    """Trace ``body`` as a ``@func`` with one ``Tensor[shape, dtype]`` parameter per spec."""
    names = [f"p{i}" for i in range(len(specs))]

    def kernel(*values: Any) -> Any:
        return body(*values)

    kernel.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names])
    kernel.__annotations__ = {n: Tensor[shape, dt] for n, (shape, dt) in zip(names, specs)}
    return func(kernel)


def assert_reported(err: IRTypeError, op: str, types: list[str], line: int, reason: str) -> None:
    msg = str(err)
    assert isinstance(err, TypeError)
    assert msg.startswith(f"{op}: "), msg
    assert reason in msg, msg
    for t in types:
        assert t in msg, f"{t!r} missing from: {msg}"
    assert f"{FILE}:{line}" in msg, msg
    assert err.op == op
    assert [str(t) for t in err.operands] == types
    assert err.loc is not None and err.loc.lineno == line and err.loc.filename.endswith(FILE)


F48 = "Tensor[(4, 8), f32]"

# (id, params, body on one line, op, operand type strings, a fragment of the reason)
# The expected line is the line of the body lambda (each one fits on one line).
CASES = [
    # dtype mismatch: no implicit promotion
    ("add_dtypes", [((4, 8), "f32"), ((4, 8), "bf16")], lambda x, y: tf.add(x, y),
     "add", [F48, "Tensor[(4, 8), bf16]"], "dtypes disagree (f32 vs bf16)"),
    ("operator_dtypes", [((4, 8), "f32"), ((8,), "f16")], lambda x, y: x * y,
     "mul", [F48, "Tensor[(8,), f16]"], "use tf.cast"),
    ("compare_dtypes", [((4, 8), "i32"), ((4, 8), "i64")], lambda x, y: x < y,
     "lt", ["Tensor[(4, 8), i32]", "Tensor[(4, 8), i64]"], "dtypes disagree"),
    ("matmul_dtypes", [((4, 8), "f32"), ((8, 2), "bf16")], lambda a, b: tf.matmul(a, b),
     "matmul", [F48, "Tensor[(8, 2), bf16]"], "dtypes disagree"),
    ("where_branch_dtypes", [((4, 8), "bool"), ((4, 8), "f32"), ((4, 8), "f16")], lambda c, x, y: tf.where(c, x, y),
     "where", ["Tensor[(4, 8), bool]", F48, "Tensor[(4, 8), f16]"], "dtypes disagree"),
    ("where_condition_not_bool", [((4, 8), "f32"), ((4, 8), "f32")], lambda x, y: tf.where(x, x, y),
     "where", [F48, F48, F48], "condition must be bool, got f32"),
    ("concat_dtypes", [((4, 8), "f32"), ((4, 8), "bf16")], lambda x, y: tf.concat([x, y], 0),
     "concat", [F48, "Tensor[(4, 8), bf16]"], "dtypes disagree"),
    ("rms_norm_weight_not_float", [((4, 8), "bf16"), ((8,), "i32")], lambda x, w: tf.rms_norm(x, w, 1e-6),
     "rms_norm", ["Tensor[(4, 8), bf16]", "Tensor[(8,), i32]"], "weight must be a floating-point tensor, got i32"),
    ("cache_dtypes", [((1, 8, 4), "bf16"), ((), "i64"), ((), "i64"), ((1, 2, 4), "f32")],
     lambda c, p, s, n: tf.cache_update(c, p, s, n),
     "cache_update", ["Tensor[(1, 8, 4), bf16]", "Tensor[(), i64]", "Tensor[(), i64]", "Tensor[(1, 2, 4), f32]"],
     "dtypes disagree"),
    ("float_only_unary_on_int", [((4, 8), "i32")], lambda x: tf.exp(x),
     "exp", ["Tensor[(4, 8), i32]"], "must be a floating-point tensor, got i32"),
    ("arithmetic_on_bool", [((4, 8), "bool"), ((4, 8), "bool")], lambda x, y: x + y,
     "add", ["Tensor[(4, 8), bool]", "Tensor[(4, 8), bool]"], "bool"),
    ("clamp_bool", [((4, 8), "bool")], lambda x: tf.clamp(x, 0, 1),
     "clamp", ["Tensor[(4, 8), bool]"], "clamp is not defined on bool tensors"),
    ("mean_of_int", [((4, 8), "i64")], lambda x: tf.reduce(x, kind="mean"),
     "reduce", ["Tensor[(4, 8), i64]"], "floating-point"),
    ("index_not_int", [((4, 8), "f32"), ((2,), "f32")], lambda x, i: tf.index_select(x, i),
     "index_select", [F48, "Tensor[(2,), f32]"], "index must be an integer tensor, got f32"),
    ("rope_pos_not_int", [((2, 4, 8), "f32"), ((2, 4, 8), "f32"), ((9, 8), "f32"), ((9, 8), "f32"), ((4,), "f32")],
     lambda q, k, c, s, p: tf.rope(q, k, c, s, p),
     "rope", ["Tensor[(2, 4, 8), f32]", "Tensor[(2, 4, 8), f32]", "Tensor[(9, 8), f32]", "Tensor[(9, 8), f32]",
              "Tensor[(4,), f32]"], "pos_ids must be an integer tensor"),
    ("logical_on_float", [((4, 8), "f32"), ((4, 8), "bool")], lambda x, y: tf.logical_and(x, y),
     "logical_and", [F48, "Tensor[(4, 8), bool]"], "operand 0 must be bool, got f32"),
    ("invert_on_int", [((4, 8), "i32")], lambda x: ~x,
     "logical_not", ["Tensor[(4, 8), i32]"], "operand 0 must be bool, got i32"),
    ("softplus_on_int", [((4, 8), "i32")], lambda x: tf.softplus(x),
     "softplus", ["Tensor[(4, 8), i32]"], "must be a floating-point tensor, got i32"),
    ("exp2_on_int", [((4, 8), "i64")], lambda x: tf.exp2(x),
     "exp2", ["Tensor[(4, 8), i64]"], "must be a floating-point tensor, got i64"),
    ("floor_div_on_bool", [((4, 8), "bool"), ((4, 8), "bool")], lambda x, y: x // y,
     "floor_div", ["Tensor[(4, 8), bool]", "Tensor[(4, 8), bool]"], "bool"),
    ("round_on_bool", [((4, 8), "bool")], lambda x: tf.round(x),
     "round", ["Tensor[(4, 8), bool]"], "not defined on bool"),
    ("index_add_bool", [((4, 8), "bool"), ((2,), "i64"), ((2, 8), "bool")], lambda x, i, s: tf.index_add(x, i, s),
     "index_add", ["Tensor[(4, 8), bool]", "Tensor[(2,), i64]", "Tensor[(2, 8), bool]"], "index_copy writes bools"),
    ("index_copy_source_length", [((4, 8), "f32"), ((2,), "i64"), ((3, 8), "f32")],
     lambda x, i, s: tf.index_copy(x, i, s),
     "index_copy", [F48, "Tensor[(2,), i64]", "Tensor[(3, 8), f32]"], "source axis 0 vs the index length"),
    ("index_add_float_index", [((4, 8), "f32"), ((2,), "f32"), ((2, 8), "f32")], lambda x, i, s: tf.index_add(x, i, s),
     "index_add", [F48, "Tensor[(2,), f32]", "Tensor[(2, 8), f32]"], "index must be an integer tensor"),
    ("concat_axis_twice", [((4, 8), "f32"), ((4, 8), "f32")], lambda x, y: tf.concat([x, y], 0, axis=1),
     "concat", [F48, F48], "axis given twice"),
    ("concat_stray_int", [((4, 8), "f32"), ((4, 8), "f32")], lambda x, y: tf.concat(x, y, 0),
     "concat", [F48, F48], "argument 2 is int 0: pass tensors, then axis= by keyword"),
    ("softplus_beta_zero", [((4, 8), "f32")], lambda x: tf.softplus(x, beta=0),
     "softplus", [F48], "beta must not be 0"),
    # Python scalars: a float never sits next to an int tensor, a bool only next to a bool one
    ("float_scalar_int_tensor", [((4, 8), "i32")], lambda x: x + 1.0,
     "add", ["Tensor[(4, 8), i32]"], "float scalar 1.0 next to a i32 tensor"),
    ("float_scalar_left_int_tensor", [((4, 8), "i64")], lambda x: 0.5 * x,
     "mul", ["Tensor[(4, 8), i64]"], "float scalar 0.5 next to a i64 tensor"),
    ("float_scalar_in_tf_max", [((4, 8), "i32")], lambda x: tf.max(x, 0.0),
     "max", ["Tensor[(4, 8), i32]"], "no implicit promotion"),
    ("float_scalar_in_where", [((4, 8), "bool"), ((4, 8), "i32")], lambda c, x: tf.where(c, x, 0.0),
     "where", ["Tensor[(4, 8), i32]"], "float scalar 0.0"),
    ("float_fill_int_tensor", [((4, 8), "i32")], lambda x: tf.full_like(x, 0.5),
     "full_like", ["Tensor[(4, 8), i32]"], "0.5"),
    ("float_clamp_int_tensor", [((4, 8), "i32")], lambda x: tf.clamp(x, 0.5, 2),
     "clamp", ["Tensor[(4, 8), i32]"], "float bound 0.5"),
    ("bool_scalar_float_tensor", [((4, 8), "f32")], lambda x: x * True,
     "mul", [F48], "bool scalar True"),
    # shape mismatch / not broadcastable
    ("add_not_broadcastable", [((4, 8), "f32"), ((4, 6), "f32")], lambda x, y: x + y,
     "add", [F48, "Tensor[(4, 6), f32]"], "axis 1 has extents 8 and 6"),
    ("different_dimvars", [((SEQ, 8), "f32"), ((S2, 8), "f32")], lambda x, y: tf.sub(x, y),
     "sub", ["Tensor[(seq, 8), f32]", "Tensor[(s2, 8), f32]"], "extents seq and s2"),
    ("where_not_broadcastable", [((3, 8), "bool"), ((4, 8), "f32"), ((4, 8), "f32")],
     lambda c, x, y: tf.where(c, x, y),
     "where", ["Tensor[(3, 8), bool]", F48, F48], "do not broadcast"),
    ("concat_other_axis", [((4, 8), "f32"), ((4, 6), "f32")], lambda x, y: tf.concat((x, y), axis=0),
     "concat", [F48, "Tensor[(4, 6), f32]"], "extents 8 and 6 differ"),
    ("stack_shapes", [((4, 8), "f32"), ((SEQ, 8), "f32")], lambda x, y: tf.stack([x, y], 0),
     "stack", [F48, "Tensor[(seq, 8), f32]"], "extents 4 and seq differ"),
    ("reshape_count", [((4, 8), "f32")], lambda x: tf.reshape(x, (3, 8)),
     "reshape", [F48], "32 elements"),
    ("reshape_dimvar_count", [((SEQ, 8), "f32")], lambda x: tf.reshape(x, (SEQ, 4)),
     "reshape", ["Tensor[(seq, 8), f32]"], "cannot reshape"),
    ("split_uneven", [((4, 6), "f32")], lambda x: tf.split(x, 1, 4),
     "split", ["Tensor[(4, 6), f32]"], "does not split into 4 equal parts"),
    ("slice_past_end", [((4, 8), "f32")], lambda x: tf.slice(x, (0, 4), (4, 3), (1, 2)),
     "slice", [F48], "run past extent 8"),
    ("topk_k_too_big", [((4, 8), "f32")], lambda x: tf.topk(x, 9),
     "topk", [F48], "k=9 exceeds the extent 8"),
    ("rms_norm_weight_length", [((4, 8), "f32"), ((6,), "f32")], lambda x, w: tf.rms_norm(x, w, 1e-6),
     "rms_norm", [F48, "Tensor[(6,), f32]"], "extents 8 and 6 differ"),
    ("rope_odd_head_dim", [((4, 2, 7), "f32"), ((4, 2, 7), "f32"), ((9, 7), "f32"), ((9, 7), "f32"), ((4,), "i64")],
     lambda q, k, c, s, p: tf.rope(q, k, c, s, p),
     "rope", ["Tensor[(4, 2, 7), f32]", "Tensor[(4, 2, 7), f32]", "Tensor[(9, 7), f32]", "Tensor[(9, 7), f32]",
              "Tensor[(4,), i64]"], "must be even"),
    ("rope_seq_on_axis_minus_3", [((4, 3, 8), "f32"), ((4, 3, 8), "f32"), ((9, 8), "f32"), ((9, 8), "f32"),
                                  ((3,), "i64")],
     lambda q, k, c, s, p: tf.rope(q, k, c, s, p),
     "rope", ["Tensor[(4, 3, 8), f32]", "Tensor[(4, 3, 8), f32]", "Tensor[(9, 8), f32]", "Tensor[(9, 8), f32]",
              "Tensor[(3,), i64]"], "q seq axis (-3 of (..., seq, heads, head_dim)) vs pos_ids: extents 4 and 3"),
    ("rope_rank2_q", [((4, 8), "f32"), ((4, 8), "f32"), ((9, 8), "f32"), ((9, 8), "f32"), ((4,), "i64")],
     lambda q, k, c, s, p: tf.rope(q, k, c, s, p),
     "rope", ["Tensor[(4, 8), f32]", "Tensor[(4, 8), f32]", "Tensor[(9, 8), f32]", "Tensor[(9, 8), f32]",
              "Tensor[(4,), i64]"], "(..., seq, heads, head_dim), rank >= 3"),
    ("rope_pos_rank2", [((4, 2, 8), "f32"), ((4, 2, 8), "f32"), ((9, 8), "f32"), ((9, 8), "f32"), ((1, 4), "i64")],
     lambda q, k, c, s, p: tf.rope(q, k, c, s, p),
     "rope", ["Tensor[(4, 2, 8), f32]", "Tensor[(4, 2, 8), f32]", "Tensor[(9, 8), f32]", "Tensor[(9, 8), f32]",
              "Tensor[(1, 4), i64]"], "pos_ids must be (seq,)"),
    ("cache_batch", [((2, 8, 4), "f32"), ((), "i64"), ((), "i64"), ((1, 3, 4), "f32")],
     lambda c, p, s, n: tf.cache_update(c, p, s, n),
     "cache_update", ["Tensor[(2, 8, 4), f32]", "Tensor[(), i64]", "Tensor[(), i64]", "Tensor[(1, 3, 4), f32]"],
     "batch: extents 2 and 1 differ"),
    # rank errors
    ("matmul_rank1", [((8,), "f32"), ((6, 4), "f32")], lambda a, b: a @ b,
     "matmul", ["Tensor[(8,), f32]", "Tensor[(6, 4), f32]"], "extents 8 and 6 differ"),
    ("matmul_scalar", [((4, 8), "f32")], lambda a: a @ 2.0,
     "matmul", [F48, "Tensor[(), f32]"], "rank >= 1 (a 0-d operand is a scalar"),
    ("rms_norm_weight_rank", [((4, 8), "f32"), ((1, 8), "f32")], lambda x, w: tf.rms_norm(x, w, 1e-6),
     "rms_norm", [F48, "Tensor[(1, 8), f32]"], "weight must have rank 1, got rank 2"),
    ("index_select_arguments", [((4, 8), "f32"), ((2,), "i64")], lambda x, i: tf.index_select(x, i, 0, 1),
     "index_select", [F48, "Tensor[(2,), i64]"], "takes (x, index, dim=0) or torch's order (x, dim, index); got 4"),
    ("index_rank2", [((4, 8), "f32"), ((2, 2), "i64")], lambda x, i: tf.index_select(x, i),
     "index_select", [F48, "Tensor[(2, 2), i64]"], "index must have rank 1"),
    ("transpose_perm_length", [((2, 4, 8), "f32")], lambda x: tf.transpose(x, (1, 0)),
     "transpose", ["Tensor[(2, 4, 8), f32]"], "not a permutation of the 3 axes"),
    ("reduce_axis_out_of_range", [((4, 8), "f32")], lambda x: tf.reduce(x, axes=(2,)),
     "reduce", [F48], "axis 2 is out of range for rank 2"),
    ("softmax_axis_out_of_range", [((4, 8), "f32")], lambda x: tf.softmax(x, axis=-3),
     "softmax", [F48], "axis -3 is out of range for rank 2"),
    ("concat_ranks", [((4, 8), "f32"), ((4, 8, 1), "f32")], lambda x, y: tf.concat([x, y], 0),
     "concat", [F48, "Tensor[(4, 8, 1), f32]"], "differ in rank"),
    ("slice_entries_per_axis", [((4, 8), "f32")], lambda x: tf.slice(x, (0,), (2,)),
     "slice", [F48], "one entry per axis (2)"),
    ("rope_pos_rank3", [((1, 2, 4, 8), "f32"), ((1, 2, 4, 8), "f32"), ((9, 8), "f32"), ((9, 8), "f32"),
                        ((1, 1, 4), "i64")],
     lambda q, k, c, s, p: tf.rope(q, k, c, s, p),
     "rope", ["Tensor[(1, 2, 4, 8), f32]", "Tensor[(1, 2, 4, 8), f32]", "Tensor[(9, 8), f32]", "Tensor[(9, 8), f32]",
              "Tensor[(1, 1, 4), i64]"], "pos_ids must be (seq,)"),
    ("cache_pos_rank1", [((1, 8, 4), "f32"), ((1,), "i64"), ((), "i64"), ((1, 2, 4), "f32")],
     lambda c, p, s, n: tf.cache_update(c, p, s, n),
     "cache_update", ["Tensor[(1, 8, 4), f32]", "Tensor[(1,), i64]", "Tensor[(), i64]", "Tensor[(1, 2, 4), f32]"],
     "cur_pos must have rank 0, got rank 1"),
    # matmul contraction
    ("matmul_contraction", [((4, 8), "f32"), ((6, 5), "f32")], lambda a, b: tf.matmul(a, b),
     "matmul", [F48, "Tensor[(6, 5), f32]"], "contracted axis (a's last, b's second to last): extents 8 and 6 differ"),
    ("matmul_contraction_dimvar", [((4, 8), "f32"), ((SEQ, 5), "f32")], lambda a, b: a @ b,
     "matmul", [F48, "Tensor[(seq, 5), f32]"], "extents 8 and seq differ"),
    ("matmul_batch", [((2, 4, 8), "f32"), ((3, 8, 5), "f32")], lambda a, b: tf.matmul(a, b),
     "matmul", ["Tensor[(2, 4, 8), f32]", "Tensor[(3, 8, 5), f32]"], "do not broadcast"),
    # unknown dtype names in op attributes; bad attributes
    ("cast_unknown_dtype", [((4, 8), "f32")], lambda x: tf.cast(x, "f33"),
     "cast", [F48], "unknown dtype name 'f33'; valid names: f32, f16, bf16"),
    ("cast_unknown_dtype_kw", [((4, 8), "f32")], lambda x: tf.cast(x, dtype="float"),
     "cast", [F48], "unknown dtype name 'float'"),
    ("zeros_unknown_dtype", [((4, 8), "f32")], lambda x: tf.zeros((4,), "int"),
     "zeros", [], "unknown dtype name 'int'"),
    ("arange_unknown_dtype", [((4, 8), "f32")], lambda x: tf.arange(4, dtype="i16"),
     "arange", [], "unknown dtype name 'i16'"),
    ("arange_end_below_start", [((4, 8), "f32")], lambda x: tf.arange(5, 2),
     "arange", [], "end 2 is below start 5"),
    ("reduce_unknown_kind", [((4, 8), "f32")], lambda x: tf.reduce(x, kind="prod"),
     "reduce", [F48], "unknown reduce kind 'prod'; valid: sum, mean, max, min, abs_max"),
    ("gelu_unknown_approximate", [((4, 8), "f32")], lambda x: tf.gelu(x, approximate="erf"),
     "gelu", [F48], "attribute approximate takes 'none' or 'tanh', got 'erf'"),
    ("reshard_unknown_storage", [((4, 8), "f32")], lambda x: tf.reshard(x, None, "vram"),
     "reshard", [F48], "unknown storage 'vram'; valid: host, gmem, smem, rmem"),
]


@pytest.mark.parametrize(("specs", "body", "op", "types", "reason"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_trace_time_type_error(specs: list, body: Callable[..., Any], op: str, types: list[str], reason: str) -> None:
    with pytest.raises(IRTypeError) as ei:
        build(specs, body)
    assert_reported(ei.value, op, types, body.__code__.co_firstlineno, reason)


def test_zero_operand_message_says_so() -> None:
    with pytest.raises(IRTypeError, match="no tensor operands"):
        build([((4,), "f32")], lambda x: tf.zeros((4,), "int"))


# -- errors inside a written-out @func body point at the body's line -----------------------------------------


def test_error_on_a_later_line_of_a_body() -> None:
    where: dict[str, int] = {}
    with pytest.raises(IRTypeError) as ei:
        @func
        def layer(x: Tensor[(SEQ, 8), "bf16"], w: Tensor[(8, 16), "bf16"], b: Tensor[(16,), "f32"]):
            h = x @ w
            h = tf.silu(h)
            where["line"] = next_line()
            return h + b
    assert_reported(ei.value, "add", ["Tensor[(seq, 16), bf16]", "Tensor[(16,), f32]"], where["line"],
                    "dtypes disagree (bf16 vs f32)")
    assert "`return h + b`" in str(ei.value)


def test_call_of_sibling_with_inconsistent_dimvar() -> None:
    @func
    def inner(x: Tensor[(SEQ, 8), "f32"], y: Tensor[(SEQ, 8), "f32"]):
        return x + y

    where: dict[str, int] = {}
    with pytest.raises(IRTypeError) as ei:
        @func
        def outer(x: Tensor[(4, 8), "f32"], y: Tensor[(5, 8), "f32"]):
            where["line"] = next_line()
            return inner(x, y)
    assert_reported(ei.value, "call inner", [F48, "Tensor[(5, 8), f32]"], where["line"],
                    "argument y: shape Tensor[(5, 8), f32] does not match declared Tensor[(seq, 8), f32]")


def refused_call_of(inner: Any) -> tuple[IRTypeError, int]:
    """Trace ``outer(x: Tensor[(4, 8), f32])`` calling ``inner(x)``, which must be refused.

    Returns the ``IRTypeError`` and the line of the call.
    """
    where: dict[str, int] = {}
    with pytest.raises(IRTypeError) as ei:
        @func
        def outer(x: Tensor[(4, 8), "f32"]):
            where["line"] = next_line()
            return inner(x)
    return ei.value, where["line"]


def test_call_of_sibling_outside_dimvar_range() -> None:
    short = DimVar("short", 1, 4)

    @func
    def inner(x: Tensor[(short, 8), "f32"]):
        return -x

    err, line = refused_call_of(inner)
    assert_reported(err, "call inner", [F48], line, "extent 4 is outside short's range [1, 4)")


def test_call_of_sibling_with_wrong_dtype() -> None:
    @func
    def inner(x: Tensor[(4, 8), "bf16"]):
        return -x

    err, line = refused_call_of(inner)
    assert_reported(err, "call inner", [F48], line, "dtype f32 where Tensor[(4, 8), bf16] is declared")


def test_branching_on_a_traced_tensor_is_refused() -> None:
    with pytest.raises(TypeError, match="no truth value.*tf.where"):
        @func
        def f(x: Tensor[(4, 8), "f32"]):
            if x > 0.0:
                return x
            return -x


def test_op_outside_a_func_body_is_refused() -> None:
    with pytest.raises(RuntimeError, match=r"tf\.add was called outside a @func body"):
        tf.add(torch.ones(2), torch.ones(2))


# -- evaluate time: inputs checked against the declaration ---------------------------------------------------


@func
def seq_pair(x: Tensor[(SEQ, 8), "f32"], y: Tensor[(SEQ, 8), "f32"]):
    return x - y


def test_dimvar_out_of_range_at_evaluate() -> None:
    with pytest.raises(ValueError) as ei:
        seq_pair(torch.zeros(64, 8), torch.zeros(64, 8))  # hi is exclusive
    msg = str(ei.value)
    assert msg.startswith("seq_pair: argument x (Tensor[(seq, 8), f32]):"), msg
    assert "DimVar seq = 64 is outside its range [1, 64)" in msg
    with pytest.raises(ValueError, match=r"DimVar seq = 0 is outside its range \[1, 64\)"):
        seq_pair(torch.zeros(0, 8), torch.zeros(0, 8))
    assert seq_pair(torch.ones(63, 8), torch.ones(63, 8)).shape == (63, 8)  # the largest in range


def test_dimvar_inconsistent_across_params_at_evaluate() -> None:
    with pytest.raises(ValueError) as ei:
        seq_pair(torch.zeros(3, 8), torch.zeros(4, 8))
    msg = str(ei.value)
    assert msg.startswith("seq_pair:"), msg
    assert "DimVar seq is 3" in msg and "4 in y" in msg, msg


def test_derived_dim_inconsistent_at_evaluate() -> None:
    @func
    def pair(x: Tensor[(SEQ, 8), "f32"], y: Tensor[(2 * SEQ, 8), "f32"]):
        return tf.concat([x, x], 0) + y

    assert pair(torch.ones(3, 8), torch.ones(6, 8)).shape == (6, 8)
    with pytest.raises(ValueError) as ei:
        pair(torch.ones(3, 8), torch.ones(7, 8))
    msg = str(ei.value)
    assert "pair: argument y axis 0 is 7, but 2*seq = 6" in msg, msg


@pytest.mark.parametrize(("arg", "exc", "fragment"), [
    (torch.zeros(4, 8, dtype=torch.int32), TypeError,
     "argument x has dtype torch.int32, declared Tensor[(4, 8), f32]"),
    (torch.zeros(4, 8, 1), TypeError, "argument x has rank 3 (shape (4, 8, 1)), declared Tensor[(4, 8), f32]"),
    (torch.zeros(4, 6), ValueError, "argument x has shape (4, 6), declared Tensor[(4, 8), f32] (axis 1: 6 != 8)"),
    ([[0.0] * 8] * 4, TypeError, "argument x must be a torch.Tensor"),
], ids=["dtype", "rank", "static_extent", "not_a_tensor"])
def test_static_input_mismatch_at_evaluate(arg: Any, exc: type, fragment: str) -> None:
    @func
    def static(x: Tensor[(4, 8), "f32"]):
        return x * 2.0

    with pytest.raises(exc) as ei:
        static(arg)
    assert str(ei.value).startswith("static:"), str(ei.value)
    assert fragment in str(ei.value)


def test_wrong_number_of_arguments_at_evaluate() -> None:
    with pytest.raises(TypeError, match=r"seq_pair takes 2 arguments \(x, y\), got 1"):
        seq_pair(torch.zeros(3, 8))


# -- evaluate time: run-time range errors name the op and the authored line ----------------------------------


def test_slice_past_a_dimvar_extent_at_evaluate() -> None:
    where: dict[str, int] = {}

    @func
    def tail(x: Tensor[(SEQ, 8), "f32"]):
        where["line"] = next_line()
        return tf.slice(x, (2, 0), (SEQ, 8))

    assert tail.output_types.same_as(TensorType((SEQ, 8), "f32"))
    with pytest.raises(ValueError) as ei:
        tail(torch.zeros(3, 8))
    msg = str(ei.value)
    assert msg.startswith("slice at "), msg
    assert f"{FILE}:{where['line']}" in msg
    assert "axis 0 reads [2, 5) of extent 3" in msg


def test_index_out_of_range_at_evaluate() -> None:
    where: dict[str, int] = {}

    @func
    def gather(t: Tensor[(4, 8), "f32"], i: Tensor[(SEQ,), "i64"]):
        where["line"] = next_line()
        return tf.index_select(t, i)

    with pytest.raises(ValueError) as ei:
        gather(torch.zeros(4, 8), torch.tensor([0, 4, 1]))
    msg = str(ei.value)
    assert msg.startswith("index_select at "), msg
    assert f"{FILE}:{where['line']}" in msg
    assert "indices [0, 4] out of range for extent 4" in msg


def test_cache_update_overflow_at_evaluate() -> None:
    where: dict[str, int] = {}

    @func
    def write(c: Tensor[(1, 8, 2), "f32"], p: Tensor[(), "i64"], s: Tensor[(), "i64"], n: Tensor[(1, SEQ, 2), "f32"]):
        where["line"] = next_line()
        return tf.cache_update(c, p, s, n)

    cache = torch.zeros(1, 8, 2)
    with pytest.raises(ValueError) as ei:
        write(cache, torch.tensor(7), torch.tensor(2), torch.ones(1, 3, 2))
    msg = str(ei.value)
    assert msg.startswith("cache_update at "), msg
    assert f"{FILE}:{where['line']}" in msg
    assert "cur_pos + s <= 8" in msg
    with pytest.raises(ValueError, match="0 <= s <= 3"):
        write(cache, torch.tensor(0), torch.tensor(4), torch.ones(1, 3, 2))
    assert torch.equal(cache, torch.zeros(1, 8, 2))


# -- unknown dtype name in an annotation ---------------------------------------------------------------------


def test_unknown_dtype_in_annotation_lists_valid_names() -> None:
    with pytest.raises(TypeError) as ei:
        @func
        def f(x: Tensor[(4, 8), "f33"]):
            return x
    msg = str(ei.value)
    assert "unknown dtype name 'f33'" in msg
    assert "valid names: f32, f16, bf16, fp8e4m3, fp8e5m2, f8e8m0, i8, i32, i64, bool" in msg


def test_unknown_dtype_in_a_string_annotation_names_the_function() -> None:
    def f(x: "Tensor[(4, 8), 'float']"):
        return x

    with pytest.raises(TypeError) as ei:
        func(f)
    msg = str(ei.value)
    assert "@func f" in msg and "unknown dtype name 'float'" in msg and "valid names" in msg


def test_unknown_storage_in_annotation() -> None:
    with pytest.raises(ValueError, match=r"unknown storage 'shared'; valid: host, gmem, smem, rmem"):
        Tensor[(4, 8), "f32", "shared"]


# -- errors at evaluate time and in annotations point at the authored line ----------------------------------


def test_evaluate_time_errors_name_the_declared_type_and_the_calling_line() -> None:
    line = next_line() + 1
    with pytest.raises(ValueError) as ei:
        seq_pair(torch.zeros(64, 8), torch.zeros(64, 8))
    msg = str(ei.value)
    assert "Tensor[(seq, 8), f32]" in msg
    assert f"{FILE}:{line}" in msg


def test_unknown_dtype_in_annotation_names_parameter_and_line() -> None:
    deco_line = next_line() + 1
    with pytest.raises(TypeError) as ei:
        @func
        def f(x: Tensor[(4, 8), "f33"]):
            return x
    msg = str(ei.value)
    assert "x" in msg.split("unknown dtype")[0]
    assert f"{FILE}:{deco_line}" in msg or f"{FILE}:{deco_line + 1}" in msg  # the decorator's or the def's line

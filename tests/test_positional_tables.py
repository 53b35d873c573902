"""Positional tables (issue 24, Gemma2): RoPE's cos / sin rows may be passed with fewer rows than declared.

The reference implementation binds activations as they are given, and its Gemma2 source builds rotary tables of
``sliding_window`` rows where its layers declare ``max_position_embeddings``. Here only a parameter read solely as
RoPE's cos or sin table (directly, or passed on to a function that reads it so) may hold fewer rows (at least one);
the rope then refuses a position past the rows given. Every other activation keeps its declared extents.
"""

from __future__ import annotations

import pytest
import torch

from tilefoundry import func, module
from tilefoundry.dsl import DimVar, Tensor, tf
from tilefoundry.ir.core.tables import positional_tables

S = DimVar("s", 1, 9)


@module(entry="layer")
class Tables:
    @func
    def attend(q: Tensor[(S, 2, 8), "f32"], cos: Tensor[(16, 8), "f32"], sin: Tensor[(16, 8), "f32"],
               pos: Tensor[(S,), "i32"]):
        a, _ = tf.rope(q, q, cos, sin, pos)
        return a

    @func
    def layer(q: Tensor[(S, 2, 8), "f32"], cos: Tensor[(16, 8), "f32"], sin: Tensor[(16, 8), "f32"],
              pos: Tensor[(S,), "i32"]):
        return attend(q, cos, sin, pos) * 2.0  # noqa: F821 - a sibling @func, reached by bare name

    @func
    def also_added(q: Tensor[(S, 2, 8), "f32"], cos: Tensor[(16, 8), "f32"], sin: Tensor[(16, 8), "f32"],
                   pos: Tensor[(S,), "i32"]):
        """cos is also returned doubled: not a positional table, its rows as declared."""
        a, _ = tf.rope(q, q, cos, sin, pos)
        return a, cos * 2.0


def _args(rows: int, positions: list[int]) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(rows)
    return (torch.randn(len(positions), 2, 8, generator=g), torch.randn(rows, 8, generator=g),
            torch.randn(rows, 8, generator=g), torch.tensor(positions, dtype=torch.int32))


def test_the_tables_are_the_parameters_read_only_at_positions() -> None:
    assert positional_tables(Tables.functions["attend"]) == {"cos", "sin"}
    assert positional_tables(Tables.functions["layer"]) == {"cos", "sin"}  # through the sibling call
    assert positional_tables(Tables.functions["also_added"]) == {"sin"}


def test_a_table_of_fewer_rows_gives_what_its_rows_give_in_the_whole_table() -> None:
    q, cos, sin, pos = _args(16, [0, 5, 7])
    whole = Tables.functions["layer"](q, cos, sin, pos)
    fewer = Tables.functions["layer"](q, cos[:8].clone(), sin[:8].clone(), pos)
    assert torch.equal(whole, fewer)


def test_a_position_past_the_rows_given_is_refused_naming_them() -> None:
    q, cos, sin, pos = _args(8, [0, 5, 8])
    with pytest.raises(ValueError, match=r"pos_ids \[0, 8\] out of range for 8 cache rows"):
        Tables.functions["layer"](q, cos, sin, pos)


@pytest.mark.parametrize("rows", [0, 17])
def test_a_table_of_no_rows_or_more_rows_than_declared_is_refused(rows: int) -> None:
    q, cos, sin, pos = _args(rows, [0])
    with pytest.raises(ValueError, match=rf"argument cos has shape \({rows}, 8\), declared Tensor\[\(16, 8\), f32\] "
                                         rf"\(axis 0: {rows} != 16\)"):
        Tables.functions["layer"](q, cos, sin, pos)


def test_an_activation_read_otherwise_keeps_its_declared_rows() -> None:
    q, cos, sin, pos = _args(8, [0, 1])
    with pytest.raises(ValueError, match=r"argument cos has shape \(8, 8\), declared Tensor\[\(16, 8\), f32\]"):
        Tables.functions["also_added"](q, cos, sin, pos)


def test_the_check_commands_inputs_take_a_table_of_fewer_rows(tmp_path) -> None:
    """``tilefoundry check --inputs`` binds by the same rule: fewer rows of a table are read, of anything else
    refused naming the file."""
    from tilefoundry.cli.check_data import _function_params, read_inputs
    from tilefoundry.cli.refusal import Refusal

    fn = Tables.functions["layer"]
    file = tmp_path / "inputs.pt"
    torch.save(_args(8, [0, 5]), file)
    assert read_inputs(str(file), _function_params(fn), "cpu")[1].shape == (8, 8)
    torch.save(_args(8, [0, 5]), file)
    with pytest.raises(Refusal, match=r"--inputs .*inputs.pt: argument cos has shape \(8, 8\)"):
        read_inputs(str(file), _function_params(Tables.functions["also_added"]), "cpu")

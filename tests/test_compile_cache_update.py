"""A cache update of rows with no axis after the sequence axis: a ``(batch, capacity)`` cache of token ids or of
a score per position, jitted for the CPU against the evaluator.

The staged lowering gives such an update an axis of extent 1 after the sequence axis (``lower/stages.py``:
``_cache_row_axes``): its kernels copy the cache and write the first ``n_new`` new rows at ``cur_pos`` as they do
rows of any width, and a cache passed as its own output is updated in place.
"""

from __future__ import annotations

import pytest
import torch

from tests.compile_kernels import compiled_only, evaluator_refuses
from tilefoundry import func, jit, module
from tilefoundry.dsl import DimVar, Tensor, tf
from tilefoundry.runtime.check import check, equal

pytestmark = pytest.mark.usefixtures("compile_cache")

S = DimVar("s", 1, 65)


@module(entry="token_ids")
class FlatCaches:
    @func
    def token_ids(cache: Tensor[(1, 128), "i64"], cur_pos: Tensor[(), "i64"], n_new: Tensor[(), "i64"],
                  ids: Tensor[(1, S), "i64"]):
        """The tokens seen so far (a repetition penalty's history)."""
        return tf.cache_update(cache, cur_pos, n_new, ids)

    @func
    def scores(cache: Tensor[(2, 64), "f32"], cur_pos: Tensor[(), "i64"], n_new: Tensor[(), "i64"],
               x: Tensor[(2, S), "f32"]):
        """A score per position, computed by the same function, for two sequences."""
        return tf.cache_update(cache, cur_pos, n_new, x * 2.0 + 1.0)


def _inputs(name: str, s: int, at: int, written: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(s + at)
    if name == "token_ids":
        return (torch.randint(0, 9, (1, 128), generator=g), torch.tensor(at), torch.tensor(written),
                torch.randint(10, 99, (1, s), generator=g))
    return torch.randn(2, 64, generator=g), torch.tensor(at), torch.tensor(written), torch.randn(2, s, generator=g)


@pytest.mark.parametrize("name", ["token_ids", "scores"])
def test_rows_of_one_element_are_written_at_the_position_as_the_evaluator_writes_them(name: str) -> None:
    compiled = jit(FlatCaches, target="cpu").functions[name]
    fn = FlatCaches.functions[name]
    for s, at, written in ((1, 0, 1), (7, 5, 7), (40, 20, 33), (9, 55, 9), (3, 4, 0)):
        report = check(compiled_only(compiled), fn, _inputs(name, s, at, written), expect={"output": [equal()]})
        assert report.passed, f"{name}: {s} rows at {at}, {written} written:\n{report}"


def test_a_flat_cache_passed_as_its_own_output_is_updated_in_place() -> None:
    """The new ids land at cur_pos in the tensor the caller passed; the rows around them keep their values."""
    compiled = jit(FlatCaches, target="cpu").functions["token_ids"]
    cache, at, written, ids = _inputs("token_ids", 6, 10, 4)
    want = FlatCaches.functions["token_ids"](cache, at, written, ids)
    mine = cache.clone()
    with evaluator_refuses():
        got = compiled(mine, at, written, ids, mine)
    assert got is mine and torch.equal(mine, want)
    assert torch.equal(mine[:, 10:14], ids[:, :4]) and torch.equal(mine[:, 14:], cache[:, 14:])


def test_a_write_past_the_caches_end_is_refused_and_writes_nothing() -> None:
    compiled = jit(FlatCaches, target="cpu").functions["scores"]
    cache, at, written, x = _inputs("scores", 8, 60, 8)
    out = torch.full_like(cache, float("nan"))
    with pytest.raises(ValueError, match="cache"):
        compiled(cache, at, written, x, out)
    assert torch.isnan(out).all()

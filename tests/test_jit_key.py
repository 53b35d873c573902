"""The canonical text of a Module and jit's key, sha256(canonical_module_text + target_text + options_text):
what makes two definitions one key, and what makes them two. No compiler runs here."""

from __future__ import annotations

from typing import Any

import pytest

from tilefoundry import CompilerOptions, func, module
from tilefoundry.dsl import ConstTensor, DimVar, Mesh, Tensor, Topology, tf
from tilefoundry.ir.core.canonical import canonical_module_text
from tilefoundry.ir.ops.reduction import ReduceKind
from tilefoundry.lower import as_module
from tilefoundry.runtime.jit import jit_key
from tilefoundry.target import CpuTarget

ROWS = DimVar("rows", 1, 4097)


def _first_definition() -> Any:
    @func
    def norm(x: Tensor[(ROWS, 64), "f32"], w: ConstTensor[(64,), "f32"]):
        y = tf.rms_norm(x, w, 1e-6)
        return y * 2.0

    return norm


def _second_definition() -> Any:
    # The same kernel, written again at other lines of this file and traced separately.

    @func
    def norm(x: Tensor[(ROWS, 64), "f32"], w: ConstTensor[(64,), "f32"]):
        y = tf.rms_norm(x, w, 1e-6)
        return y * 2.0

    return norm


def _with(eps: float = 1e-6, rows: DimVar = ROWS) -> Any:
    @func
    def norm(x: Tensor[(rows, 64), "f32"], w: ConstTensor[(64,), "f32"]):
        y = tf.rms_norm(x, w, eps)
        return y * 2.0

    return norm


def test_two_separately_traced_identical_definitions_give_one_key() -> None:
    a, b = _first_definition(), _second_definition()
    assert a is not b and a.graph is not b.graph
    assert a.loc.lineno != b.loc.lineno
    assert jit_key(a, target="cpu") == jit_key(b, target="cpu") == jit_key(_with(), target="cpu")
    assert canonical_module_text(as_module(a)) == canonical_module_text(as_module(b))


@pytest.mark.usefixtures("default_opt_level")
def test_eps_dimvar_range_target_and_options_each_change_the_key() -> None:
    base = jit_key(_with(), target="cpu")
    assert jit_key(_with(eps=1e-5), target="cpu") != base
    assert jit_key(_with(rows=DimVar("rows", 1, 4096)), target="cpu") != base
    assert jit_key(_with(rows=DimVar("rows", 0, 4097)), target="cpu") != base
    assert jit_key(_with(), target="cuda") != base
    assert jit_key(_with(), target=CpuTarget()) == base  # one target, however it is spelled
    assert jit_key(_with(), target="cpu", options=CompilerOptions(opt_level=2)) != base
    assert jit_key(_with(), target="cpu", options=CompilerOptions()) == base


def test_a_reduce_kind_by_name_or_by_member_is_one_key() -> None:
    def kernel(kind: object) -> Any:
        @func
        def largest(x: Tensor[(ROWS, 64), "f32"]):
            return tf.reduce(x, axes=(-1,), kind=kind)

        return largest

    assert jit_key(kernel("max"), target="cpu") == jit_key(kernel(ReduceKind.max), target="cpu")
    assert jit_key(kernel("max"), target="cpu") != jit_key(kernel(ReduceKind.min), target="cpu")


def test_a_bare_function_and_its_implicit_module_are_one_key() -> None:
    fn = _with()
    assert jit_key(fn, target="cpu") == jit_key(as_module(fn), target="cpu")


def _child() -> Any:
    @module(entry="k")
    class Child:
        @func
        def k(x: Tensor[(8, 64), "f32"]):
            with Mesh(("cta",), layout=(8,), names=("row",)):
                y = tf.exp(x)
            return y

    return Child


def test_the_owners_hierarchy_is_part_of_the_key() -> None:
    child = _child()

    @module(topologies=(Topology("cta", 8), Topology("thread", 1)))
    class OneThread:
        part = child

    @module(topologies=(Topology("cta", 8), Topology("thread", 32)))
    class Warp:
        part = child

    @module(topologies=(Topology("cta", 8), Topology("thread", 1)))
    class AlsoOneThread:
        part = child

    keys = {jit_key(owner.part, target="cpu") for owner in (OneThread, Warp)}
    assert len(keys) == 2
    assert jit_key(OneThread.part, target="cpu") == jit_key(AlsoOneThread.part, target="cpu")
    assert "topologies=(cta=8, thread=32)" in canonical_module_text(Warp.part)
    assert "topologies=(none)" in canonical_module_text(child)


def test_the_canonical_text_spells_out_types_attributes_scopes_and_stable_ids() -> None:
    text = canonical_module_text(_child())
    lines = text.splitlines()
    assert lines[0] == "module Child entry=k target=none topologies=(none)"
    assert lines[1] == "  func k(%x: Tensor[(8, 64), f32])"
    assert lines[2] == ("    %0 = exp(%x) {} in mesh(('cta',), (8,), ('row',)) : [(8, 64), f32]")
    assert lines[3] == "    return %0 as None"
    norm = canonical_module_text(as_module(_with()))
    assert "rms_norm(%x, %w) {eps=1e-06, compute_dtype=f32}" in norm
    assert "rows[1,4097)" in norm and ".py" not in norm  # DimVar ranges in; source locations out

"""A dispatching ``@func`` (body ``pass``, variants by ``specialize``) compiles: one kernel set per variant and an
entry of the function's own name that reads the DimVar from its argument and calls the variant serving its extent
(lower/dispatch.py, codegen/dispatch.py). Jitted for the CPU against the evaluator (the compiled code alone: the
evaluator patched to raise, outputs handed in filled with NaN): the reference-style Qwen3 ``attend`` (decode: one
token; prefill: several, masked by aranges) through one entry, and a small module whose variants compute different
things and take different weights. An extent outside the DimVar's range is refused naming it; variants returning
different types are refused at lowering, naming both. The reference's entry is built with nvcc in
tests/test_compile_cuda_build.py and run on the H200 in tests/gpu/test_compile_stages.py.

Tolerances: f32; the attention's sums differ from the evaluator's in order only: 1e-4. The small module: exact.
"""

from __future__ import annotations

import pytest
import torch

from tests.compile_kernels import compiled_only
from tests.hf_models import CONFIGS
from tests.reference_qwen3 import build
from tests.test_compile_reference_qwen3 import _random
from tilefoundry import func, jit, lower, module
from tilefoundry.dsl import ConstTensor, DimVar, DimVarRangePat, Tensor, tf
from tilefoundry.lower import LoweringError
from tilefoundry.runtime.check import allclose, check

pytestmark = pytest.mark.usefixtures("compile_cache")

S = DimVar("s", 1, 64)


@module(entry="scaled")
class Dispatching:
    @func
    def scaled(x: Tensor[(S, 8), "f32"], w: ConstTensor[(8,), "f32"]):
        pass

    @scaled.specialize(DimVarRangePat(S, 1, 4))
    def few(x, w):
        """A few rows: scaled by the weight."""
        return x * w

    @scaled.specialize(DimVarRangePat(S, 4, None))
    def many(x, w, bias: ConstTensor[(8,), "f32"]):
        """More rows: a weight of this variant's own too."""
        return x * w + bias

    @func
    def shifted(x: Tensor[(S, 8), "f32"]):
        """A second dispatching function whose variants have the same names as scaled's (their kernels named apart)."""
        pass

    @shifted.specialize(DimVarRangePat(S, 1, 4))
    def few(x):  # noqa: F811
        return tf.exp(x)

    @shifted.specialize(DimVarRangePat(S, 4, None))
    def many(x):  # noqa: F811
        return tf.exp(x) + 1.0


def reference_attend():  # noqa: ANN201
    """The reference-style Qwen3 layer's attend, which dispatches to decode (one token) and prefill."""
    qwen3, _, _ = build(CONFIGS["qwen3"](), "f32")
    return qwen3.modules[0].functions["attend"]


@pytest.mark.parametrize("sizes", [{"seq": 1, "ctx_len": 0}, {"seq": 1, "ctx_len": 5}, {"seq": 6, "ctx_len": 0},
                                   {"seq": 6, "ctx_len": 5}], ids=lambda s: f"seq{s['seq']}_ctx{s['ctx_len']}")
def test_one_entry_runs_the_variant_serving_the_sequence_length(sizes: dict[str, int]) -> None:
    attend = reference_attend()
    compiled = jit(attend, target="cpu")
    assert set(compiled.functions) == {"attend", "attend_decode", "attend_prefill"}
    variant = attend.variants[0] if sizes["seq"] == 1 else attend.variants[1]
    report = check(compiled_only(compiled), attend, _random(variant, sizes, 0),
                   expect={f"output[{i}]": [allclose(atol=1e-4, rtol=1e-4)] for i in range(3)})
    assert report.passed, f"{sizes}:\n{report}"


def test_the_entry_is_printed_with_its_ranges() -> None:
    text = str(lower(reference_attend(), "cpu"))
    assert "dispatch attend(x: Tensor[(1, seq, 64), f32]" in text, text
    assert "1 <= seq < 2: attend_decode(x, q, k, v, cache_k, cache_v, o_proj, out0, out1, out2)" in text, text
    assert "2 <= seq < 65: attend_prefill(" in text, text


@pytest.mark.parametrize("rows", [1, 3, 4, 9])
def test_variants_with_weights_of_their_own_match_the_evaluator(rows: int) -> None:
    compiled = jit(Dispatching, target="cpu")
    abi = compiled.type
    assert [p.name for p in abi.params] == ["x", "w", "bias", "out"]
    g = torch.Generator().manual_seed(rows)
    args = (torch.randn(rows, 8, generator=g), torch.randn(8, generator=g), torch.randn(8, generator=g))
    fn = Dispatching.functions["scaled"]
    variant = fn.variants[0] if rows < 4 else fn.variants[1]
    want = variant(*args[:2]) if rows < 4 else variant(*args)
    got = compiled_only(compiled)(*args)
    assert torch.equal(got, want), (got, want)


@pytest.mark.parametrize("rows", [2, 6])
def test_two_dispatching_functions_with_variants_of_one_name_build_together(rows: int) -> None:
    compiled = jit(Dispatching, target="cpu")
    assert {"scaled_few", "scaled_many", "shifted_few", "shifted_many"} <= set(compiled.functions)
    x = torch.randn(rows, 8, generator=torch.Generator().manual_seed(rows))
    want = torch.exp(x) + (0.0 if rows < 4 else 1.0)
    assert torch.allclose(compiled_only(compiled.shifted)(x), want, rtol=1e-6, atol=0)


def test_an_extent_outside_the_range_is_refused_naming_the_dimvar() -> None:
    compiled = jit(Dispatching, target="cpu")
    w = torch.ones(8)
    with pytest.raises(ValueError, match=r"scaled: argument x .*DimVar s = 64 is outside its range \[1, 64\)"):
        compiled(torch.zeros(64, 8), w, w)
    with pytest.raises(TypeError, match=r"scaled: argument x has rank 1 \(shape \(8,\)\), declared Tensor\[\(s, 8\)"):
        compiled(torch.zeros(8), w, w)


def test_variants_returning_different_types_are_refused_naming_both() -> None:
    @func
    def mixed(x: Tensor[(S, 8), "f32"]):
        pass

    @mixed.specialize(DimVarRangePat(S, 1, 4))
    def as_float(x):
        return x * 2.0

    @mixed.specialize(DimVarRangePat(S, 4, None))
    def as_half(x):
        return tf.cast(x, "bf16")

    with pytest.raises(LoweringError, match=r"cannot compile dispatch in mixed: its variant as_half returns "
                                            r"\(Tensor\[\(s, 8\), bf16\]\), its variant as_float returns"):
        lower(mixed, "cpu")

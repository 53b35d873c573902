"""A model source written in the reference implementation's style (tests/reference_qwen3.py: a KV cache grown by
``concat``, an embedding read through ``reshape(index_select(...))``, attention merged by hand from two online-softmax
parts) compiles function by function: each jitted for the CPU and compared with the evaluator (the compiled code
alone: the evaluator patched to raise, outputs handed in filled with NaN), at a decode step over an empty cache and
over a cache of 5 entries, and at prompts; the same functions built with nvcc in tests/test_compile_cuda_build.py.
The prefill variant's causal mask is built from two ``arange``s, computed by the compiled kernel.

Tolerances: f32 throughout; sums (matmuls, norms, the softmax's) differ from the evaluator's in order only: 1e-4.
"""

from __future__ import annotations

import pytest
import torch

from tests.compile_kernels import compiled_only, output_paths
from tests.hf_models import CONFIGS
from tests.reference_qwen3 import build
from tilefoundry import jit
from tilefoundry.runtime.check import allclose, check, equal

pytestmark = pytest.mark.usefixtures("compile_cache")

CLOSE = allclose(atol=1e-4, rtol=1e-4)


@pytest.fixture(scope="module")
def model():  # noqa: ANN201
    qwen3, _, _ = build(CONFIGS["qwen3"](), "f32")
    return qwen3


def reference_functions() -> dict:
    """The functions of the model (attend's decode and prefill variants), by name: built with nvcc in
    tests/test_compile_cuda_build.py."""
    qwen3, _, _ = build(CONFIGS["qwen3"](), "f32")
    layer = qwen3.modules[0].functions
    decode, prefill = (next(v for v in layer["attend"].variants if v.name == n) for n in ("decode", "prefill"))
    return {"qkv": layer["qkv"], "decode": decode, "prefill": prefill, "mlp": layer["mlp"],
            "embed": qwen3.functions["embed"], "head": qwen3.functions["head"]}


def _random(fn, sizes: dict[str, int], seed: int) -> tuple[torch.Tensor, ...]:
    """Inputs of ``fn`` at the DimVar extents ``sizes``: token ids and positions in range, the rest normal."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for p in fn.params:
        shape = tuple(d if isinstance(d, int) else sizes[str(d)] for d in p.type.shape)
        if p.name == "input_ids":
            out.append(torch.randint(0, 256, shape, generator=g))
        elif p.name == "pos_ids":
            out.append(torch.arange(sizes.get("ctx_len", 0), sizes.get("ctx_len", 0) + shape[0]))
        else:
            out.append(torch.randn(shape, generator=g) * (0.2 if "proj" in p.name else 1.0))
    return tuple(out)


def _check(fn, sizes: dict[str, int]) -> None:
    compiled = jit(fn, target="cpu")
    paths = output_paths(fn)
    for seed in range(2):
        report = check(compiled_only(compiled), fn, _random(fn, sizes, seed), expect={p: [CLOSE] for p in paths})
        assert report.passed, f"{fn.name} at {sizes}, seed {seed}:\n{report}"


@pytest.mark.parametrize("name", ["qkv", "mlp"])
def test_the_layers_projections_match_the_evaluator(model, name: str) -> None:
    for seq in (1, 7):
        _check(model.modules[0].functions[name], {"seq": seq})


@pytest.mark.parametrize("ctx", [0, 5])
def test_a_decode_step_growing_the_cache_by_concat_matches_the_evaluator(model, ctx: int) -> None:
    attend = model.modules[0].functions["attend"]
    decode = next(v for v in attend.variants if v.name == "decode")
    _check(decode, {"seq": 1, "ctx_len": ctx})


def test_the_embedding_read_through_a_reshape_of_its_rows_matches_the_evaluator(model) -> None:
    embed = model.functions["embed"]
    compiled = jit(embed, target="cpu")
    for seq in (1, 6):
        ids = torch.randint(0, 256, (1, seq), generator=torch.Generator().manual_seed(seq))
        table = torch.randn(256, 64)
        report = check(compiled_only(compiled), embed, (ids, table), expect={"output": [equal()]})
        assert report.passed, f"seq {seq}:\n{report}"


def test_the_head_matches_the_evaluator(model) -> None:
    _check(model.functions["head"], {"seq": 4})


@pytest.mark.parametrize("ctx", [0, 5])
def test_a_prefill_masked_by_aranges_matches_the_evaluator(model, ctx: int) -> None:
    """The prompt's causal mask built from two ``arange``s (positions computed by the compiled kernel), over an
    empty cache and a cache of 5 entries."""
    prefill = next(v for v in model.modules[0].functions["attend"].variants if v.name == "prefill")
    _check(prefill, {"seq": 6, "ctx_len": ctx})

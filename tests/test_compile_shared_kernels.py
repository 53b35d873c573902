"""A kernel whose code another kernel of the same translation unit already has is emitted once (codegen/unit.py's
``SharedKernels``): a one-line note stands where it would be, and every later line (host entries, launch kernels
calling their parts) names the first. Checked on both targets' source: a module of two functions computing the same
thing on the same shapes (one kernel, two entries, both right on the CPU), a third that differs (its own kernel);
the CUDA unit of the families' decoder functions, whose attention's decode and prompt variants share their RoPE,
cache-copy and cache-write stages and the launches holding them; and each of the engine's slots. In each, every
kernel a line names is defined above it, and a shared one's name appears nowhere but in its note. The CUDA unit that
nvcc builds in tests/test_compile_cuda_build.py shares kernels the same way; tests/gpu/test_compile_stages.py runs
it on the GPU.

Tolerances: exact (x * 2 and x * 3 in f32 round the same in any order).
"""

from __future__ import annotations

import re

import pytest
import torch

from tests.test_compile_families import _family, _functions
from tilefoundry import func, jit, lower, module
from tilefoundry.codegen import generate
from tilefoundry.dsl import DimVar, Tensor
from tilefoundry.engine.compiled_kernels import SlotShapes, slot_functions
from tilefoundry.engine.decoder import DecoderSpec
from tilefoundry.ir.core.module import Module

pytestmark = pytest.mark.usefixtures("compile_cache")

R = DimVar("r", 1, 1024)
NOTE = re.compile(r"^// (\w+): the code of (\w+), which its launches call$", re.M)
DEFINED = re.compile(r"^(?:__global__|__device__|void|static)\b(?:[^(\n]|\([^)]*\))*?\b(\w+_(?:kernel|part))\(", re.M)


@module(entry="doubled")
class Twins:
    @func
    def doubled(x: Tensor[(R, 64), "f32"]):
        return x * 2.0

    @func
    def twice(x: Tensor[(R, 64), "f32"]):
        """doubled's math again: its kernel is doubled's."""
        return x * 2.0

    @func
    def tripled(x: Tensor[(R, 64), "f32"]):
        return x * 3.0


def _source(mod: object, target: str) -> str:
    return generate(lower(mod, target)).source


def _definitions(src: str) -> list[str]:
    return DEFINED.findall(src)


def _check_names(src: str) -> list[tuple[str, str]]:
    """Every note's kernel named nowhere else and its first defined above it; every kernel a line calls or
    launches defined above that line. Returns the notes (shared, first)."""
    notes = NOTE.findall(src)
    for shared, first in notes:
        assert len(re.findall(rf"\b{shared}\b", src)) == 1, f"{shared} is named past its note"
        note_at = src.index(f"// {shared}: the code of")
        assert re.search(rf"\b{first}\(", src[:note_at]), f"{first} is not defined before {shared}'s note"
    defined = set(_definitions(src))
    used = set(re.findall(r"\b(\w+_(?:kernel|part))\b", "\n".join(
        line for line in src.splitlines() if not line.lstrip().startswith("//"))))
    assert used <= defined, f"named but never defined: {sorted(used - defined)}"
    return notes


@pytest.mark.parametrize("target", ["cpu", "cuda:sm_90a"])
def test_a_kernel_of_the_same_code_as_an_earlier_one_is_emitted_once(target: str) -> None:
    src = _source(Twins, target)
    defs = _definitions(src)
    assert "doubled_kernel" in defs and "tripled_kernel" in defs
    assert "twice_kernel" not in defs
    assert _check_names(src) == [("twice_kernel", "doubled_kernel")]
    # twice's entry launches doubled's kernel
    entry = src[src.index("// twice_kernel: the code of"):]
    entry = entry[:entry.index("tripled")]
    assert "doubled_kernel" in entry


def test_both_functions_of_a_shared_kernel_compute_their_own_results_on_the_cpu() -> None:
    compiled = jit(Twins, target="cpu")
    x = torch.randn(37, 64)
    for name, factor in (("doubled", 2.0), ("twice", 2.0), ("tripled", 3.0)):
        out = torch.full_like(x, float("nan"))
        getattr(compiled, name)(x, out)
        assert torch.equal(out, x * factor), name


def test_the_decoder_functions_share_the_decode_variants_stages_with_the_prompt_variants_on_cuda() -> None:
    fns = _functions(_family("qwen3", "bfloat16"))
    src = _source(Module("family", dict(fns), entry="qkv"), "cuda:sm_90a")
    notes = _check_names(src)
    # attention's cache copies, RoPE and cache writes are the same code in both variants
    assert ("attend_many_rows_stage0_q_part", "attend_few_rows_stage0_q_part") in notes
    assert ("attend_many_rows_launch0_kernel", "attend_few_rows_launch0_kernel") in notes


def test_every_engine_slot_names_only_kernels_it_defines_on_cuda() -> None:
    spec = DecoderSpec(hidden=64, heads=4, kv_heads=2, head_dim=16, vocab=256, eps=1e-6, max_positions=128)
    for fn in slot_functions(SlotShapes(spec, "bf16", 128, False, True)).values():
        _check_names(_source(fn, "cuda:sm_90a"))

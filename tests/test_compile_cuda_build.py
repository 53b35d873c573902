"""The CUDA source of every compiled op family and fusion, built with nvcc as one translation unit.

The families' decoder-layer functions (Qwen3 in bf16: q/k/v with its norm, q/k norms, attention with RoPE and the
cache writes, the MLP, embedding, head), and the modules of tests/test_compile_prologue.py, test_compile_pairs.py,
test_compile_epilogue.py, test_compile_matmul.py (its matmuls, and those of the streamed schedule),
test_compile_gemm.py (many rows through the tensor cores), test_compile_copied_views.py, test_compile_cache_update.py,
test_compile_rope_cache.py and test_compile_reduce_epilogue.py, and the engine's routed MoE slot,
lowered for CUDA into one Module: one nvcc run (about 15 s of every nvcc run here is the runtime's headers, paid
once) that must print no warning, and whose library exports every function's entry. What each module computes is
checked on the CPU in its own file, and on the H200 in tests/gpu.
"""

from __future__ import annotations

import copy
import shutil

import pytest

from tests.test_compile_arange import Aranges
from tests.test_compile_cache_update import FlatCaches
from tests.test_compile_concat import Joins
from tests.test_compile_copied_views import CopiedViews
from tests.test_compile_dispatch import reference_attend
from tests.test_compile_epilogue import Epilogues
from tests.test_compile_families import _family, _functions
from tests.test_compile_fp8 import Fp8
from tests.test_compile_gemm import Gemms
from tests.test_compile_index_add import IndexAdds
from tests.test_compile_index_copy import IndexCopies
from tests.test_compile_matmul import Matmuls, Streamed
from tests.test_compile_model_patterns import Patterns
from tests.test_compile_other_axes import OtherAxes
from tests.test_compile_pairs import Pairs
from tests.test_compile_prologue import Prologues
from tests.test_compile_reduce_axes import Reductions as AxisReductions
from tests.test_compile_reduce_epilogue import Argmaxes, RaggedHeads, Reductions
from tests.test_compile_reference_qwen3 import reference_functions
from tests.test_compile_rope_cache import RopeCache
from tests.test_compile_split import Splits
from tests.test_compile_zeros import Zeros
from tilefoundry import lower
from tilefoundry.codegen import generate, link
from tilefoundry.codegen.options import CompilerOptions
from tilefoundry.engine.compiled_kernels import SlotShapes, slot_functions
from tilefoundry.engine.decoder import DecoderSpec
from tilefoundry.ir.core.function import Function
from tilefoundry.ir.core.module import Module
from tilefoundry.runtime.loader import load_library
from tilefoundry.target import CudaTarget
from tilefoundry.tir.function import TirModule

pytestmark = [pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc to build CUDA code"),
              pytest.mark.usefixtures("compile_cache")]


def _renamed(fn: Function, name: str) -> Function:
    if fn.name == name:
        return fn
    out = copy.copy(fn)
    out.name = name
    return out


def _moe_slot() -> Function:
    """The engine's routed MoE slot (one token, reading only its chosen experts) at a small bf16 shape."""
    spec = DecoderSpec(hidden=64, heads=4, kv_heads=2, head_dim=16, vocab=256, eps=1e-6, max_positions=128,
                       experts_per_token=2, normalize_experts=True)
    return slot_functions(SlotShapes(spec, "bf16", 0, False, True, 4, 32))["moe"]


def _attention_slot() -> Function:
    """The engine's attention slot at Qwen3's head_dim of 128 (bf16), whose prompt variant (17 rows and more) runs
    blocks of query rows through the tensor cores (ops::attention_rows)."""
    spec = DecoderSpec(hidden=512, heads=4, kv_heads=2, head_dim=128, vocab=256, eps=1e-6, max_positions=256)
    return slot_functions(SlotShapes(spec, "bf16", 0, False, False))["attention"]


def _everything() -> TirModule:
    """Every module's functions lowered for CUDA into one TirModule (each module lowered as itself: their weights'
    names differ in shape across them), a function named after its module where two would share a name."""
    groups = {"family": _functions(_family("qwen3", "bfloat16")), "prologue": dict(Prologues.functions),
              "pairs": dict(Pairs.functions), "epilogue": dict(Epilogues.functions),
              "matmul": dict(Matmuls.functions), "streamed": dict(Streamed.functions),
              "rope": dict(RopeCache.functions), "argmax": dict(Argmaxes.functions),
              "reductions": dict(Reductions.functions), "ragged": dict(RaggedHeads.functions),
              "split": dict(Splits.functions), "join": dict(Joins.functions),
              "reference": {**reference_functions(), "attend": reference_attend()},
              "zeros": dict(Zeros.functions), "index_copy": dict(IndexCopies.functions),
              "reduce_axes": dict(AxisReductions.functions), "arange": dict(Aranges.functions),
              "other_axes": dict(OtherAxes.functions), "index_add": dict(IndexAdds.functions),
              "patterns": dict(Patterns.functions), "gemm": dict(Gemms.functions),
              "copied_views": dict(CopiedViews.functions), "flat_caches": dict(FlatCaches.functions),
              "fp8": dict(Fp8.functions), "moe": {"moe": _moe_slot()},
              "prompt_attention": {"prompt_attention": _attention_slot()}}
    seen: dict[str, int] = {}
    for fns in groups.values():
        for name in fns:
            seen[name] = seen.get(name, 0) + 1
    functions = {}
    dispatches = {}
    for group, fns in groups.items():
        renamed = {}
        for name, fn in fns.items():
            unique = name if seen[name] == 1 else f"{group}_{name}"
            renamed[unique] = _renamed(fn, unique)
        # one body for every row count but in the GEMM group, whose any_rows is the split's own case: the families'
        # prompt variants are more instantiations of the same tensor-core tier (nvcc 95 -> 155 s with them all); and
        # the prompt attention's, whose many rows take the attention's tensor-core tier
        split = group in ("gemm", "prompt_attention")
        lowered = lower(Module(group, renamed, entry=next(iter(renamed))), CudaTarget(), split_rows=split)
        functions.update(lowered.functions)
        dispatches.update(lowered.dispatches)
    return TirModule("CudaBuild", CudaTarget(), functions, next(iter(functions)), dispatches)


def test_every_compiled_family_and_fusion_builds_with_nvcc_as_one_unit_and_exports_every_entry() -> None:
    mod = _everything()
    assert len(mod.functions) > 30
    # At -O0 (host compiler and ptxas): the build's warnings and exports are the point here, and the level shortens
    # nvcc's run on this unit (host compile 36 -> 10 s, ptxas 29 -> 16 s against -O1 and ptxas' default -O3, on this
    # 2-core machine; cicc's time stays: 65 s, 90 s since each GEMM kernel holds both tile shapes, nvcc --time alone),
    # which shortens `make test` (its limit is 15 minutes). The same functions build at -O3 where they run:
    # tests/gpu/test_compile_stages.py, jit's default.
    generated = generate(mod)
    linked = link(generated, CompilerOptions(opt_level=0))
    assert linked.library.is_file() and "warning" not in linked.diagnostics.lower(), linked.diagnostics
    entries = load_library(linked)
    for name in (*mod.functions, *mod.dispatches):
        assert callable(entries[name]), name
    assert "reference_attend" in mod.dispatches  # the reference-style attend (renamed: the family has one)
    assert "ops::attention_rows<float>(" in generated.source  # the prompt attention's tensor-core tier

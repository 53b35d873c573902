"""A staged function's launches on CUDA: independent stages of one block size share a launch
(codegen/cuda/launches.py), and no stage shares one with a stage it depends on.

Every decoder family's functions and the compiled kernel set's slots are lowered for CUDA and their launch plans
checked against the stages' reads and writes; the plan of the Qwen3 rope + cache slot is spelled out (one launch
where the caches are updated in place: the norms read inside the ropes, k rotated straight into its cache, the
caches' copies a prelude of no CTAs). (The kernels run on the H200 in
tests/gpu: the engine's compiled set against the reference.)
"""

from __future__ import annotations

import dataclasses

import pytest

from tests.hf_models import CONFIGS
from tilefoundry import lower
from tilefoundry.codegen import generate
from tilefoundry.codegen.cuda.emit import CudaHost, CudaKernel
from tilefoundry.codegen.cuda.launches import SharedLaunch, plan_launches
from tilefoundry.engine.compiled_kernels import SlotShapes, slot_functions
from tilefoundry.engine.decoder import DecoderSpec
from tilefoundry.lower import LoweringError
from tilefoundry.models.config import parse_config
from tilefoundry.models.decoder import build_causal_lm
from tilefoundry.target import CudaTarget
from tilefoundry.tir.function import PrimFunc

QWEN3 = DecoderSpec(hidden=2048, heads=16, kv_heads=8, head_dim=128, vocab=151936, eps=1e-6, max_positions=40960)


def _slots() -> dict:
    return slot_functions(SlotShapes(QWEN3, "bf16", 6144, False, True))


def _staged(fn: object, target: CudaTarget | None = None) -> PrimFunc:
    """``fn``'s one PrimFunction for ``target`` (default sm_90a), one body for every row count as the engine builds
    its slots (``split_rows=False``)."""
    tm = lower(fn, target if target is not None else CudaTarget(), split_rows=False)
    return tm.functions[tm.entry]


def _accesses(staged: PrimFunc, k: int) -> tuple[set[str], set[str]]:
    same = dict(staged.aliases)
    stage = staged.stages[k]
    reads = {same.get(a, a) for p, a in zip(stage.fn.params, stage.args) if not p.is_output}
    writes = {same.get(a, a) for p, a in zip(stage.fn.params, stage.args) if p.is_output}
    return reads, writes


def _check_plan(staged: PrimFunc) -> int:
    """Asserts the launch plan of ``staged`` runs every stage once, after every stage it depends on and beside
    none of them, in launches of one block size; returns how many launches it makes."""
    emitted, launches = CudaHost.stage_emitters(staged, CudaKernel)
    order = [launch.stages if isinstance(launch, SharedLaunch) else
             (next(k for k, s in enumerate(staged.stages) if s.fn is launch.fn),) for launch in launches]
    assert sorted(k for group in order for k in group) == list(range(len(staged.stages)))
    at = {k: n for n, group in enumerate(order) for k in group}
    for k in range(len(staged.stages)):
        reads, writes = _accesses(staged, k)
        for j in range(k):
            e_reads, e_writes = _accesses(staged, j)
            if e_writes & (reads | writes) or writes & e_reads:
                assert at[j] < at[k], f"{staged.name}: stage {k} runs no later than stage {j}, which it depends on"
    for launch in launches:
        if isinstance(launch, SharedLaunch):
            assert len({staged.stages[k].fn.schedule.threads_per_cta for k in launch.stages}) == 1
            assert all(staged.stages[k].fn.schedule.placement in ("rows", "rope") for k in launch.stages)
    return len(launches)


def test_the_qwen3_rope_and_cache_slot_is_one_launch_where_its_caches_are_updated_in_place() -> None:
    staged = _staged(_slots()["rope_cache"])
    names = [s.fn.name.removeprefix("rope_cache_") for s in staged.stages]
    # the q/k norms read inside the ropes; k's rope writes into the cache; the caches' copies first
    assert names == ["stage1_copy", "stage0_q", "stage0_k", "stage2_copy", "stage2_write"]
    shareable = [True] * len(staged.stages)
    # the copies a launch of their own (a prelude); both ropes and v's write together after it
    assert [la.stages for la in plan_launches(staged, shareable)] == [(0, 3), (1, 2, 4)]
    assert _check_plan(staged) == 2
    source = generate(lower(_slots()["rope_cache"], CudaTarget())).source
    assert source.count("launch.start(") == 2
    # a cache passed as its own output is not copied: the copies' parts get no CTAs, so the prelude never starts
    assert ("int64_t const ctas0 = static_cast<void const*>(cache_k_ptr) != static_cast<void const*>(out1_ptr) ? "
            "int64_t(8 * capacity) : int64_t(0);") in source
    prelude = source[source.index("// launch 0:"):source.index("// launch 1:")]
    assert "if (ctas > 0) {\n      launch.start(rope_cache_launch0_kernel" in prelude
    # no normed or rotated rows between stages: the norms are the ropes' prologues, k rotated into the cache
    assert "DeviceScratch" not in source
    assert source.count("ops::rms_norm_prologue<float, cute::bfloat16_t>(") == 2
    assert "rope_cache_stage0_q_part(" in source and "wait_for_earlier_kernels();" in source


def test_stages_a_matmul_waits_in_keep_launches_of_their_own() -> None:
    staged = _staged(_slots()["attention"], CudaTarget("sm_80"))  # no clusters: the slices, then their combine
    assert _check_plan(staged) == len(staged.stages) == 2  # the combine reads what the slices write


def test_the_routed_moe_slot_at_qwen3_30b_a3bs_shape_launches_after_what_it_reads() -> None:
    """128 experts, 8 a token: the router, its top-k, the chosen experts' gate/up and down, their weighted sum."""
    spec = dataclasses.replace(QWEN3, experts_per_token=8, normalize_experts=True)
    staged = _staged(slot_functions(SlotShapes(spec, "bf16", 0, False, True, 128, 768))["moe"])
    kinds = [s.fn.schedule.placement for s in staged.stages]
    assert kinds.count("matmul") == 4 and kinds.count("reduce_axis") == 1  # router, gate, up, down; their sum
    assert _check_plan(staged) >= 5


@pytest.mark.parametrize("fam", sorted(CONFIGS))
def test_every_familys_functions_share_launches_only_between_independent_stages(fam: str) -> None:
    raw = CONFIGS[fam]().to_dict()
    raw["torch_dtype"] = raw["dtype"] = "bfloat16"
    model = build_causal_lm(parse_config(raw))
    fns = {**model.functions, **model.layer0.functions}
    staged_count = 0
    for fn in fns.values():
        try:
            lowered = lower(fn, CudaTarget())  # a prompt's and a decode step's variants where their matmuls differ
        except LoweringError:  # a function the compiler refuses says so elsewhere; here only plans matter
            continue
        for staged in lowered.functions.values():
            if staged.stages:
                staged_count += 1
                _check_plan(staged)
    assert staged_count > 0

"""Staged functions on the GPU: matmuls and the families' decoder functions jitted for CUDA against the evaluator,
and a staged function captured once in a CUDA graph serving every position.

The functions are those of tests/test_compile_matmul.py and tests/test_compile_families.py (the CPU suite runs
them on the CPU target): each call is the compiled code alone (outputs poisoned with NaN, the evaluator refusing
to run), and a staged entry's temporaries are stream-ordered allocations, so a graph captures them. The cache
position and the token positions are read on the device: a graph captured at one position replays at others
after the caller writes new positions into the same tensors.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root, for tests.*

from tests.compile_kernels import caches_in_place, compiled_only, evaluator_refuses, output_paths  # noqa: E402
from tests.test_compile_arange import CASES as ARANGE_CASES  # noqa: E402
from tests.test_compile_arange import Aranges  # noqa: E402
from tests.test_compile_attention import CASES as ATTENTION_CASES  # noqa: E402
from tests.test_compile_attention import Attention, check_far_query_positions  # noqa: E402
from tests.test_compile_attention import _inputs as attention_inputs  # noqa: E402
from tests.test_compile_cache_update import FlatCaches  # noqa: E402
from tests.test_compile_cache_update import _inputs as flat_cache_inputs  # noqa: E402
from tests.test_compile_concat import Joins  # noqa: E402
from tests.test_compile_concat import _inputs as join_inputs  # noqa: E402
from tests.test_compile_copied_views import F32 as COPIED_F32  # noqa: E402
from tests.test_compile_copied_views import CopiedViews  # noqa: E402
from tests.test_compile_copied_views import _inputs as copied_inputs  # noqa: E402
from tests.test_compile_dispatch import reference_attend  # noqa: E402
from tests.test_compile_epilogue import BF16 as EPILOGUE_BF16  # noqa: E402
from tests.test_compile_epilogue import F32 as EPILOGUE_F32  # noqa: E402
from tests.test_compile_epilogue import Epilogues  # noqa: E402
from tests.test_compile_epilogue import _inputs as epilogue_inputs  # noqa: E402
from tests.test_compile_families import BF16, F32, _expect, _family, _functions, _inputs  # noqa: E402
from tests.test_compile_fp8 import EIGHT_BIT_CASTS, Fp8, check_8_bit_cast, check_8_bit_reads  # noqa: E402
from tests.test_compile_fuzz import _inputs as chain_inputs  # noqa: E402
from tests.test_compile_fuzz import _picking_seeds, chain  # noqa: E402
from tests.test_compile_gemm import Gemms, gemm_inputs  # noqa: E402
from tests.test_compile_index_add import IndexAdds  # noqa: E402
from tests.test_compile_index_add import _inputs as index_add_inputs  # noqa: E402
from tests.test_compile_index_copy import CASES as INDEX_CASES  # noqa: E402
from tests.test_compile_index_copy import IndexCopies  # noqa: E402
from tests.test_compile_matmul import Matmuls, Streamed, streamed_inputs  # noqa: E402
from tests.test_compile_matmul import _inputs as matmul_inputs  # noqa: E402
from tests.test_compile_model_patterns import EXPECT as PATTERN_EXPECT  # noqa: E402
from tests.test_compile_model_patterns import Patterns  # noqa: E402
from tests.test_compile_model_patterns import _inputs as pattern_inputs  # noqa: E402
from tests.test_compile_other_axes import EXPECT as OTHER_AXES_EXPECT  # noqa: E402
from tests.test_compile_other_axes import ROWS as OTHER_AXES_ROWS  # noqa: E402
from tests.test_compile_other_axes import OtherAxes  # noqa: E402
from tests.test_compile_other_axes import _inputs as other_axes_inputs  # noqa: E402
from tests.test_compile_reduce_axes import CASES as AXIS_CASES  # noqa: E402
from tests.test_compile_reduce_axes import Reductions as AxisReductions  # noqa: E402
from tests.test_compile_reduce_epilogue import (  # noqa: E402
    Argmaxes,
    RaggedHeads,
    Reductions,
    _exact_case,
    _planted,
    _torch_choice,
    ragged_inputs,
)
from tests.test_compile_reduce_epilogue import _inputs as reduction_inputs  # noqa: E402
from tests.test_compile_reference_qwen3 import _random as reference_inputs  # noqa: E402
from tests.test_compile_reference_qwen3 import reference_functions  # noqa: E402
from tests.test_compile_rope_cache import BF16 as ROPE_BF16  # noqa: E402
from tests.test_compile_rope_cache import CASES as ROPE_CASES  # noqa: E402
from tests.test_compile_rope_cache import RopeCache  # noqa: E402
from tests.test_compile_rope_cache import _inputs as rope_inputs  # noqa: E402
from tests.test_compile_split import CASES as SPLIT_CASES  # noqa: E402
from tests.test_compile_split import Splits  # noqa: E402
from tests.test_compile_zeros import CASES as ZERO_CASES  # noqa: E402
from tests.test_compile_zeros import Zeros  # noqa: E402

from tilefoundry import CompilerOptions, jit  # noqa: E402
from tilefoundry.runtime.check import allclose, check, equal  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

FAMILIES = [("llama", "float32"), ("qwen2", "bfloat16"), ("qwen3", "bfloat16"), ("qwen3_moe", "bfloat16")]


@pytest.fixture(scope="module", autouse=True)
def built(request: pytest.FixtureRequest) -> None:
    """Every function of this file built first, the nvcc builds side by side into the disk cache (each ``jit``
    after that loads). Not where ``-k``, ``-m`` or a test's node id picks some of the tests: each then builds what
    it calls (the whole set takes about two minutes of a 16-core device machine)."""
    config = request.config
    if config.getoption("keyword") or config.getoption("markexpr") or any("::" in a for a in config.args):
        return
    from tilefoundry.codegen import generate, link
    from tilefoundry.lower import lower
    from tilefoundry.target import CudaTarget

    fns = [Matmuls, Streamed, Gemms, Fp8, Attention, Epilogues, RopeCache, Argmaxes, Reductions, RaggedHeads, Splits,
           Joins, Zeros, IndexCopies, AxisReductions, Aranges, OtherAxes, IndexAdds, Patterns, CopiedViews, FlatCaches,
           *(chain(seed)[0] for seed in _picking_seeds(3)),
           *reference_functions().values(), reference_attend(),
           *(fn for fam, dt in FAMILIES for fn in _functions(_family(fam, dt)).values())]
    linkables = [generate(lower(f, CudaTarget())) for f in fns]
    with ThreadPoolExecutor(max_workers=max(1, min(len(linkables), os.cpu_count() or 1))) as pool:
        list(pool.map(link, linkables))


def _cuda(args: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    return tuple(a.cuda() for a in args)


@pytest.mark.parametrize("name", sorted(Attention.functions))
def test_a_fused_attention_matches_the_evaluator_on_cuda(name: str) -> None:
    """The fused attention's CUDA tiers (16-byte rows of a head_dim of 16: the grouped tier; 24 and 40: the general
    one) at one query over up to 200 keys and at prompts, several slices and empty ones."""
    compiled = jit(Attention).functions[name]
    fn = Attention.functions[name]
    expect = BF16 if name.endswith("bf16") else F32
    paths = output_paths(fn)
    for s, c in (*ATTENTION_CASES, (1, 2000), (3, 2000)):
        report = check(compiled_only(compiled), fn, _cuda(attention_inputs(name, s, c)),
                       expect={p: [expect] for p in paths})
        assert report.passed, f"{name} at {s} queries over {c} keys:\n{report}"


@pytest.mark.parametrize("head_dim", [128, 64, 48])
def test_a_prompts_attention_through_the_tensor_cores_matches_the_evaluator_on_cuda(head_dim: int) -> None:
    """The engine's attention slot (two query heads a key head) over many query rows: blocks of 64 rows through the
    tensor cores (ops::attention_rows: wgmma where the head_dim is 128, else mma.sync), a prompt from
    position 0 and chunks after cached entries, row counts that fill no block, one block, several; the keys a block
    may see bounded by its last position."""
    from tilefoundry.engine.compiled_kernels import SlotShapes, slot_functions
    from tilefoundry.engine.decoder import DecoderSpec

    spec = DecoderSpec(hidden=4 * head_dim, heads=4, kv_heads=2, head_dim=head_dim, vocab=64, eps=1e-6,
                       max_positions=2048)
    fn = slot_functions(SlotShapes(spec, "bf16", 0, False, False))["attention"]
    compiled = jit(fn)
    g = torch.Generator().manual_seed(0)
    for seq, start, capacity in ((17, 0, 17), (64, 0, 64), (100, 37, 300), (700, 0, 700), (333, 1000, 1500)):
        q = torch.randn(seq, 4, head_dim, generator=g).to(torch.bfloat16)
        keys, vals = (torch.randn(capacity, 2, head_dim, generator=g).to(torch.bfloat16) for _ in range(2))
        pos = torch.arange(start, start + seq, dtype=torch.int32)
        report = check(compiled_only(compiled), fn, _cuda((q, keys, vals, pos)),
                       expect={p: [BF16] for p in output_paths(fn)})
        assert report.passed, f"{seq} query rows from position {start} over {capacity} keys:\n{report}"


@pytest.mark.parametrize("name", ["cache", "cache_strict_bf16"])
def test_query_positions_beyond_any_key_index_compare_as_they_are_on_cuda(name: str) -> None:
    """... through the grouped tier, whose loop over the keys counts in int."""
    check_far_query_positions(jit(Attention).functions[name], name, "cuda")


@pytest.mark.parametrize("name", sorted(Epilogues.functions))
def test_a_matmul_epilogue_matches_the_evaluator_on_cuda(name: str) -> None:
    compiled = jit(Epilogues).functions[name]
    fn = Epilogues.functions[name]
    outs = fn.output_types
    types = outs if isinstance(outs, tuple) else (outs,)
    paths = [f"output[{i}]" for i in range(len(types))] if isinstance(outs, tuple) else ["output"]
    expect = {p: [EPILOGUE_BF16 if t.dtype.name == "bf16" or name == "swish_gate" else EPILOGUE_F32]
              for p, t in zip(paths, types)}
    for m in (1, 3, 17, 64, 256):
        report = check(compiled_only(compiled), fn, _cuda(epilogue_inputs(name, m)), expect=expect)
        assert report.passed, f"{name} at M = {m}:\n{report}"


@pytest.mark.parametrize("name", ["choose_f32", "choose_bf16"])
def test_an_argmax_fused_after_its_matmul_chooses_as_torch_on_cuda(name: str) -> None:
    """Exact sums of small integers (ties across the CTAs' tiles), then NaN columns: the first largest, the first
    NaN, as torch.argmax on the CPU."""
    compiled = jit(Argmaxes).functions[name]
    for seed in range(4):
        x, w = _exact_case(name, 3, seed)
        if seed == 3:
            w[870, 5] = float("nan")
            w[333, 9] = float("nan")
        want = torch.argmax(x.float() @ w.float().t(), dim=-1) if seed == 3 else _torch_choice(x, w)
        out = torch.full((3,), -7, dtype=torch.int64, device="cuda")
        compiled(x.cuda(), w.cuda(), out)
        assert torch.equal(out.cpu(), want), (seed, out, want)


@pytest.mark.parametrize("name", ["normed_head", "scaled", "logits_too", "vocab_head"])
def test_an_argmax_after_a_norm_an_epilogue_or_a_streamed_matmul_matches_the_evaluator_on_cuda(name: str) -> None:
    compiled = jit(Argmaxes).functions[name]
    fn = Argmaxes.functions[name]
    expect = {"output": [equal()]}
    if name == "logits_too":
        expect = {"output[0]": [EPILOGUE_BF16], "output[1]": [equal()]}
    for seed in range(3):
        report = check(compiled_only(compiled), fn, _cuda(_planted(name, seed)), expect=expect)
        assert report.passed, f"{name}, seed {seed}:\n{report}"


@pytest.mark.parametrize("name", sorted(RaggedHeads.functions))
def test_a_head_whose_last_tile_overlaps_the_one_before_matches_the_evaluator_on_cuda(name: str) -> None:
    """Vocabularies of more tiles than one wave of CTAs (Qwen3's 151936, a prime): one wave of wider tiles, the last
    shifted back to end at the vocabulary's end, the token planted in the columns two tiles share and in the last
    column; a sum, an epilogue reading memory or the logits alone: tiles dividing the vocabulary."""
    compiled = jit(RaggedHeads).functions[name]
    fn = RaggedHeads.functions[name]
    sums = allclose(atol=2.0, rtol=2**-7)  # bf16 results of 151936 terms
    expect = {"ragged_greedy": {"output[0]": [EPILOGUE_BF16], "output[1]": [equal()], "output[2]": [EPILOGUE_BF16],
                                "output[3]": [EPILOGUE_BF16]},
              "ragged_odd": {"output[0]": [equal()], "output[1]": [allclose(atol=1e-3, rtol=1e-4)]},
              "ragged_logits": {"output": [EPILOGUE_BF16]},
              "ragged_sum": {"output[0]": [sums], "output[1]": [equal()]},
              "ragged_bias": {"output": [equal()]}}[name]
    for seed in range(3):
        report = check(compiled_only(compiled), fn, _cuda(ragged_inputs(name, seed)), expect=expect)
        assert report.passed, f"{name}, seed {seed}:\n{report}"


@pytest.mark.parametrize("name", ["stats", "greedy"])
def test_reductions_fused_after_their_matmul_match_the_evaluator_on_cuda(name: str) -> None:
    """Every reduce kind of one matmul's rows (each CTA's part, then one CTA's merge: 1024 threads over the parts);
    greedy decoding's token and finiteness, then a logit made +inf, -inf and NaN."""
    compiled = jit(Reductions).functions[name]
    fn = Reductions.functions[name]
    inputs = list(reduction_inputs(fn, 5))
    if name == "stats":
        expect = {f"output[{i}]": [allclose(atol=1e-3, rtol=1e-4)] for i in range(5)}
    else:
        inputs[2][411] = torch.sign(inputs[0][0]).to(torch.bfloat16) * 2  # the token, well clear of the rest
        expect = {"output[0]": [EPILOGUE_BF16], "output[1]": [equal()], "output[2]": [equal()]}
    report = check(compiled_only(compiled), fn, _cuda(tuple(inputs)), expect=expect)
    assert report.passed, f"{name}:\n{report}"
    if name != "greedy":
        return
    x, norm, wh = _cuda(tuple(inputs))
    for value, token in ((float("inf"), 250), (float("-inf"), 411), (float("nan"), 250)):
        bad = wh.clone()
        bad[250] = 0
        bad[250, 3] = value * torch.sign(x[0, 3].float()).item() if value == value else value
        logits = torch.empty(1, bad.shape[0], dtype=torch.bfloat16, device="cuda")
        chosen = torch.empty(1, dtype=torch.int64, device="cuda")
        finite = torch.full((1,), 7, dtype=torch.int64, device="cuda")
        compiled(x, norm, bad, logits, chosen, finite)
        assert (int(chosen), int(finite)) == (token, 0), value


@pytest.mark.parametrize("name", sorted(RopeCache.functions))
def test_a_normed_rope_writing_its_cache_matches_the_evaluator_on_cuda(name: str) -> None:
    """q/k norms read inside the rope (8 threads a row meeting by shuffles, 6 each summing the row, 1), the rotated
    keys written into the cache by the rope: into a new cache, and into the cache passed as its own output."""
    compiled = jit(RopeCache).functions[name]
    fn = RopeCache.functions[name]
    paths = [f"output[{i}]" for i in range(len(fn.output_types))]
    for seq, step, capacity, written in ROPE_CASES:
        args = _cuda(rope_inputs(name, seq, step, capacity, written))
        report = check(compiled_only(compiled), fn, args, expect={p: [ROPE_BF16] for p in paths})
        assert report.passed, f"{name} at seq {seq} from {step} in {capacity}:\n{report}"
        if name == "keys_returned":
            continue
        got, want, caches = caches_in_place(compiled, fn, args)
        assert got[1] is caches[0] and got[2] is caches[1]
        for g, w in zip(got, want):
            torch.testing.assert_close(g.float(), w.float(), rtol=2**-7, atol=2**-7)


@pytest.mark.parametrize("name", sorted(Matmuls.functions))
def test_a_matmul_matches_the_evaluator_on_cuda(name: str) -> None:
    compiled = jit(Matmuls).functions[name]
    fn = Matmuls.functions[name]
    dtype = fn.output_types.dtype
    expect = BF16 if dtype.name == "bf16" else F32 if dtype.is_float else equal()
    for m in (1, 3, 16, 17, 63, 64, 200, 1000):
        report = check(compiled_only(compiled), fn, _cuda(matmul_inputs(name, m)), expect={"output": [expect]})
        assert report.passed, f"{name} at M = {m}:\n{report}"


@pytest.mark.parametrize("name", sorted(Streamed.functions))
def test_a_streamed_matmul_matches_the_evaluator_on_cuda(name: str) -> None:
    """The streamed tier (one and two tokens: bulk copies through a ring of shared memory) and the dot-product tier
    in the same 256-thread CTAs (3 and 17 tokens), against the evaluator on the GPU, outputs poisoned."""
    compiled = jit(Streamed).functions[name]
    fn = Streamed.functions[name]
    expect = BF16 if fn.output_types.dtype.name == "bf16" else F32
    for m in (1, 2, 3, 17):
        report = check(compiled_only(compiled), fn, streamed_inputs(name, m, "cuda"), expect={"output": [expect]})
        assert report.passed, f"{name} at M = {m}:\n{report}"


@pytest.mark.parametrize("name", sorted(Gemms.functions))
def test_many_rows_through_the_tensor_cores_match_the_evaluator_on_cuda(name: str) -> None:
    """The GEMM schedule (wgmma, its stages filled through tensor maps; a batch through cp.async; K = 100 through the
    entry's fallback to the other tiers) at row counts around its row tiles of 256: one tile partly full, one whole,
    one and a row, several; ``any_rows`` also at 1 and 16 rows (its entry's decode-step variant); outputs
    poisoned. Up to 700 rows a mapped product's tiles leave at least half its CTAs idle, so each tile's K is split
    over the two CTAs of a cluster (matmul_gmma.cuh, Tiles::split: ``residual``'s two steps one each, the second a
    partial one); at 4096 rows every CTA has a tile of its own and takes all of K. ``wide``'s tiles keep every pair
    busy (no K split), at 4096 rows some CTAs taking two tiles. ``shifted_residuals`` reads its two residuals
    through views whose words start off and on 16-byte boundaries (ops::reads_at's element and word reads)."""
    compiled = jit(Gemms).functions[name]
    fn = Gemms.functions[name]
    rows = {"half_to_f32": (200,), "any_rows": (1, 16, 17, 100, 700),
            "wide": (1000, 2100, 4096)}.get(name, (17, 129, 256, 257, 700, 4096))
    for m in rows:  # 16-bit sums: BF16 (f16's rounding too)
        report = check(compiled_only(compiled), fn, gemm_inputs(name, m, "cuda"), expect={"output": [BF16]})
        assert report.passed, f"{name} at M = {m}:\n{report}"


def test_a_pair_sharing_its_weight_tiles_matches_the_evaluator_on_cuda() -> None:
    """matmul_gmma.cuh's TILEFOUNDRY_MATMUL_GMMA_SHARE_B=1 (off by default: measured slower on an H100): at 1000 and
    4096 rows each pair of ``wide``'s CTAs copies half of their weight tile into both (TMA multicast), its stages
    released by the math warps of both, some CTAs at 4096 taking two tiles; at 2100 rows (nine row tiles) they do
    not. Outputs poisoned."""
    options = CompilerOptions(extra_flags=("-DTILEFOUNDRY_MATMUL_GMMA_SHARE_B=1",))
    compiled = jit(Gemms, options=options).functions["wide"]
    fn = Gemms.functions["wide"]
    for m in (1000, 2100, 4096):
        report = check(compiled_only(compiled), fn, gemm_inputs("wide", m, "cuda"), expect={"output": [BF16]})
        assert report.passed, f"wide at M = {m}, weight tiles shared:\n{report}"


@pytest.mark.parametrize("name, dtype, fp8", EIGHT_BIT_CASTS)
def test_a_cast_to_an_8_bit_float_rounds_every_bit_as_torch_on_cuda(name: str, dtype: torch.dtype,
                                                                    fp8: torch.dtype) -> None:
    """tests/test_compile_fp8.py's casts on the GPU: every bit as torch's `to` (ties, the largest finite values and
    past them, infinities, NaN, tiny values, -0), CUTLASS's saturating conversion not taken."""
    check_8_bit_cast(name, dtype, fp8, "cuda")


def test_an_8_bit_weight_reads_back_exactly_and_scales_in_float_on_cuda() -> None:
    check_8_bit_reads("cuda")


@pytest.mark.parametrize("group, name", [*(("split", n) for n in sorted(Splits.functions)),
                                          *(("join", n) for n in sorted(Joins.functions)),
                                          *(("zeros", n) for n in sorted(Zeros.functions)),
                                          *(("index_copy", n) for n in sorted(IndexCopies.functions)),
                                          *(("arange", n) for n in sorted(Aranges.functions))])
def test_split_parts_joins_zeros_aranges_and_index_copies_match_the_evaluator_on_cuda(group: str, name: str) -> None:
    """split's parts read as offsets, concat's and stack's operands copied into place, zeros filled, aranges'
    positions from each thread's place in the row, index_copy's rows written at positions read on the device, on
    the GPU."""
    module, cases = {"split": (Splits, SPLIT_CASES), "join": (Joins, None), "zeros": (Zeros, ZERO_CASES),
                     "index_copy": (IndexCopies, INDEX_CASES), "arange": (Aranges, ARANGE_CASES)}[group]
    fn = module.functions[name]
    compiled = jit(module).functions[name]
    outs = fn.output_types
    types = outs if isinstance(outs, tuple) else (outs,)
    paths = [f"output[{i}]" for i in range(len(outs))] if isinstance(outs, tuple) else ["output"]
    expect = {p: [allclose(atol=1e-5, rtol=1e-5) if t.dtype.name == "f32" else equal()]
              for p, t in zip(paths, types)}
    for seed in range(2):
        g = torch.Generator().manual_seed(seed)
        args = (join_inputs(name, g) if cases is None else cases[name]() if group == "index_copy"
                else cases[name](g))
        report = check(compiled_only(compiled), fn, _cuda(args), expect=expect)
        assert report.passed, f"{group} {name}, seed {seed}:\n{report}"


@pytest.mark.parametrize("name", sorted(OtherAxes.functions))
def test_rows_across_a_transpose_and_picks_along_other_axes_match_the_evaluator_on_cuda(name: str) -> None:
    """Rows read across a transpose (one element at a time, a bf16 row of 4096 beside one read in 16-byte vectors),
    softmax across rows, argmax and topk along other axes, on the GPU."""
    fn = OtherAxes.functions[name]
    compiled = jit(OtherAxes).functions[name]
    paths = output_paths(fn)
    for s in OTHER_AXES_ROWS.get(name, (1, 7, 130)):
        report = check(compiled_only(compiled), fn, _cuda(other_axes_inputs(name, s, s)),
                       expect={p: [OTHER_AXES_EXPECT.get(name, equal())] for p in paths})
        assert report.passed, f"{name} at {s}:\n{report}"


@pytest.mark.parametrize("name", sorted(IndexAdds.functions))
def test_index_add_sums_each_result_row_in_order_on_cuda(name: str) -> None:
    """index_add's rows gathered per result row (repeated positions summed in the index's order), on the GPU,
    exactly as the evaluator on the CPU sums them."""
    fn = IndexAdds.functions[name]
    compiled = jit(IndexAdds).functions[name]
    for n in (1, 5, 40):
        args = index_add_inputs(name, n, n)
        want = fn(*args)
        got = compiled(*_cuda(args))
        assert torch.equal(got.cpu(), want), f"{name} at n = {n}"


@pytest.mark.parametrize("name", sorted(CopiedViews.functions))
def test_an_operand_copied_for_its_kernel_matches_the_evaluator_on_cuda(name: str) -> None:
    """Rows picked by positions before a matmul or an attention, copied by a row-wise stage first (as
    tests/test_compile_copied_views.py states), on the GPU."""
    fn = CopiedViews.functions[name]
    compiled = jit(CopiedViews).functions[name]
    for s in (1, 17, 64):
        report = check(compiled_only(compiled), fn, _cuda(copied_inputs(name, s)), expect={"output": [COPIED_F32]})
        assert report.passed, f"{name} at {s}:\n{report}"


@pytest.mark.parametrize("seed", _picking_seeds(3))
def test_random_chains_that_pick_rows_match_the_evaluator_on_cuda(seed: int) -> None:
    """tests/test_compile_fuzz.py's chains that pick rows, on the GPU (to 1e-4, as on the CPU)."""
    fn, kinds = chain(seed)
    compiled = jit(fn)
    for s in (1, 5, 40):
        report = check(compiled_only(compiled), fn, _cuda(chain_inputs(seed, s)),
                       expect={p: [allclose(atol=1e-4, rtol=1e-4)] for p in output_paths(fn)})
        assert report.passed, f"seed {seed} {kinds} at s = {s}:\n{report}"


@pytest.mark.parametrize("name", sorted(FlatCaches.functions))
def test_a_cache_of_rows_of_one_element_matches_the_evaluator_on_cuda(name: str) -> None:
    """Token ids and scores written at a position of a (batch, capacity) cache (tests/test_compile_cache_update.py)."""
    fn = FlatCaches.functions[name]
    compiled = jit(FlatCaches).functions[name]
    for s, at, written in ((1, 0, 1), (7, 5, 7), (40, 20, 33)):
        report = check(compiled_only(compiled), fn, _cuda(flat_cache_inputs(name, s, at, written)),
                       expect={"output": [equal()]})
        assert report.passed, f"{name}: {s} rows at {at}:\n{report}"


@pytest.mark.parametrize("name", sorted(Patterns.functions))
def test_model_patterns_match_the_evaluator_on_cuda(name: str) -> None:
    """Sliding-window and ALiBi masks, soft-capping, rotate-pairs, strided and transposed reads, a MoE gate, on the
    GPU (tanh and exp within 1e-6 of torch's CPU results, as tests/test_compile_model_patterns.py states)."""
    fn = Patterns.functions[name]
    compiled = jit(Patterns).functions[name]
    paths = output_paths(fn)
    for s in (2, 7, 40):
        expect = {p: [equal() if p == "output[1]" else PATTERN_EXPECT.get(name, equal())] for p in paths}
        report = check(compiled_only(compiled), fn, _cuda(pattern_inputs(name, s, s)), expect=expect)
        assert report.passed, f"{name} at {s}:\n{report}"


def test_a_dispatching_function_runs_its_variants_through_one_entry_on_cuda() -> None:
    """The reference-style attend compiled as one entry choosing decode (one token) or prefill from the sequence
    length, on the GPU."""
    attend = reference_attend()
    compiled = jit(attend)
    for sizes in ({"seq": 1, "ctx_len": 5}, {"seq": 6, "ctx_len": 5}):
        variant = attend.variants[0] if sizes["seq"] == 1 else attend.variants[1]
        report = check(compiled_only(compiled), attend, _cuda(reference_inputs(variant, sizes, 0)),
                       expect={f"output[{i}]": [allclose(atol=1e-4, rtol=1e-4)] for i in range(3)})
        assert report.passed, f"{sizes}:\n{report}"


def test_the_reference_style_qwen3_functions_match_the_evaluator_on_cuda() -> None:
    """tests/reference_qwen3.py's functions (its cache grown by concat, its embedding through a reshape of the picked
    rows, its prompt's causal mask from two aranges), at a decode step and a prompt of 6 over an empty and a 5-entry
    cache, against the evaluator."""
    for name, fn in reference_functions().items():
        compiled = jit(fn)
        paths = output_paths(fn)
        for sizes in ({"seq": 1, "ctx_len": 0}, {"seq": 1, "ctx_len": 5}, {"seq": 6, "ctx_len": 0},
                      {"seq": 6, "ctx_len": 5}):
            if (name == "decode") != (sizes["seq"] == 1) and name in ("decode", "prefill"):
                continue  # the variants' own sequence lengths: decode one token, prefill several
            report = check(compiled_only(compiled), fn, _cuda(reference_inputs(fn, sizes, 0)),
                           expect={p: [allclose(atol=1e-4, rtol=1e-4)] for p in paths})
            assert report.passed, f"{name} at {sizes}:\n{report}"


@pytest.mark.parametrize("name", sorted(AXIS_CASES))
def test_a_reduction_over_several_axes_matches_the_evaluator_on_cuda(name: str) -> None:
    shape, dtype, predicate = AXIS_CASES[name]
    compiled = jit(AxisReductions).functions[name]
    x = torch.randn(shape, generator=torch.Generator().manual_seed(1)).to(dtype)
    report = check(compiled_only(compiled), AxisReductions.functions[name], _cuda((x,)), expect={"output": [predicate]})
    assert report.passed, f"{name}:\n{report}"


@pytest.mark.parametrize("fam, dtype", FAMILIES, ids=lambda v: str(v))
def test_the_decoder_functions_match_the_evaluator_on_cuda(fam: str, dtype: str) -> None:
    expect = F32 if dtype == "float32" else BF16
    for name, fn in _functions(_family(fam, dtype)).items():
        compiled = jit(fn)
        for seq, step, cap in ((1, 0, 4), (1, 9, 32), (7, 3, 16), (17, 0, 17), (128, 0, 128)):
            predicate = equal() if name == "embed" else expect
            args = _cuda(_inputs(fn, seq, step, cap if name == "attend" else None))
            report = check(compiled_only(compiled), fn, args, expect=_expect(fn, predicate))
            assert report.passed, f"{fam} {dtype} {name} at seq {seq} from {step}:\n{report}"


def test_an_attention_step_captured_once_replays_at_every_position() -> None:
    fn = _family("qwen3", "bfloat16").layer0.functions["attend"]
    compiled = jit(fn)
    names = [p.name for p in fn.params]
    args = list(_cuda(_inputs(fn, 1, 0, 64)))
    outs = [torch.empty_like(t) for t in (args[0], args[names.index("cache_k")], args[names.index("cache_v")])]
    ctx = 24  # the graph is captured for a context of 24 positions (kv_pos's extent): steps 0..23 replay it
    args[names.index("kv_pos")] = torch.arange(ctx, device="cuda")
    compiled(*args, *outs)  # warm up outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with evaluator_refuses(), torch.cuda.graph(graph):
        compiled(*args, *outs)
    for step in (0, 5, 23):
        args[names.index("cur_pos")].fill_(step)
        args[names.index("pos_ids")].fill_(step)
        graph.replay()
        torch.cuda.synchronize()
        want = fn(*args)
        for got, ref in zip(outs, want):
            assert torch.allclose(got.float(), ref.float(), atol=2**-5, rtol=2**-5), step


def test_a_cache_passed_as_its_own_output_is_updated_in_place_on_cuda() -> None:
    fn = _family("qwen3", "bfloat16").layer0.functions["attend"]
    compiled = jit(fn)
    got, want, caches = caches_in_place(compiled, fn, _cuda(_inputs(fn, 7, 3, 16)))
    assert got[1] is caches[0] and got[2] is caches[1]
    for g, w in zip(got, want):
        torch.testing.assert_close(g.float(), w.float(), rtol=2**-5, atol=2**-5)


_OUT_OF_RANGE = """
import torch
from tilefoundry import jit
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, func, tf

seq = DimVar("seq", 1, 64)


@func
def embed(ids: Tensor[(seq,), "i64"], table: ConstTensor[(1000, 64), "bf16"]):
    return tf.index_select(table, ids, 0)


compiled = jit(embed, target="cuda")
table = torch.randn(1000, 64, device="cuda").bfloat16()
good = torch.tensor([0, 999, 5], device="cuda")
assert torch.equal(compiled(good, table), table[good])
compiled(torch.tensor([3, 1000, 5], device="cuda"), table)
torch.cuda.synchronize()
print("NOT STOPPED")
"""


def _stopped(script: str) -> str:
    """What ``script`` printed, run in a process of its own (a kernel that stops loses the CUDA context, as a
    device-side assert in torch does), after checking that it failed before its last line ("NOT STOPPED")."""
    import subprocess

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    said = run.stdout + run.stderr
    assert run.returncode != 0, said
    assert "NOT STOPPED" not in said
    return said


def test_a_position_outside_its_table_stops_the_kernel_saying_which() -> None:
    """A CUDA kernel cannot raise: a position outside the table it indexes (here the embedding's rows) stops it,
    printing the argument, the position and the table, where a clamp would read another row in silence."""
    said = _stopped(_OUT_OF_RANGE)
    assert "argument ids holds the position 1000, outside the 1000 rows of table it indexes" in said, said


_PAST_THE_END = """
import torch
from tilefoundry import jit
from tilefoundry.dsl import DimVar, Tensor, func, tf

seq = DimVar("seq", 1, 8)
capacity = DimVar("capacity", 1, 64)


@func
def write(cache: Tensor[(1, capacity, 2, 16), "bf16"], cur_pos: Tensor[(), "i32"], n_new: Tensor[(), "i64"],
          new: Tensor[(1, seq, 2, 16), "bf16"]):
    return tf.cache_update(cache, cur_pos, n_new, new)


compiled = jit(write, target="cuda")
cache = torch.zeros(1, 8, 2, 16, device="cuda").bfloat16()
new = torch.randn(1, 3, 2, 16, device="cuda").bfloat16()
at = lambda p, n: (torch.tensor(p, dtype=torch.int32, device="cuda"), torch.tensor(n, device="cuda"))
assert torch.equal(compiled(cache, *at(5, 3), new)[0, 5:], new[0])  # the last three rows: fits
assert torch.equal(compiled(cache, *at(6, 2), new)[0, 6:], new[0, :2])  # two of three rows: fits
compiled(cache, *at(6, 3), new)  # row 8 of a cache of 8
torch.cuda.synchronize()
print("NOT STOPPED")
"""


def test_a_cache_write_past_the_caches_end_stops_the_kernel_saying_so() -> None:
    """The entry cannot read cur_pos on the device; a row the update would write past the cache's end stops the
    kernel (detail::row_within) instead of being skipped, naming the update and the row. Rows that fit, and rows
    past n_new (none of the update's), are no stop."""
    said = _stopped(_PAST_THE_END)
    assert "writing n_new rows at cur_pos passes the end of cache (a row at 8; its last row is 7)" in said, said

"""Many rows of a matmul on Hopper: the GEMM schedule (lower/matmul.py ``_cuda_gemm``, cuda/ops/matmul_gmma.cuh).

A matmul whose row count is at least CUDA_GEMM_MIN_ROWS whatever its DimVars are at launch (a prefill's projections),
of 16-bit operands contiguous along K, lowered for sm_90a, runs as CTAs of one warpgroup that each take a column tile
and every ``ranks``-th row tile, through wgmma. Here: which matmuls take it (and which keep the other schedules), what
the call passes, and that the source builds (tests/test_compile_cuda_build.py builds ``Gemms`` with nvcc). Their
values run on the H200 (tests/gpu/test_compile_stages.py), including the entry's fallback where K allows no 16-byte
words.
"""

from __future__ import annotations

from typing import Any

import torch

from tests.compile_kernels import BF16, compiled_only
from tests.test_compile_matmul import op_calls, projection_inputs
from tilefoundry import func, jit, lower, module
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, tf
from tilefoundry.lower.matmul import (
    CUDA_GEMM_BOX_ROWS,
    CUDA_GEMM_CTAS,
    CUDA_GEMM_RING_BYTES,
    CUDA_GEMM_THREADS,
    CUDA_GEMM_TILE_M,
    CUDA_GEMM_TILE_N,
)
from tilefoundry.runtime.check import check
from tilefoundry.target import CudaTarget
from tilefoundry.tir.stmt import OpCall

ROWS = DimVar("rows", 17, 4097)
ANY = DimVar("any", 1, 4097)


@module(entry="projection")
class Gemms:
    @func
    def projection(x: Tensor[(ROWS, 256), "bf16"], w: ConstTensor[(384, 256), "bf16"]):
        """Three column tiles of 128, K four steps of 64."""
        return tf.matmul(x, tf.transpose(w, (1, 0)))

    @func
    def residual(x: Tensor[(ROWS, 72), "bf16"], wr: ConstTensor[(96, 72), "bf16"], r: Tensor[(ROWS, 96), "bf16"]):
        """K = 72 (a step and 8), one tile of 96 columns, the residual added in the epilogue."""
        return tf.matmul(x, tf.transpose(wr, (1, 0))) + r

    @func
    def shifted_residuals(xr: Tensor[(ROWS, 128), "bf16"], wv: ConstTensor[(136, 128), "bf16"],
                          rs: Tensor[(ROWS, 144), "bf16"]):
        """Two residuals, views of one tensor's rows of 144: one starting one element in (its words start off a
        16-byte boundary: read element by element), one eight in (whole 16-byte words); 136 columns (a tile of 128
        and one of 8)."""
        out = tf.matmul(xr, tf.transpose(wv, (1, 0)))
        return out + tf.slice(rs, (0, 1), (ROWS, 136)) + tf.slice(rs, (0, 8), (ROWS, 136))

    @func
    def half_to_f32(xh: Tensor[(200, 128), "f16"], wh: ConstTensor[(192, 128), "f16"]):
        """f16, a static 200 rows (a whole row tile and 72), two tiles of 96 columns, the sums cast to f32."""
        return tf.cast(tf.matmul(xh, tf.transpose(wh, (1, 0))), "f32")

    @func
    def batched_heads(q: Tensor[(2, ROWS, 64), "bf16"], k: Tensor[(2, 128, 64), "bf16"]):
        """A batch axis (two heads), the second operand a transposed view of keys."""
        return tf.matmul(q, tf.transpose(k, (0, 2, 1)))

    @func
    def sliced(xs: Tensor[(ROWS, 320), "bf16"], ws: ConstTensor[(256, 192), "bf16"]):
        """A slice of the activation's columns (q of a packed q/k/v): its map starts 64 values into each row, rows
        320 apart and 192 long; two output tiles of 128 columns."""
        return tf.matmul(tf.slice(xs, (0, 64), (ROWS, 192)), tf.transpose(ws, (1, 0)))

    @func
    def wide(x: Tensor[(ROWS, 448), "bf16"], ww: ConstTensor[(1152, 448), "bf16"]):
        """Nine column tiles, K seven steps: tiles enough that no pair of CTAs splits K. Built with
        TILEFOUNDRY_MATMUL_GMMA_SHARE_B=1, where the row tiles come in pairs (1000 rows, 4096) a cluster's two CTAs
        take a column's two row tiles at each turn and each copies half of their weight tile into both (multicast);
        at 2100 rows (nine row tiles of 256) they do not."""
        return tf.matmul(x, tf.transpose(ww, (1, 0)))

    @func
    def odd_depth(x: Tensor[(ROWS, 100), "bf16"], wo: ConstTensor[(128, 100), "bf16"]):
        """K = 100: no 16-byte words along K, so the entry sends its row tiles to the other tiers."""
        return tf.matmul(x, tf.transpose(wo, (1, 0)))

    @func
    def swiglu(xg: Tensor[(ROWS, 128), "bf16"], wg: ConstTensor[(200, 128), "bf16"],
               wu: ConstTensor[(200, 128), "bf16"]):
        """A pair (gate and up of one input): one GEMM making both products of each output tile of 64 columns,
        silu(gate) * up its epilogue; 200 columns (three tiles and 8: the last one element by element)."""
        return tf.silu(tf.matmul(xg, tf.transpose(wg, (1, 0)))) * tf.matmul(xg, tf.transpose(wu, (1, 0)))

    @func
    def interleaved_swiglu(xi: Tensor[(ROWS, 128), "bf16"], wgu: ConstTensor[(384, 128), "bf16"],
                           ri: Tensor[(ROWS, 192), "bf16"]):
        """The engine's gate and up weights, interleaved row by row (gate's rows 2j, up's 2j + 1: maps of one
        parameter, rows 256 apart, up's a row in), and a residual read in the epilogue (a word of it with each
        word of the pair's sums)."""
        gate = tf.slice(wgu, (0, 0), (192, 128), (2, 1))
        up = tf.slice(wgu, (1, 0), (192, 128), (2, 1))
        return tf.silu(tf.matmul(xi, tf.transpose(gate, (1, 0)))) * tf.matmul(xi, tf.transpose(up, (1, 0))) + ri

    @func
    def biased_pair(xb: Tensor[(ROWS, 64), "bf16"], wb: ConstTensor[(72, 64), "bf16"], bb: ConstTensor[(72,), "bf16"],
                    wc: ConstTensor[(72, 64), "bf16"]):
        """A pair whose first product has an epilogue of its own before they meet (a bias, read at every row: a
        broadcast word), K one step (no pair of CTAs splits it), 72 columns (a tile of 64 and one of 8)."""
        return (tf.matmul(xb, tf.transpose(wb, (1, 0))) + bb) * tf.sigmoid(tf.matmul(xb, tf.transpose(wc, (1, 0))))

    @func
    def any_rows(xa: Tensor[(ANY, 128), "bf16"], norm: ConstTensor[(128,), "bf16"],
                 wa: ConstTensor[(192, 128), "bf16"]):
        """Rows 1 to 4096 and a norm before the projection: an entry choosing a decode step's variant (the norm a
        prologue of the GEMV) or a prompt's (the norm a stage, then the GEMM) by the row count; the body names its
        DimVar (the reshape), as the families' bodies do."""
        y = tf.matmul(tf.rms_norm(xa, norm, 1e-6), tf.transpose(wa, (1, 0)))
        return tf.reshape(y, (ANY, 2, 96))


def gemm_inputs(name: str, m: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    """Random inputs of ``Gemms``'s function ``name`` at ``m`` rows, weights and keys scaled by 1 / sqrt(K)."""
    return projection_inputs(Gemms.functions[name], m, device, also_scaled=("k",))


def _matmul(fn: Any, target: Any) -> tuple[Any, OpCall]:
    """The schedule and the call of ``fn``'s one matmul stage lowered for ``target`` as one body."""
    lowered = lower(fn, target, split_rows=False).functions[fn.name]
    found = [(st.fn.schedule, c) for st in lowered.stages for c in op_calls(st.fn.body) if c.family == "matmul"]
    assert len(found) == 1, fn.name
    return found[0]


def test_many_rows_of_16_bit_operands_take_the_gemm_schedule_on_sm90a() -> None:
    """Two warpgroups and the copy warpgroup a CTA, built for one CTA an SM (the register cap setmaxnreg needs), the
    ring of CUDA_GEMM_RING_BYTES its first argument, the CTA's rank
    and the ranks after the epilogue. A product of two matrices read through tensor maps: one wave of CTAs taking
    the output tiles of all N in turn. A batch of products, or rows that no 16-byte word starts (K = 100): a column
    tile a CTA group, the grid every column tile and batch element times the ranks, no maps."""
    mapped = {"projection": (384, 256), "residual": (96, 72), "half_to_f32": (192, 128), "sliced": (256, 192),
              "wide": (1152, 448), "shifted_residuals": (136, 128)}
    tiles = {"batched_heads": 2, "odd_depth": 1}
    for name, fn in Gemms.functions.items():
        if name in ("any_rows", "swiglu", "interleaved_swiglu", "biased_pair"):  # (the pairs: the next test)
            continue
        schedule, call = _matmul(fn, CudaTarget())
        assert schedule.threads_per_cta == CUDA_GEMM_THREADS and schedule.ctas_per_sm == 1, name
        assert call.workspace is not None and call.workspace.shape[0] * 2 == CUDA_GEMM_RING_BYTES, name
        assert len(call.indices) == 2, name
        ranks = call.indices[1].base
        rows = 200 if name == "half_to_f32" else 4096
        if name in mapped:
            n, k = mapped[name]
            row_tiles, col_tiles = -(-rows // CUDA_GEMM_TILE_M), -(-n // CUDA_GEMM_TILE_N)
            assert ranks == min(CUDA_GEMM_CTAS, row_tiles * col_tiles) and schedule.grid == ranks, name
            a_map, b_map = call.maps
            row_dim = 200 if name == "half_to_f32" else ROWS
            a_stride, a_offset = (320, 64) if name == "sliced" else (k, 0)
            expected = (row_dim, k, a_stride, CUDA_GEMM_BOX_ROWS)
            assert (a_map.rows, a_map.depth, a_map.stride, a_map.box_rows) == expected, name
            assert a_map.offset == a_offset and b_map.offset == 0, name
            assert (b_map.rows, b_map.depth, b_map.stride, b_map.box_rows) == (n, k, k, CUDA_GEMM_BOX_ROWS), name
            assert a_map.box_depth == b_map.box_depth == 64, name
            assert schedule.cluster == (2 if ranks % 2 == 0 else 1), name  # pairs that may split K
        else:
            assert call.maps == () and schedule.grid == tiles[name] * ranks, name
            assert schedule.cluster == 1, name
            assert 1 <= ranks <= -(-rows // CUDA_GEMM_TILE_M), name


def test_a_pair_of_gemms_sharing_their_input_is_one_call_through_three_tensor_maps() -> None:
    """gate and up of one input (``swiglu``, and the engine's interleaved weight): one matmul call of both weights on
    sm_90a, through maps of the input and of each weight (the interleaved one's rows twice its depth apart, up's a
    row in), output tiles of CUDA_GEMM_TILE_N / 2 columns of both products (the ranks), silu(gate) * up its epilogue
    of the two sums; a batch of pairs (a mixture's experts) stays two GEMMs."""
    from tilefoundry.codegen import generate

    cases = (("swiglu", 200, 128, (128, 0)), ("interleaved_swiglu", 192, 128, (256, 128)),
             ("biased_pair", 72, 64, (64, 0)))
    for name, n, k, (stride, offset) in cases:
        fn = Gemms.functions[name]
        schedule, call = _matmul(fn, CudaTarget())
        assert schedule.threads_per_cta == CUDA_GEMM_THREADS and len(call.operands) == 3, name
        ranks = call.indices[1].base
        assert ranks == min(CUDA_GEMM_CTAS, -(-4096 // CUDA_GEMM_TILE_M) * -(-n // (CUDA_GEMM_TILE_N // 2))), name
        a_map, gate_map, up_map = call.maps
        assert (a_map.rows, a_map.depth, a_map.stride) == (ROWS, k, k), name
        assert (gate_map.rows, gate_map.stride, gate_map.offset) == (n, stride, 0), name
        assert (up_map.rows, up_map.stride, up_map.offset) == (n, stride, offset), name
        assert len({m.name for m in call.maps}) == 3, name
        source = generate(lower(fn, CudaTarget(), split_rows=False)).source
        (line,) = [s for s in source.splitlines() if "ops::matmul<float>(" in s]
        assert line.rstrip().endswith(", ".join(m.name for m in call.maps) + ");"), line
        assert "float acc, float acc_second" in source, name

    @func
    def experts(xe: Tensor[(2, ROWS, 128), "bf16"], eg: ConstTensor[(2, 128, 128), "bf16"],
                eu: ConstTensor[(2, 128, 128), "bf16"]):
        return tf.silu(tf.matmul(xe, tf.transpose(eg, (0, 2, 1)))) * tf.matmul(xe, tf.transpose(eu, (0, 2, 1)))

    lowered = lower(experts, CudaTarget(), split_rows=False).functions["experts"]
    calls = [c for st in lowered.stages for c in op_calls(st.fn.body) if c.family == "matmul"]
    assert [len(c.operands) for c in calls] == [2, 2] and all(c.maps == () for c in calls)


def test_the_host_entry_makes_the_tensor_maps_the_kernel_takes_last() -> None:
    """The kernel declares each map a ``__grid_constant__`` parameter and passes them to ops::matmul after the
    ranks; the entry makes them over the arguments' pointers (the row count from the bound DimVar) and passes them
    last, launching the kernel in clusters of two CTAs (a pair may split a tile's K); the printed TIR shows them."""
    from tilefoundry.codegen import generate

    tir = lower(Gemms.functions["residual"], CudaTarget())
    source = generate(tir).source
    assert "__grid_constant__ ops::tensor_map const x_map, __grid_constant__ ops::tensor_map const wr_map)" in source
    assert f"__global__ void __launch_bounds__({CUDA_GEMM_THREADS}, 1) residual_stage0_kernel(" in source
    (call,) = [s for s in source.splitlines() if "ops::matmul<float>(" in s]
    assert call.rstrip().endswith("), x_map, wr_map);") and "ops::plain_rows{}, int64_t(" in call, call
    assert "auto const x_map = ops::make_tensor_map(x_ptr, rows, 72, 72, 64, 64);" in source
    assert "auto const wr_map = ops::make_tensor_map(wr_ptr, 96, 72, 72, 64, 64);" in source
    (launch,) = [s for s in source.splitlines() if "launch.start_in_clusters(" in s]  # pairs of CTAs (16 ranks)
    assert "residual_stage0_kernel, ctas, 2, 384, shared_bytes, " in launch, launch
    assert launch.rstrip().endswith("x_ptr, wr_ptr, r_ptr, out_ptr, rows, x_map, wr_map);"), launch
    assert "x_map = map %x[rows, 72]:(72, 1) box 64x64" in str(tir)


def test_few_rows_f32_an_older_gpu_and_the_cpu_keep_their_schedules() -> None:
    """A row count that may be 16 or fewer at launch (the decode step's GEMV, in one body), f32 operands, sm_86 and
    the CPU: no ring, no ranks."""
    few = DimVar("few", 1, 4097)

    @func
    def decode(x: Tensor[(few, 256), "bf16"], w: ConstTensor[(384, 256), "bf16"]):
        return tf.matmul(x, tf.transpose(w, (1, 0)))

    @func
    def wide_f32(x: Tensor[(ROWS, 256), "f32"], w: ConstTensor[(384, 256), "f32"]):
        return tf.matmul(x, tf.transpose(w, (1, 0)))

    for fn, target in ((decode, CudaTarget()), (wide_f32, CudaTarget()),
                       (Gemms.functions["projection"], CudaTarget("sm_86")), (Gemms.functions["projection"], "cpu")):
        _, call = _matmul(fn, target)
        assert call.indices == () and call.workspace is None, (fn.name, target)


def test_the_gemm_call_passes_its_ring_rank_and_ranks_in_the_cuda_source() -> None:
    from tilefoundry.codegen import generate

    source = generate(lower(Gemms.functions["residual"], CudaTarget())).source
    (line,) = [s for s in source.splitlines() if "ops::matmul<float>(" in s]
    assert line.strip().startswith("ops::matmul<float>(ring, ") and "ops::plain_rows{}, int64_t(" in line, line


def _kernels(source: str, name: str) -> list[str]:
    """The ``__global__`` kernels of ``source`` that belong to function ``name`` (up to the first closing brace at
    the start of a line), each with the function's name written as ``FN``."""
    import re

    found = re.findall(r"^__global__ .*?^}", source, flags=re.M | re.S)
    return [k.replace(name, "FN") for k in found if f" {name}_stage" in k or f" {name}_kernel" in k]


def test_a_function_of_any_row_count_dispatches_to_a_decode_and_a_prompt_variant_on_sm90a() -> None:
    """Rows 1 to 4096: the entry takes [1, 17) to ``any_rows_few_rows`` (the GEMV with the norm fused, its kernels
    exactly those of the function lowered as one body) and [17, 4097) to ``any_rows_many_rows`` (the norm a row-wise
    stage, then the GEMM's ring and ranks)."""
    from tilefoundry.codegen import generate

    fn = Gemms.functions["any_rows"]
    split = lower(fn, CudaTarget())
    (dispatch,) = split.dispatches.values()
    assert [(c.lo, c.hi, c.function) for c in dispatch.cases] == [(1, 17, "any_rows_few_rows"),
                                                                   (17, 4097, "any_rows_many_rows")]
    few, many = split.functions["any_rows_few_rows"], split.functions["any_rows_many_rows"]
    assert [s.fn.schedule.placement for s in many.stages] == ["rows", "matmul"]
    (call,) = [c for s in many.stages for c in op_calls(s.fn.body) if c.family == "matmul"]
    assert call.prologue is None and len(call.indices) == 2 and call.workspace is not None
    (call,) = [c for k in few.kernels for c in op_calls(k.body) if c.family == "matmul"]
    assert call.prologue is not None and call.indices == ()
    one = generate(lower(fn, CudaTarget(), split_rows=False)).source
    assert _kernels(generate(split).source, "any_rows_few_rows") == _kernels(one, "any_rows")
    assert _kernels(one, "any_rows")


def test_the_cpu_an_older_gpu_and_split_rows_false_keep_one_body() -> None:
    import pytest

    from tilefoundry.codegen.options import CompilerOptions

    fn = Gemms.functions["any_rows"]
    for target in ("cpu", CudaTarget("sm_86")):
        assert not lower(fn, target).dispatches
    one = lower(fn, CudaTarget(), split_rows=False)
    assert not one.dispatches and list(one.functions) == ["any_rows"]
    with pytest.raises(TypeError, match="split_rows"):
        CompilerOptions(split_rows="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="split_rows must be True or False"):
        lower(fn, CudaTarget(), split_rows="no")  # type: ignore[arg-type]


def test_the_families_decoder_functions_dispatch_by_their_token_count_on_sm90a() -> None:
    """A model's functions name their seq DimVar in their bodies (reshapes into heads): each variant is the body
    traced once and lowered with seq narrowed. Qwen3 in bf16: q/k/v and the MLP get a prompt's variant."""
    from tests.test_compile_families import _family, _functions

    lowered = {name: lower(fn, CudaTarget()) for name, fn in _functions(_family("qwen3", "bfloat16")).items()}
    split = sorted(name for name, tm in lowered.items() if tm.dispatches)
    assert split and all(f"{name}_many_rows" in lowered[name].functions for name in split), split


def test_a_placed_function_of_any_row_count_keeps_one_body_and_its_refusal_names_it() -> None:
    """A function inside ``with Mesh(...)`` places its values itself: no variants, and a matmul there is refused
    naming the function as written."""
    import pytest

    from tilefoundry.dsl import Mesh
    from tilefoundry.lower import LoweringError

    @func
    def placed(xp: Tensor[(ANY, 128), "bf16"], wp: ConstTensor[(192, 128), "bf16"]):
        with Mesh(("cta",), layout=(4,), names=("cta",)):
            return tf.matmul(xp, tf.transpose(wp, (1, 0)))

    with pytest.raises(LoweringError, match=r"placed.*with Mesh|with Mesh.*placed") as e:
        lower(placed, CudaTarget())
    assert "placed_few_rows" not in str(e.value)


def test_the_row_variants_lowered_for_the_cpu_compute_what_the_function_does_at_every_row_count() -> None:
    """The split's machinery end to end where it can run here: ``any_rows``'s two variants (the body traced once,
    each lowered with its DimVar narrowed, program.narrow) and their entry, lowered and built for the CPU instead
    of sm_90a, against the evaluator at 1, 16, 17 and 100 rows (each side of the split); outputs poisoned."""
    from tests.compile_kernels import compiled_only
    from tests.test_compile_families import BF16
    from tilefoundry.ir.core.module import Module
    from tilefoundry.lower import lower_function
    from tilefoundry.lower.dispatch import lower_dispatch, row_variants
    from tilefoundry.lower.topology import declared_topologies
    from tilefoundry.runtime.check import check
    from tilefoundry.runtime.pipeline import build
    from tilefoundry.target import resolve_target
    from tilefoundry.tir.function import TirModule

    fn = Gemms.functions["any_rows"]
    split = row_variants(fn, CudaTarget())
    assert split is not None and [v.name for v in split.variants] == ["few_rows", "many_rows"]
    cpu = resolve_target("cpu")
    declared = declared_topologies(Module("any_rows", {"any_rows": fn}, entry="any_rows"))
    dispatch, variants = lower_dispatch(split, lambda v: lower_function(v, cpu, declared), set())
    compiled = build(TirModule("any_rows", cpu, variants, "any_rows", {"any_rows": dispatch}))
    for m in (1, 16, 17, 100):
        report = check(compiled_only(compiled), fn, gemm_inputs("any_rows", m), expect={"output": [BF16]})
        assert report.passed, f"any_rows at {m} rows:\n{report}"


def test_a_prompts_argmax_after_its_gemm_is_a_row_wise_stage_of_its_own() -> None:
    """Greedy choices over many rows: the prompt's variant runs the GEMM (ring and ranks) and the argmax as a
    row-wise stage after it; the decode step's keeps the argmax fused after its matmul (reduce_epilogue.py)."""

    @func
    def greedy(xg: Tensor[(ANY, 128), "bf16"], wg: ConstTensor[(256, 128), "bf16"]):
        return tf.argmax(tf.matmul(xg, tf.transpose(wg, (1, 0))), -1)

    tm = lower(greedy, CudaTarget())
    many = [c for s in tm.functions["greedy_many_rows"].stages for c in op_calls(s.fn.body)]
    few = [c for s in tm.functions["greedy_few_rows"].stages for c in op_calls(s.fn.body)]
    (gemm,) = [c for c in many if c.family == "matmul"]
    assert len(gemm.indices) == 2 and any(c.family == "arg_reduce" for c in many)
    (gemv,) = [c for c in few if c.family == "matmul"]
    assert gemv.indices == ()


def test_residuals_read_through_views_off_and_on_16_byte_words_match_the_evaluator_on_the_cpu() -> None:
    """``shifted_residuals`` jitted for the CPU (the blocked GEMM tier calling the epilogue element by element
    through ops::reads_at): both views of the residual read where they start, at row counts around the tiers'."""
    fn = Gemms.functions["shifted_residuals"]
    compiled = jit(fn, target="cpu")
    for m in (17, 129):
        report = check(compiled_only(compiled), fn, gemm_inputs("shifted_residuals", m), expect={"output": [BF16]})
        assert report.passed, f"shifted_residuals at M = {m}:\n{report}"

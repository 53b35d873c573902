"""Qwen3's q/k norm, rope and cache write as one stage: jitted for the CPU against the evaluator, lowered for CUDA
into one launch (run on the H200 in tests/gpu/test_compile_stages.py).

``rope(rms_norm(q, gq), rms_norm(k, gk), cos, sin, pos)`` reads q and k through their norms (``lower/prologue.py``:
each rotated row normed as it is read, the row's scale from its squares summed by the CTA's threads), and the
rotated keys a ``cache_update`` takes and nothing else reads go straight into the cache at ``cur_pos`` (only the
first ``n_new`` rows, only inside the cache). Head sizes 64 (8 threads a row on CUDA: their partial sums met by
shuffles), 48 (6 threads: each thread sums the row itself) and 8 (one thread). Where the rotated keys are also
returned, they go to memory and the cache update writes them as before; the function is as correct.

Tolerances: each element rounds where the unfused ops round; only the order of the row's sum of squares differs
from the evaluator's: bf16 to 2**-7 relative plus 2**-7 absolute.
"""

from __future__ import annotations

import pytest
import torch

from tests.compile_kernels import caches_in_place, compiled_only
from tilefoundry import func, jit, lower, module
from tilefoundry.codegen import generate
from tilefoundry.dsl import DimVar, Tensor, tf
from tilefoundry.runtime.check import allclose, check
from tilefoundry.target import CudaTarget

pytestmark = pytest.mark.usefixtures("compile_cache")

SEQ = DimVar("seq", 1, 65)
CAP = DimVar("capacity", 1, 65)
POSITIONS = 64
BF16 = allclose(atol=2**-7, rtol=2**-7)
EPS = 1e-6


def _block(d: int, heads: int, kv: int):
    """The slot of a head size ``d``: qkv rows split into heads, q and k normed and rotated, k and v cached (the
    norms' weights inputs, so that the three sizes' functions share a module)."""

    @func
    def qk_norm_rope_cache(qkv: Tensor[(SEQ, (heads + 2 * kv) * d), "bf16"], gq: Tensor[(d,), "bf16"],
                           gk: Tensor[(d,), "bf16"], cos: Tensor[(POSITIONS, d), "bf16"],
                           sin: Tensor[(POSITIONS, d), "bf16"], pos_ids: Tensor[(SEQ,), "i32"],
                           cache_k: Tensor[(1, CAP, kv, d), "bf16"], cache_v: Tensor[(1, CAP, kv, d), "bf16"],
                           cur_pos: Tensor[(), "i32"], n_new: Tensor[(), "i64"]):
        x = tf.reshape(qkv, (SEQ, heads + 2 * kv, d))
        q = tf.slice(x, (0, 0, 0), (SEQ, heads, d))
        k = tf.slice(x, (0, heads, 0), (SEQ, kv, d))
        v = tf.slice(x, (0, heads + kv, 0), (SEQ, kv, d))
        q, k = tf.rope(tf.rms_norm(q, gq, EPS), tf.rms_norm(k, gk, EPS), cos, sin, pos_ids)
        cache_k = tf.cache_update(cache_k, cur_pos, n_new, tf.reshape(k, (1, SEQ, kv, d)))
        cache_v = tf.cache_update(cache_v, cur_pos, n_new, tf.reshape(v, (1, SEQ, kv, d)))
        return q, cache_k, cache_v

    return qk_norm_rope_cache


@module(entry="d64")
class RopeCache:
    d64 = _block(64, 4, 2)
    d48 = _block(48, 2, 1)
    d8 = _block(8, 2, 2)

    @func
    def keys_returned(q: Tensor[(SEQ, 2, 16), "bf16"], k: Tensor[(SEQ, 2, 16), "bf16"], gk: Tensor[(16,), "bf16"],
                      cos: Tensor[(POSITIONS, 16), "bf16"], sin: Tensor[(POSITIONS, 16), "bf16"],
                      pos_ids: Tensor[(SEQ,), "i32"], cache_k: Tensor[(1, CAP, 2, 16), "bf16"],
                      cur_pos: Tensor[(), "i32"], n_new: Tensor[(), "i64"]):
        """Only k normed; the rotated keys are a result too: they go to memory, the cache update copies them."""
        q, k = tf.rope(q, tf.rms_norm(k, gk, EPS), cos, sin, pos_ids)
        return q, k, tf.cache_update(cache_k, cur_pos, n_new, tf.reshape(k, (1, SEQ, 2, 16)))


@module(entry="count_computed")
class NotFused:
    """Where the rope cannot take the norm or the cache write, the function is lowered as written and as correct."""

    @func
    def count_computed(k: Tensor[(SEQ, 2, 16), "bf16"], gk: Tensor[(16,), "bf16"], cos: Tensor[(POSITIONS, 16), "bf16"],
                       sin: Tensor[(POSITIONS, 16), "bf16"], pos_ids: Tensor[(SEQ,), "i32"],
                       cache_k: Tensor[(1, CAP, 2, 16), "bf16"], cur_pos: Tensor[(), "i32"],
                       n_new: Tensor[(), "i32"]):
        """The update's count is computed after the rope (a cast): the rope cannot read it, the update writes."""
        q, k = tf.rope(k, tf.rms_norm(k, gk, EPS), cos, sin, pos_ids)
        return q, tf.cache_update(cache_k, cur_pos, tf.cast(n_new, "i64"), tf.reshape(k, (1, SEQ, 2, 16)))

    @func
    def rows_picked(table: Tensor[(40, 2, 16), "bf16"], ids: Tensor[(SEQ,), "i64"], gq: Tensor[(16,), "bf16"],
                    k: Tensor[(SEQ, 2, 16), "bf16"], cos: Tensor[(POSITIONS, 16), "bf16"],
                    sin: Tensor[(POSITIONS, 16), "bf16"], pos_ids: Tensor[(SEQ,), "i32"]):
        """q's rows picked by ids: a rope reads q through strides only, so the norm stays a stage of its own."""
        return tf.rope(tf.rms_norm(tf.index_select(table, ids, 0), gq, EPS), k, cos, sin, pos_ids)


def _inputs(name: str, seq: int, step: int, capacity: int, written: int | None = None) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(seq * 7 + step)
    extents = {"seq": seq, "capacity": capacity}
    positions = {"pos_ids": torch.arange(step, step + seq, dtype=torch.int32),
                 "cur_pos": torch.tensor(step, dtype=torch.int32),
                 "n_new": torch.tensor(seq if written is None else written, dtype=torch.int64)}
    out = []
    fn = RopeCache.functions[name] if name in RopeCache.functions else NotFused.functions[name]
    for p in fn.params:
        if p.name in positions:
            out.append(positions[p.name].to(p.type.dtype.torch_dtype))
            continue
        if p.name == "ids":
            out.append(torch.randint(0, 40, (seq,), generator=gen))
            continue
        shape = tuple(d if isinstance(d, int) else extents[d.name] for d in p.type.shape)
        t = torch.randn(shape, generator=gen)
        if p.name.startswith("g"):
            t = 1.0 + 0.25 * t
        elif p.name in ("cos", "sin"):
            t = torch.rand(shape, generator=gen) * 2 - 1
        else:
            t = 3.0 * t
        out.append(t.to(p.type.dtype.torch_dtype))
    return tuple(out)


# (new rows, cache position, capacity, rows written): a step, a prompt, rows up to the cache's end, n_new < seq
CASES = ((1, 0, 4, None), (1, 9, 16, None), (5, 2, 16, None), (4, 12, 16, None), (6, 0, 8, 4))


def _matches_the_evaluator(mod: object, name: str) -> None:
    """``mod``'s function ``name`` jitted for the CPU against the evaluator at every case of CASES."""
    compiled = jit(mod, target="cpu").functions[name]
    fn = mod.functions[name]
    paths = [f"output[{i}]" for i in range(len(fn.output_types))]
    for seq, step, capacity, written in CASES:
        report = check(compiled_only(compiled), fn, _inputs(name, seq, step, capacity, written),
                       expect={p: [BF16] for p in paths})
        assert report.passed, f"{name} at seq {seq} from {step} in {capacity}:\n{report}"


@pytest.mark.parametrize("name", sorted(RopeCache.functions))
def test_a_normed_rope_writing_its_cache_matches_the_evaluator(name: str) -> None:
    _matches_the_evaluator(RopeCache, name)


def test_the_norms_and_the_key_cache_write_run_inside_the_rope() -> None:
    for target in ("cpu", CudaTarget()):
        tir = lower(RopeCache, target)
        for name in ("d64", "d48", "d8"):
            fn = tir.functions[name]
            kinds = sorted(s.fn.name.removeprefix(f"{name}_") for s in fn.stages)
            # the caches' copies, q's and k's ropes, v's write: no norm stage, no write of the rotated keys
            assert kinds == ["stage0_k", "stage0_q", "stage1_copy", "stage2_copy", "stage2_write"], (name, kinds)
            assert not fn.temps, (name, fn.temps)  # no normed or rotated rows between stages
            assert str(fn).count("prologue(rms_norm<f32>") == 2, name
            assert [s.cache_writes[0].what for s in fn.stages if s.cache_writes] == ["cache_k", "cache_v"], name
        returned = tir.functions["keys_returned"]
        assert str(returned).count("prologue(rms_norm<f32>") == 1
        assert any(s.fn.name.endswith("_write") for s in returned.stages)  # the rotated keys written from memory


def test_a_rope_writing_past_the_caches_end_is_refused_and_writes_nothing() -> None:
    """The rope that writes the keys into the cache carries the cache update's check: on the CPU the entry refuses
    rows that would pass the cache's end, naming the position, the count and the cache, before anything runs."""
    compiled = jit(RopeCache, target="cpu").functions["d64"]
    fn = RopeCache.functions["d64"]
    names = [p.name for p in fn.params]
    args = list(_inputs("d64", 4, 14, 16))  # rows 14 .. 17 of a cache of 16
    caches = [args[names.index(n)].clone() for n in ("cache_k", "cache_v")]
    args[names.index("cache_k")], args[names.index("cache_v")] = caches
    kept = [c.clone() for c in caches]
    q = torch.full((4, 4, 64), float("nan"), dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"writing 4 rows \(n_new\) at position 14 \(cur_pos\) into cache_k"):
        compiled(*args, q, *caches)
    assert all(torch.equal(c, k) for c, k in zip(caches, kept))  # neither cache touched


def test_a_cuda_kernel_stops_at_a_row_past_the_caches_end_rather_than_skipping_it() -> None:
    """On CUDA the entry cannot read the position (device memory; a graph replays the call at others): each write of
    a row checks its position, and one past the cache's end stops the kernel saying so (detail::row_within), where
    a skipped row would leave the cache without it in silence. Rows past n_new are skipped: they are no rows of the
    update. (The kernel stopping runs on the H200: tests/gpu/test_compile_stages.py.)"""
    source = generate(lower(RopeCache, CudaTarget())).source
    for cache in ("cache_k", "cache_v"):  # k written by the rope, v by the update's own write
        assert f'"writing n_new rows at cur_pos passes the end of {cache}")' in source
    guards = [line for line in source.splitlines() if line.strip().startswith("if (") and "index_in(n_new_at" in line]
    assert guards and all("detail::row_within(" in line for line in guards)


def test_a_kernel_loads_every_position_of_a_row_together_before_checking_any() -> None:
    """Each position a row reads on the device (the rotary rows' position, the new rows' count, the cache's write
    position) is loaded into a local at the top of the row, before any check that may stop the kernel, so the loads
    go out together: read where each is used, every load waited for the check before it (four round trips to
    memory in Qwen3's rope + cache write where two do)."""
    source = generate(lower(RopeCache, CudaTarget())).source
    reads = ("pos_ids_ptr[", "cur_pos_ptr[0]", "n_new_ptr[0]")
    loaded = []
    for row in source.split("int64_t const row = ")[1:]:  # each kernel part's row, up to the next
        lines = [line.strip() for line in row.splitlines()]
        checks = [i for i, line in enumerate(lines) if "detail::index_in(" in line or "detail::row_within(" in line]
        if not checks:
            continue
        uses = [(i, r) for i, line in enumerate(lines) for r in reads if r in line]
        assert all(lines[i].startswith("auto const ") and i < checks[0] for i, _ in uses), row
        loaded.append({r for _, r in uses})
    assert set(reads) in loaded  # k's rows: the rotary position, the count and the write position, together


def test_a_cuda_rope_of_whole_words_promises_aligned_rows_which_its_entry_checks() -> None:
    """On CUDA a rope whose halves are whole 16-byte words (heads of 64 and 48 bf16 elements) is scheduled with a
    vector of 8: the entry checks that q, k, the tables, the norms' weights and the caches start at 16 bytes (a
    misaligned tensor is refused by name, ValueError, before anything runs), so every row's iterator promises it
    and ops::rope reads words without testing addresses (no element-by-element path in the kernel). A head of 8
    (halves of 4 elements) keeps a vector of 1; the CPU's ropes are unchanged."""
    tir = lower(RopeCache, CudaTarget())
    for name, vector in (("d64", 8), ("d48", 8), ("d8", 1)):
        ropes = [s.fn for s in tir.functions[name].stages if s.fn.schedule.placement == "rope"]
        assert len(ropes) == 2 and all(fn.schedule.vector_width == vector for fn in ropes), name
    cpu = lower(RopeCache, "cpu")
    assert all(s.fn.schedule.vector_width == 1 for s in cpu.functions["d64"].stages
               if s.fn.schedule.placement == "rope")
    source = generate(tir).source
    entry = source[source.index("void d64_entry("):source.index("void d48_entry(")]
    for param in ("qkv", "gq", "gk", "cos", "sin", "cache_k", "out0"):
        assert f'check.aligned({param}, "{param}", 16);' in entry, param
    assert "cute::make_tensor(make_aligned_gmem_ptr<16>(cos_ptr + detail::index_in(" in source


@pytest.mark.parametrize("name", sorted(NotFused.functions))
def test_what_the_rope_cannot_take_is_lowered_as_written_and_matches_the_evaluator(name: str) -> None:
    stages = [s.fn.name.removeprefix(f"{name}_") for s in lower(NotFused, "cpu").functions[name].stages]
    if name == "count_computed":  # the rotated keys go to memory; the update writes them after the cast
        assert "stage0_k" in stages and stages.index("stage0_k") < stages.index("stage2_write"), stages
    else:  # the norm of the picked rows a stage of its own, before the rope
        assert stages[0] == "stage0" and str(lower(NotFused, "cpu").functions[name]).count("prologue(") == 0, stages
    _matches_the_evaluator(NotFused, name)


def test_the_cache_passed_as_its_own_output_is_updated_in_place_by_the_rope() -> None:
    """The caches passed as their own outputs: no copy runs (the prelude's parts get no rows), the rope writes the
    new keys into the cache it was given, and the rows around them keep their values."""
    compiled = jit(RopeCache, target="cpu").functions["d64"]
    fn = RopeCache.functions["d64"]
    names = [p.name for p in fn.params]
    args = _inputs("d64", 3, 5, 16)
    got, want, caches = caches_in_place(compiled, fn, args)
    assert got[1] is caches[0] and got[2] is caches[1]
    for g, w in zip(got, want):
        torch.testing.assert_close(g.float(), w.float(), rtol=2**-7, atol=2**-7)
    for cache, before in zip(caches, (args[names.index("cache_k")], args[names.index("cache_v")])):
        assert torch.equal(cache[:, :5], before[:, :5]) and torch.equal(cache[:, 8:], before[:, 8:])


def test_a_cuda_kernel_promised_its_positions_reads_them_before_it_waits_for_the_kernel_before() -> None:
    """``CompilerOptions.early_reads`` names the positions no kernel launched right before writes (the decode
    engine's, written once a step): each part of the rope + cache launch then loads its rows' positions first and
    waits for the earlier kernel after them (programmatic dependent launch: their round trip to memory overlaps
    that kernel's end), and the launch's kernel no longer waits at its start. Without the promise it does, and no
    part waits again. The TIR says which parameters were promised."""
    plain = generate(lower(RopeCache, CudaTarget())).source
    tir = lower(RopeCache, CudaTarget()).with_early_reads(("pos_ids", "cur_pos", "n_new"))
    assert "early reads pos_ids, cur_pos, n_new" in str(tir)
    early = generate(tir).source
    top = "  wait_for_earlier_kernels();  // the kernel before this one has completed"
    late = "wait_for_earlier_kernels();  // the positions above were read before it"
    assert late not in plain
    launch = early[early.index("d64_launch1_kernel("):]
    launch = launch[:launch.index("\n}\n")]
    assert top not in launch and "then waits" in launch
    parts = [part for part in early.split("int64_t const row = ")[1:] if "_at = " in part]
    assert len(parts) == 3 * 4  # the q, k and v parts of each function: its positions read, then the wait
    for part in parts:
        lines = [line.strip() for line in part.split("\n}\n")[0].splitlines()]
        wait = lines.index(late)
        assert lines[1].startswith("if (row < ") and all(line.startswith("auto const ") for line in lines[2:wait])
        assert wait > 2 and not any("_ptr[" in line for line in lines[wait + 1:])


def test_early_reads_naming_no_parameter_or_not_names_are_refused() -> None:
    """A name in ``early_reads`` that no function of the module has is refused before anything is built (ValueError
    naming it and listing the parameters); a bare string or a non-string, TypeError."""
    from tilefoundry.codegen.options import CompilerOptions

    with pytest.raises(ValueError, match=r"'positions'.*no parameter.*pos_ids"):
        lower(RopeCache, CudaTarget()).with_early_reads(("positions",))
    with pytest.raises(ValueError, match="'positions'"):
        jit(RopeCache, target="cpu", options=CompilerOptions(early_reads=("positions",)))
    for bad in ("pos_ids", (1,), ("",)):
        with pytest.raises(TypeError, match="early_reads"):
            CompilerOptions(early_reads=bad)

"""The decode engine's compiled kernel set (``engine/compiled_kernels.py``) on the CPU: every family's tiny random
model through it passes ``check`` against the semantic Module's step, it is the CPU's default, and an engine whose
default set cannot be built says so and runs torch's.

The SmolLM2-135M tokens through it are tests/test_smollm2.py's (the engine's default on the CPU), and the Qwen3
of tests/test_engine.py runs through it at contexts up to 1024.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tilefoundry import lower
from tilefoundry.codegen import generate
from tilefoundry.codegen.toolchain import CompilerNotFoundError
from tilefoundry.engine import CompiledKernels, DecodeEngine, DecoderSpec, StepPositions, TorchKernels
from tilefoundry.engine.compiled_kernels import SlotShapes, slot_functions, slot_options, step_masks
from tilefoundry.ir.core.tree import flatten, leaf_paths
from tilefoundry.ir.types.dtype import dtype_of
from tilefoundry.models import open_checkpoint
from tilefoundry.models.engine_step import EngineStep
from tilefoundry.models.twins import build_twin
from tilefoundry.runtime.check import check, parse_predicate

from .compile_kernels import output_paths
from .hf_models import make_checkpoint

CAPACITY = 96
# (cached positions, tokens of the step): a prompt, one token on an empty cache, a decode step deep into the
# cache, a chunk of several tokens, a step of 17 tokens (on a Hopper GPU the slots' prompt variants: tensor cores)
# and a long chunk deep into the cache.
STEPS = [(0, 7), (0, 1), (40, 1), (40, 5), (0, 17), (40, 50)]
F32 = [parse_predicate("rel_l2:max=1e-5"), parse_predicate("cosine:min=0.99999")]
BF16 = [parse_predicate("rel_l2:max=2e-2"), parse_predicate("cosine:min=0.999")]


@pytest.fixture(scope="module", params=["llama", "llama_tied", "qwen2", "qwen3", "qwen3_moe"])
def family(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    """(family, opened checkpoint) of a tiny random model of each family."""
    folder = tmp_path_factory.mktemp("compiled") / request.param
    make_checkpoint(request.param, folder, sharded=False)
    return request.param, open_checkpoint(folder, progress=False)


def _step_inputs(reference, context: int, tokens: int, seed: int) -> tuple:  # noqa: ANN001
    gen = torch.Generator().manual_seed(seed)
    caches = tuple((torch.randn(k.shape, generator=gen).to(k.dtype), torch.randn(v.shape, generator=gen).to(v.dtype))
                   for k, v in reference.init_caches(capacity=CAPACITY))
    ids = torch.randint(0, 256, (context + tokens,), generator=gen)
    return reference.prepare_inputs_for_generation(ids, context, caches)


def _check(engine: DecodeEngine, reference, inputs: tuple, predicates: list):  # noqa: ANN001, ANN202
    _, spec = flatten(reference(*inputs), lambda t: isinstance(t, torch.Tensor))
    return check(EngineStep(engine), reference, inputs, expect={path: predicates for path in leaf_paths(spec)})


def test_every_family_through_the_compiled_set_passes_check(family, monkeypatch) -> None:
    name, opened = family
    reference = opened.module.load(opened.resource("cpu"))
    twin = build_twin(opened.module, opened.config)
    twin.load(opened.resource("cpu"))
    engine = DecodeEngine(twin, CAPACITY, kernels=CompiledKernels())
    assert engine.kernels.name == "compiled"

    def refused(*args: object) -> None:
        raise AssertionError("on the CPU every step's attention and experts run compiled, never torch's")

    monkeypatch.setattr(TorchKernels, "attention", refused)
    monkeypatch.setattr(TorchKernels, "moe", refused)
    for context, tokens in STEPS:
        report = _check(engine, reference, _step_inputs(reference, context, tokens, seed=context + tokens), F32)
        assert report.passed, f"{name} at {tokens} tokens after {context}:\n{report}"


def test_a_bf16_model_through_the_compiled_set_passes_check(tmp_path: Path) -> None:
    model = make_checkpoint("qwen3", tmp_path / "f32", sharded=False)
    model.to(torch.bfloat16).save_pretrained(str(tmp_path / "bf16"))
    opened = open_checkpoint(tmp_path / "bf16", progress=False)
    assert opened.config.dtype == "bf16"
    reference = opened.module.load(opened.resource("cpu"))
    twin = build_twin(opened.module, opened.config)
    twin.load(opened.resource("cpu"))
    engine = DecodeEngine(twin, CAPACITY, kernels=CompiledKernels())
    for context, tokens in STEPS:
        report = _check(engine, reference, _step_inputs(reference, context, tokens, seed=context + tokens), BF16)
        assert report.passed, f"bf16 at {tokens} tokens after {context}:\n{report}"


def test_the_slots_fuse_what_the_hand_written_kernels_fuse(family) -> None:
    """One kernel a projection (its norm in the prologue, its bias and residual in the epilogue; gate and up one
    kernel), the residual stream and the caches updated in place (the caller passes them as outputs)."""
    from tilefoundry import lower
    from tilefoundry.engine.packed import pack_decoder

    name, opened = family
    twin = build_twin(opened.module, opened.config)
    twin.load(opened.resource("cpu"))
    weights = twin.decoder_weights()
    shapes = SlotShapes.of(type(twin).decoder_spec, pack_decoder(weights), weights.dtype)
    tir = {n: lower(fn, "cpu").functions[fn.name] for n, fn in slot_functions(shapes).items()}
    for slot in ("norm_linear", "o_proj", "down", "head", "norm_swiglu"):
        assert [s.fn.schedule.placement for s in tir[slot].stages] == ["matmul"], (name, slot)
    # gate and up, two strided views of the interleaved weight, are one pair: the normed input read once
    assert "matmul<f32>(x_tile, gate_up_tile, gate_up_tile, epilogue(" in str(tir["norm_swiglu"]), name
    assert tir["o_proj"].aliases == (("out", "residual"),) and tir["down"].aliases == (("out", "residual"),)
    assert tir["rope_cache"].aliases == (("out1", "cache_k"), ("out2", "cache_v")), name
    assert "attention" in [s.fn.schedule.placement for s in tir["attention"].stages], name


@pytest.mark.parametrize("tokens", [1, 3])
def test_the_compiled_attention_reads_the_whole_cache_by_device_positions(family, tokens: int) -> None:
    """What a CUDA graph needs of the slot: no host position (``StepPositions.length`` None, as while a graph is
    captured) and the same launch at every context: the whole cache passed, its entries past the step never
    read (garbage there changes nothing), the result torch's slot's over the cache's first entries."""
    name, opened = family
    twin = build_twin(opened.module, opened.config)
    twin.load(opened.resource("cpu"))
    engine = DecodeEngine(twin, CAPACITY, kernels=CompiledKernels())
    spec = type(twin).decoder_spec
    gen = torch.Generator().manual_seed(tokens)
    cache_k, cache_v = (torch.randn(CAPACITY, spec.kv_heads, spec.head_dim, generator=gen) for _ in range(2))
    q = torch.randn(tokens, spec.heads, spec.head_dim, generator=gen)
    for length in (0, 9, CAPACITY - tokens):
        ctx = length + tokens
        cache_k[ctx:], cache_v[ctx:] = 1e30, -1e30  # not written yet
        at = StepPositions(torch.tensor([length], dtype=torch.int32), torch.tensor([ctx], dtype=torch.int32), None)
        got = torch.full((tokens, spec.heads, spec.head_dim), float("nan"))
        engine.kernels.attention(q, cache_k, cache_v, got, spec.scale, at)
        want = torch.empty_like(got)
        TorchKernels().attention(q, cache_k, cache_v, want, spec.scale, StepPositions(at.position, at.context, length))
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, msg=f"{name} at {tokens} after {length}")


@pytest.mark.parametrize(("device", "rows"), [("meta", 17), ("meta", 16), ("cpu", 17), ("cpu", 1)])
def test_every_step_runs_the_compiled_slots_whatever_its_rows(monkeypatch, device: str, rows: int) -> None:
    """A prompt's step as a decode step's, off the CPU too (the meta device stands for a GPU: no kernel runs), takes
    the compiled slots, never torch's."""
    spec = DecoderSpec(hidden=32, heads=4, kv_heads=2, head_dim=8, vocab=64, eps=1e-6, max_positions=64)
    kernels = CompiledKernels()
    kernels._shapes = SlotShapes(spec, "f32", 48, False, False)  # as prepare leaves it, without the builds
    ran: list[str] = []
    for slot in ("norm_linear", "attention", "linear_residual", "norm_swiglu", "head"):
        monkeypatch.setattr(TorchKernels, slot, lambda *args, slot=slot: ran.append(f"torch {slot}"))
    monkeypatch.setattr(kernels, "_fn", lambda name: lambda *args: ran.append(f"compiled {name}"))

    def t(*shape: int) -> torch.Tensor:
        return torch.empty(shape, device=device)

    at = StepPositions(torch.zeros(1, dtype=torch.int32, device=device),
                       torch.full((1,), rows, dtype=torch.int32, device=device), 0)
    kernels.norm_linear(t(rows, 32), t(32), t(64, 32), None, t(rows, 64), spec.eps)
    kernels.attention(t(rows, 4, 8), t(64, 2, 8), t(64, 2, 8), t(rows, 4, 8), spec.scale, at)
    kernels.linear_residual(t(rows, 32), t(32, 32), t(rows, 32), t(rows, 32))
    kernels.norm_swiglu(t(rows, 32), t(32), t(96, 32), t(rows, 48), spec.eps)
    kernels.head(t(rows, 32), t(32), t(64, 32), t(rows, 64), spec.eps)
    assert [r.split()[0] for r in ran] == ["compiled"] * 5, ran


def test_on_a_hopper_gpu_each_matmul_slot_chooses_its_prompt_variant_from_17_rows() -> None:
    """The slots' build options split a slot with a matmul by its row count on sm_90a: the decode step's kernels up
    to 16 rows, from 17 the prompt's (the projections a GEMM on the tensor cores, the attention blocks of query rows
    through them); the CPU target keeps one body."""
    spec = DecoderSpec(hidden=256, heads=4, kv_heads=2, head_dim=64, vocab=512, eps=1e-6, max_positions=512)
    fns = slot_functions(SlotShapes(spec, "bf16", 512, False, True))
    for name in ("norm_linear", "attention", "o_proj", "norm_swiglu", "down", "head"):
        split = slot_options(name).split_rows
        gpu = lower(fns[name], "cuda:sm_90a", split_rows=split)
        assert [c.lo for c in gpu.dispatches[fns[name].name].cases] == [1, 17], name
        source = generate(gpu).source
        assert ("ops::attention_rows<float>(" if name == "attention" else "ops::tensor_map") in source, name
        assert not lower(fns[name], "cpu", split_rows=split).dispatches, name


def test_the_cpu_default_is_the_compiled_set_and_a_failed_build_falls_back_to_torch(tmp_path: Path,
                                                                                     monkeypatch) -> None:
    make_checkpoint("llama", tmp_path / "llama", sharded=False)
    opened = open_checkpoint(tmp_path / "llama", progress=False)
    twin = build_twin(opened.module, opened.config)
    twin.load(opened.resource("cpu"))
    assert DecodeEngine(twin, 8).kernels.name == "compiled"

    def no_compiler(*_: object) -> None:
        raise CompilerNotFoundError("no C++ compiler found (g++, clang++): install one")

    monkeypatch.setattr(CompiledKernels, "prepare", no_compiler)
    with pytest.warns(RuntimeWarning, match=r"the compiled kernels are not available \(CompilerNotFoundError: no "
                      r"C\+\+ compiler found.*running the torch kernel slots"):
        engine = DecodeEngine(twin, 8)
    assert isinstance(engine.kernels, TorchKernels)
    with pytest.raises(CompilerNotFoundError):  # a set the caller chose is not swapped behind their back
        DecodeEngine(twin, 8, kernels=CompiledKernels())


def test_a_slot_called_before_the_set_is_built_says_how_it_is_built() -> None:
    x = torch.zeros(1, 8)
    with pytest.raises(RuntimeError, match=r"CompiledKernels: its slots are not built yet; a DecodeEngine builds "
                                           r"them when it is made \(CompiledKernels.prepare\)"):
        CompiledKernels().head(x, torch.ones(8), torch.zeros(4, 8), torch.empty(1, 4), 1e-6)


def test_each_projection_slot_computes_the_family_function_it_stands_for() -> None:
    """The slots' own layouts (packed q/k/v, interleaved gate/up) against the families' functions, both evaluated:
    norm_linear is qkv, norm_swiglu then down is the MLP, head is head."""
    from tests.test_compile_families import _family, _functions, _inputs
    from tilefoundry.engine.packing import pack_gate_up, pack_qkv

    model = _family("qwen2")  # q/k/v with biases
    fam = _functions(model)
    c = model.layer0.functions["qkv"]
    hidden = c.params[0].type.shape[1]
    spec = DecoderSpec(hidden=hidden, heads=4, kv_heads=2, head_dim=hidden // 4, vocab=256, eps=1e-6,
                       max_positions=128)
    inter = model.layer0.functions["mlp"].params[2].type.shape[0]
    slots = slot_functions(SlotShapes(spec, "f32", inter, True, False))
    expect = [parse_predicate("rel_l2:max=1e-6")]

    def qkv(x, norm, q, k, v, qb, kb, vb):  # noqa: ANN001, ANN202
        out = slots["norm_linear"](x, norm, pack_qkv(q, k, v), torch.cat((qb, kb, vb)))
        m = x.shape[0]
        return tuple(t.reshape(m, -1, spec.head_dim) for t in out.split((4 * spec.head_dim, 2 * spec.head_dim,
                                                                          2 * spec.head_dim), dim=1))

    def mlp(x, norm, gate, up, down):  # noqa: ANN001, ANN202
        return slots["down"](slots["norm_swiglu"](x, norm, pack_gate_up(gate, up)), down, x)

    for name, slot in (("qkv", qkv), ("mlp", mlp), ("head", slots["head"])):
        fn = fam[name]
        paths = output_paths(fn)
        for seq in (1, 7):
            report = check(slot, fn, _inputs(fn, seq), expect={p: expect for p in paths})
            assert report.passed, f"{name} at seq {seq}:\n{report}"


def test_a_slow_build_is_said_on_a_terminal_only(tmp_path: Path, monkeypatch, capsys) -> None:
    """A command's stderr that is no terminal stays its own (a refusal is one line there)."""
    import itertools

    import tilefoundry.engine.compiled_kernels as compiled

    make_checkpoint("llama", tmp_path / "llama", sharded=False)
    opened = open_checkpoint(tmp_path / "llama", progress=False)
    twin = build_twin(opened.module, opened.config)
    twin.load(opened.resource("cpu"))
    clock = itertools.count(0.0, 30.0)  # every build "took" 30 s
    monkeypatch.setattr(compiled.time, "monotonic", lambda: next(clock))
    capsys.readouterr()  # what making the checkpoint printed
    DecodeEngine(twin, 8, kernels=CompiledKernels())
    assert capsys.readouterr().err == ""


def test_the_moe_slot_computes_the_family_moe_reading_only_the_chosen_experts() -> None:
    """The routed slot (one token) against the family's MoE function, which computes every expert: evaluated
    side by side, then compiled with the experts the router does not choose poisoned with NaN (never read)."""
    from tests.test_compile_families import _family, _inputs
    from tilefoundry import jit

    model = _family("qwen3_moe")
    fn = model.layer0.functions["moe"]
    hidden = fn.params[0].type.shape[1]
    experts, inter = fn.params[3].type.shape[:2]
    spec = DecoderSpec(hidden=hidden, heads=4, kv_heads=2, head_dim=16, vocab=256, eps=1e-6, max_positions=128,
                       experts_per_token=2, normalize_experts=True)
    slot = slot_functions(SlotShapes(spec, "f32", 0, False, True, experts, inter))["moe"]
    inputs = _inputs(fn, 1)
    assert check(slot, fn, inputs, expect={"output": [parse_predicate("rel_l2:max=1e-6")]}).passed
    x, norm, router, gate, up, down = inputs
    probs = torch.softmax(torch.nn.functional.rms_norm(x, (hidden,), norm, 1e-6) @ router.t(), -1)
    unchosen = [e for e in range(experts) if e not in probs.topk(2).indices[0].tolist()]
    poisoned = [w.clone() for w in (gate, up, down)]
    for w in poisoned:
        w[unchosen] = float("nan")
    got = jit(slot, target="cpu")(x, norm, router, *poisoned)
    torch.testing.assert_close(got, fn(*inputs), rtol=1e-5, atol=1e-5)


def check_several_token_moe(tokens: int, device: str = "cpu", tol: float = 1e-5, dtype: str = "f32") -> None:
    """CompiledKernels.moe at ``tokens`` tokens on ``device``, its two several-token slots jitted for it in ``dtype``,
    against the family's MoE function (evaluated in f32 on the CPU, on the same values); every token chooses expert
    0 (at 300 tokens: three chunks of it, the last one short), the experts no token chose are poisoned with NaN (never
    read), torch's slot never runs."""
    from tests.test_compile_families import _family, _inputs
    from tilefoundry import jit
    from tilefoundry.engine.compiled_kernels import MOE_CHUNK

    model = _family("qwen3_moe", positions=512)
    fn = model.layer0.functions["moe"]
    hidden = fn.params[0].type.shape[1]
    experts, inter = fn.params[3].type.shape[:2]
    spec = DecoderSpec(hidden=hidden, heads=4, kv_heads=2, head_dim=16, vocab=256, eps=1e-6, max_positions=512,
                       experts_per_token=2, normalize_experts=True)
    shapes = SlotShapes(spec, dtype, 0, False, True, experts, inter)
    kernels = CompiledKernels()
    kernels._shapes = shapes  # as prepare leaves it, with the two slots a several-token step runs
    target = "cuda" if device.startswith("cuda") else "cpu"
    kernels._fns = {name: jit(slot_functions(shapes)[name], target=target) for name in ("moe_route", "moe_grouped")}
    torch_dtype = dtype_of(dtype).torch_dtype
    x, norm, router, gate, up, down = (t.to(torch_dtype).float() for t in _inputs(fn, tokens))  # values of dtype
    x, router = x.abs(), router.clone()
    router[0] = 0.5  # every normed token (all positive) scores expert 0 highest
    h = torch.nn.functional.rms_norm(x, (hidden,), norm, 1e-6)
    chosen = torch.softmax(h @ router.t(), -1).topk(2).indices
    assert (chosen == 0).any(-1).all() and (tokens < MOE_CHUNK or tokens > 2 * MOE_CHUNK)  # expert 0: 1 or 3 chunks
    unchosen = [e for e in range(experts) if e not in chosen.flatten().tolist()]
    poisoned = [w.clone() for w in (gate, up, down)]
    for w in poisoned:
        w[unchosen] = float("nan")
    got = torch.empty_like(x, device=device, dtype=torch_dtype)
    kernels.moe(*(t.to(device, torch_dtype) for t in (x, norm, router, *poisoned)), got, 1e-6, 2, True)
    torch.testing.assert_close(got.cpu().float(), fn(x, norm, router, gate, up, down), rtol=tol, atol=tol)


@pytest.mark.parametrize(("tokens", "dtype"), [(2, "f32"), (300, "f32"), (300, "bf16")])
def test_a_several_token_moe_runs_each_chosen_expert_over_its_tokens(tokens: int, dtype: str) -> None:
    """A prompt's routed experts on the CPU: the router's slot, then the chunks of each expert's tokens through the
    experts' slot (check_several_token_moe; bf16 within bf16's rounding of each op)."""
    check_several_token_moe(tokens, dtype=dtype, tol=1e-5 if dtype == "f32" else 5e-2)


def test_a_moe_slot_refuses_a_top_k_it_was_not_built_for() -> None:
    spec = DecoderSpec(hidden=32, heads=4, kv_heads=2, head_dim=8, vocab=64, eps=1e-6, max_positions=64,
                       experts_per_token=2, normalize_experts=True)
    kernels = CompiledKernels()
    kernels._shapes = SlotShapes(spec, "f32", 0, False, False, 4, 16)  # as prepare leaves it, without the builds
    x = torch.zeros(1, 32)
    with pytest.raises(ValueError, match=r"CompiledKernels: 3 experts a token \(normalize=True\) differs from the 2 "
                                         r"\(normalize=True\) its moe slot was built for"):
        kernels.moe(x, torch.ones(32), torch.zeros(4, 32), torch.zeros(4, 16, 32), torch.zeros(4, 16, 32),
                    torch.zeros(4, 32, 16), x, 1e-6, 3, True)


@pytest.mark.parametrize("poison", [None, float("nan"), float("inf"), float("-inf")])
def test_the_choose_slot_finds_the_first_largest_logit_in_the_heads_kernel(poison: float | None) -> None:
    """CompiledKernels.greedy_head (the engine's greedy graphs on CUDA) through the ``choose`` slot: the head's logits
    and their argmax, largest and smallest fused in its matmul (each CTA's parts, then a merge), the finiteness flag
    from those two (a row-wise stage after the merge) and the next step's token / position + 1 / context + 1 written
    into the step's inputs in place (the caller passes them as that output too; the other columns kept), as the
    KernelSet default computes them with torch: a +inf, a -inf or a NaN logit clears the flag. Built for the CPU
    here (an engine on a CPU leaves the slot out: its greedy decoding reads the logits)."""
    from tilefoundry import jit, lower

    spec = DecoderSpec(hidden=64, heads=4, kv_heads=2, head_dim=16, vocab=1000, eps=1e-6, max_positions=128)
    shapes = SlotShapes(spec, "f32", 0, False, False)
    fn = slot_functions(shapes)["choose"]
    lowered = lower(fn, "cpu").functions[fn.name]
    assert [s.fn.schedule.placement for s in lowered.stages] == ["matmul", "reductions", "rows", "rows"]
    assert lowered.aliases == (("out3", "step"),)
    kernels = CompiledKernels()
    kernels._shapes, kernels._fns = shapes, {"choose": jit(fn, target="cpu")}
    kernels._masks = step_masks(torch.device("cpu"))
    gen = torch.Generator().manual_seed(3)
    x, norm = torch.randn(1, spec.hidden, generator=gen), torch.rand(spec.hidden, generator=gen) + 0.5
    weight = torch.randn(spec.vocab, spec.hidden, generator=gen) / spec.hidden**0.5
    weight[611] = x[0] * 4  # far above the rest, and tied with row 937 (another CTA's): the first index wins
    weight[937] = weight[611]
    if poison is not None:
        weight[803] = poison
    results = []
    for ks in (kernels, TorchKernels()):
        logits, result = torch.full((1, spec.vocab), float("nan")), torch.full((2,), -1, dtype=torch.int64)
        step = torch.tensor([[5, 9, 8, 7], [17, 9, 8, 7], [18, 9, 8, 7]], dtype=torch.int32)
        ks.greedy_head(x, norm, weight, logits, result, step, spec.eps)
        results.append((result.tolist(), step.tolist(), logits))
    (got, got_step, got_logits), (want, want_step, want_logits) = results
    assert got == want and got_step == want_step
    torch.testing.assert_close(got_logits, want_logits, rtol=1e-5, atol=1e-5, equal_nan=True)
    assert got[1] == (1 if poison is None else 0)
    if poison is None:
        assert got[0] == 611 and got_step == [[611, 9, 8, 7], [18, 9, 8, 7], [19, 9, 8, 7]]

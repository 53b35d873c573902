"""The decode engine on the CPU (eager steps): checked against the semantic Module, generating its tokens, refusing
what it cannot run. The same checks on the CUDA-graph path are tests/gpu/test_engine_cuda.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from tilefoundry.engine import DecodeEngine, DecoderSpec, KernelSet, StepPositions, TorchKernels
from tilefoundry.ir.core.function import Function
from tilefoundry.models import Sampling, generate, open_checkpoint
from tilefoundry.models.engine_step import EngineStep
from tilefoundry.models.generation import engine_for
from tilefoundry.models.twins import build_twin
from tilefoundry.runtime import NotLoadedError, bound_weights

from .engine_cases import BROKEN, CAPACITY, CONTEXTS, check_step, load_qwen3, make_long_qwen3, step_inputs
from .hf_models import make_checkpoint

PROMPT = torch.tensor([3, 17, 42, 99, 5, 250, 7])


@pytest.fixture(scope="module")
def qwen3(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    """(opened checkpoint, reference reading, loaded twin) of a tiny f32 Qwen3 with 2048 positions."""
    folder = tmp_path_factory.mktemp("engine") / "qwen3"
    make_long_qwen3(folder)
    return load_qwen3(folder, "cpu")


@pytest.mark.parametrize(("context", "tokens"), CONTEXTS, ids=[f"ctx{c}-{n}tok" for c, n in CONTEXTS])
def test_the_engine_step_passes_check_against_the_semantic_module(qwen3, context: int, tokens: int) -> None:
    _, reference, twin = qwen3
    engine = DecodeEngine(twin, CAPACITY)
    inputs = step_inputs(reference, context, tokens, seed=context * 10 + tokens)
    given = [(k.clone(), v.clone()) for k, v in inputs[-1]]
    report = check_step(EngineStep(engine), reference, inputs)
    assert report.passed, str(report)
    assert all(torch.equal(k, k0) and torch.equal(v, v0) for (k, v), (k0, v0) in zip(inputs[-1], given)), \
        "the caches given to the step are read, never changed"
    assert engine.length == context + tokens and engine.graph_status == "off" and engine.decode_graph is None
    assert engine.greedy_graph is None
    assert engine.stats.eager_steps + engine.stats.prefills == 1


@pytest.mark.parametrize("broken", sorted(BROKEN))
def test_a_broken_kernel_slot_fails_the_check(qwen3, broken: str) -> None:
    _, reference, twin = qwen3
    engine = DecodeEngine(twin, CAPACITY, kernels=BROKEN[broken]())
    failed = [(c, n) for c, n in CONTEXTS
              if not check_step(EngineStep(engine), reference, step_inputs(reference, c, n, seed=c + n)).passed]
    assert failed == CONTEXTS, f"{broken}: passed at {sorted(set(CONTEXTS) - set(failed))}"


def test_the_engine_generates_the_references_64_greedy_tokens(qwen3) -> None:
    _, reference, twin = qwen3
    want = generate(reference, PROMPT, 64)
    got = generate(twin, PROMPT, 64)
    assert got.runner == "decode engine (compiled kernels; CUDA graph: off)"
    assert want.runner == "model step"
    assert len(set(want.tokens)) > 5, f"the model decodes a varied sequence, got {want.tokens}"
    assert got.tokens == want.tokens
    assert got.prefill_seconds > 0 and got.decode_seconds > 0 and got.decode_tokens_per_second > 0


def test_sampled_decoding_through_the_engine_is_the_twin_steps(qwen3) -> None:
    _, _, twin = qwen3
    sampling = Sampling(temperature=0.8, top_p=0.95, seed=11)
    step = generate(twin, PROMPT, 24, sampling=sampling, engine=False)
    engine = generate(twin, PROMPT, 24, sampling=sampling)
    assert step.runner == "model step" and engine.runner.startswith("decode engine")
    assert engine.tokens == step.tokens
    assert generate(twin, PROMPT, 24, sampling=Sampling(temperature=0.7, top_k=1, seed=3)).tokens == \
        generate(twin, PROMPT, 24).tokens


def test_the_engine_runs_every_family_as_hugging_face_greedy(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TILEFOUNDRY_CACHE", str(tmp_path / "cache"))
    for family in ("llama", "llama_tied", "qwen2", "qwen3_moe"):
        hf = make_checkpoint(family, tmp_path / family, sharded=False)
        with torch.no_grad():
            want = hf.generate(PROMPT[None], max_new_tokens=16, min_new_tokens=16, do_sample=False)[0, 7:].tolist()
        opened = open_checkpoint(tmp_path / family, progress=False)
        twin = build_twin(opened.module, opened.config)
        twin.load(opened.resource("cpu"))
        got = generate(twin, PROMPT, 16)
        assert got.runner.startswith("decode engine") and got.tokens == want, family


def test_one_module_and_one_engine_serve_prompts_of_any_length(qwen3, monkeypatch) -> None:
    opened, reference, twin = qwen3
    assert open_checkpoint(opened.folder, progress=False).module is opened.module, "the Module is built once"
    assert twin.module is opened.module and reference.module is opened.module
    generate(twin, PROMPT[:3], 4)
    generate(reference, PROMPT[:3], 2)
    engine = engine_for(twin, 1, "cpu")
    traced: list[str] = []
    real = Function._trace

    def counting(self):  # noqa: ANN001, ANN202
        traced.append(self.name)
        return real(self)

    monkeypatch.setattr(Function, "_trace", counting)
    for prompt, new in ((PROMPT, 5), (torch.arange(20, 61), 3), (PROMPT[:1], 2)):
        assert len(generate(twin, prompt, new).tokens) == new
        assert len(generate(reference, prompt, 2).tokens) == 2
        assert len(generate(twin, prompt, 2, engine=False).tokens) == 2
    assert open_checkpoint(opened.folder, progress=False).module is opened.module
    assert traced == [], f"nothing is traced again for a new prompt, got {traced}"
    assert engine_for(twin, 1, "cpu") is engine, "the engine kept for the twin serves every prompt"
    assert engine.capacity >= 44


def test_the_engine_grows_for_a_longer_request_and_is_rebuilt_after_a_load(qwen3) -> None:
    opened, _, twin = qwen3
    generate(twin, PROMPT, 2)
    engine = engine_for(twin, 1, "cpu")
    generate(twin, torch.arange(1, 300) % 256, 30)
    assert engine_for(twin, 1, "cpu") is engine and engine.capacity >= 329
    assert engine.built_from(twin)
    twin.load(opened.resource("cpu"))
    assert not engine.built_from(twin)
    generate(twin, PROMPT, 2)
    assert engine_for(twin, 1, "cpu") is not engine


def test_prefill_leaves_the_references_caches_in_the_engine(qwen3) -> None:
    _, reference, twin = qwen3
    engine = DecodeEngine(twin, 32)
    caches = reference.init_caches(capacity=32)
    _, want = reference(*reference.prepare_inputs_for_generation(PROMPT, 0, caches))
    logits = engine.prefill(PROMPT)
    assert logits.shape == (1, 256) and engine.length == 7
    for (k, v), (wk, wv) in zip(engine.caches, want):
        torch.testing.assert_close(k[:7], wk[0, :7], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(v[:7], wv[0, :7], rtol=1e-5, atol=1e-6)
    assert engine.prefill(PROMPT[:2], all_logits=True).shape == (2, 256) and engine.length == 9
    engine.reset()
    assert engine.length == 0


def test_slots_compute_the_same_under_capture_as_eagerly() -> None:
    """The captured branch of each torch slot (device positions only) equals its eager branch."""
    kernels = TorchKernels()
    gen = torch.Generator().manual_seed(0)
    for tokens, length in ((1, 0), (1, 9), (3, 5)):
        q = torch.randn(tokens, 6, 8, generator=gen)
        cache_k, cache_v = torch.randn(20, 2, 8, generator=gen), torch.randn(20, 2, 8, generator=gen)
        position = torch.tensor([length], dtype=torch.int32)
        outs = []
        for host in (length, None):
            out = torch.full((tokens, 6, 8), float("nan"))
            kernels.attention(q, cache_k, cache_v, out, 0.35, StepPositions(position, position + tokens, host))
            outs.append(out)
        torch.testing.assert_close(outs[1], outs[0], rtol=1e-5, atol=1e-6)


def test_capacity_is_chosen_when_caches_are_made_and_past_it_is_refused(qwen3) -> None:
    opened, reference, twin = qwen3
    caches = reference.init_caches(capacity=5)
    assert caches[0][0].shape == (1, 5, 2, 16) and len(caches) == 2
    with pytest.raises(ValueError, match=re.escape("position 6 is past the caches' capacity of 5 positions (0..4)")):
        reference.prepare_inputs_for_generation(PROMPT, 0, caches)
    with pytest.raises(ValueError, match=re.escape("capacity 2049 must lie in [1, 2048] (2048 is the model's "
                                                   "max_position_embeddings)")):
        twin.init_caches(capacity=2049)
    with pytest.raises(TypeError, match="capacity must be an integer"):
        reference.init_caches(capacity=4.0)
    with pytest.raises(TypeError, match="capacity"):
        reference.init_caches()
    with pytest.raises(ValueError, match=r"DecodeEngine: capacity 0 must lie in \[1, 2048\]"):
        DecodeEngine(twin, 0)
    engine = DecodeEngine(twin, 8)
    engine.prefill(PROMPT)
    engine.decode(1)
    with pytest.raises(ValueError, match=re.escape("DecodeEngine: position 8 is past the capacity of 8 positions "
                                                   "(0..7)")):
        engine.decode(2)
    assert engine.length == 8
    with pytest.raises(ValueError, match="position 9 is past the capacity of 8"):
        DecodeEngine(twin, 8).prefill(torch.arange(10))
    with pytest.raises(ValueError, match=re.escape("init_caches: capacity 2049 must lie in [1, 2048]")):
        generate(reference, PROMPT, 2042)  # 7 + 2042 positions
    with pytest.raises(ValueError, match=re.escape("DecodeEngine: capacity 2049 must lie in [1, 2048]")):
        generate(twin, PROMPT, 2042)


def test_the_engine_refuses_what_it_cannot_run(qwen3) -> None:
    opened, reference, twin = qwen3
    with pytest.raises(TypeError, match="DecodeEngine runs a causal-LM twin that describes itself"):
        DecodeEngine(reference, 8)
    with pytest.raises(NotLoadedError, match=r"has no weights bound yet \(embed_tokens, lm_head, norm\)"):
        DecodeEngine(build_twin(opened.module, opened.config), 8)
    with pytest.raises(ValueError, match="graph=True captures CUDA graphs, which need the weights on a CUDA device"):
        DecodeEngine(twin, 8, graph=True)
    with pytest.raises(TypeError, match="kernels must be a KernelSet"):
        DecodeEngine(twin, 8, kernels=object())  # type: ignore[arg-type]
    engine = DecodeEngine(twin, 8)
    with pytest.raises(ValueError, match=re.escape("token id 256 is outside the vocabulary [0, 256)")):
        engine.decode(256)
    with pytest.raises(ValueError, match=re.escape("token id -1 is outside the vocabulary [0, 256)")):
        engine.prefill(torch.tensor([1, -1]))
    with pytest.raises(ValueError, match="takes a non-empty 1-D tensor of token ids"):
        engine.prefill(torch.tensor([[1, 2]]))
    with pytest.raises(TypeError, match="takes a token id"):
        engine.decode(1.0)  # type: ignore[arg-type]
    assert engine.length == 0, "a refused step changes nothing"
    with pytest.raises(TypeError, match=r"generate\(engine=True\): the decode engine runs a loaded causal-LM twin"):
        generate(reference, PROMPT, 2, engine=True)
    with pytest.raises(ValueError, match="the twin's weights are on cpu but device='meta' was asked"):
        generate(twin, PROMPT, 2, device="meta")


def test_engine_step_refuses_inputs_the_engine_does_not_run(qwen3) -> None:
    _, reference, twin = qwen3
    step = EngineStep(DecodeEngine(twin, 16))
    caches = reference.init_caches(capacity=16)
    inputs = reference.prepare_inputs_for_generation(PROMPT, 0, caches)
    with pytest.raises(ValueError, match="the caches hold 32 positions and the engine 16"):
        step(*inputs[:-1], reference.init_caches(capacity=32))
    with pytest.raises(ValueError, match="n_new is 3 but 7 token ids are given"):
        step(*inputs[:4], torch.tensor(3), *inputs[5:])
    with pytest.raises(ValueError, match="consecutive positions from cur_pos"):
        step(inputs[0], inputs[1] + 1, *inputs[2:])
    with pytest.raises(TypeError, match="EngineStep wraps a DecodeEngine"):
        EngineStep(twin)  # type: ignore[arg-type]


def test_bound_weights_reads_a_loaded_twin_only(qwen3) -> None:
    opened, reference, twin = qwen3
    assert set(bound_weights(twin)) == {"embed_tokens", "lm_head", "norm"}
    assert "q_norm" in bound_weights(twin.layer0)
    with pytest.raises(TypeError, match="bound_weights takes a generated twin"):
        bound_weights(reference)
    spec = type(twin).decoder_spec
    assert isinstance(spec, DecoderSpec) and (spec.heads, spec.kv_heads, spec.head_dim, spec.max_positions) == (
        4, 2, 16, 2048)
    weights = twin.decoder_weights()
    assert weights.lm_head is not weights.embed and weights.cos.shape == (2048, 16)


def test_a_tied_lm_head_is_the_embedding_tensor(tmp_path: Path) -> None:
    make_checkpoint("llama_tied", tmp_path / "m", sharded=False)
    opened = open_checkpoint(tmp_path / "m", progress=False)
    twin = build_twin(opened.module, opened.config)
    twin.load(opened.resource("cpu"))
    engine = DecodeEngine(twin, 8)
    assert engine.weights.lm_head is engine.weights.embed
    layer = engine.weights.layers[0]
    w = twin.decoder_weights().layers[0]
    assert torch.equal(layer.qkv, torch.cat((w.q_proj, w.k_proj, w.v_proj)))
    assert torch.equal(layer.gate_up[0::2], w.gate_proj) and torch.equal(layer.gate_up[1::2], w.up_proj)


def test_a_kernel_set_names_every_slot() -> None:
    slots = {name for name in dir(KernelSet) if getattr(getattr(KernelSet, name), "__isabstractmethod__", False)}
    assert slots == {"embed", "norm_linear", "rope_cache", "attention", "linear_residual", "norm_swiglu", "moe",
                     "head"}
    with pytest.raises(TypeError, match="abstract"):
        KernelSet()  # type: ignore[abstract]


def test_a_session_serves_another_prompt_on_the_same_model(qwen3, capsys) -> None:
    import json

    from tilefoundry.cli.main import main
    from tilefoundry.models.session import TextSession

    from .hf_models import add_tokenizer

    opened = qwen3[0]
    add_tokenizer(opened.folder)
    session = TextSession.open(opened.folder, device="cpu", backend="twin", max_new_tokens=6, prompt="hello",
                               chat=False)
    other = session.with_prompt("a longer prompt than the first", chat=False, max_new_tokens=4)
    assert other.model is session.model and other.checkpoint is session.checkpoint
    assert other.prompt_tokens == 30 and other.max_new_tokens == 4 and other.load_seconds == 0.0
    assert session.prompt_tokens == 5
    first, second = session.generate(), other.generate()
    assert len(first.tokens) == 6 and len(second.tokens) == 4
    assert second.tokens == generate(session.model, other.prompt_ids, 4, engine=False).tokens
    with pytest.raises(ValueError, match=r"need 2059 positions, and the model holds 2048 positions"):
        session.with_prompt("x" * 59, chat=False, max_new_tokens=2000)
    with pytest.raises(ValueError, match="the prompt is empty"):
        session.with_prompt("", chat=False)
    assert main(["generate", "--ckpt", str(opened.folder), "--prompt", "hello", "--max-new-tokens", "3",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["runner"] == "decode engine (compiled kernels; CUDA graph: off)" and len(out["tokens"]) == 3
    assert main(["generate", "--ckpt", str(opened.folder), "--prompt", "hello", "--max-new-tokens", "3",
                 "--backend", "reference"]) == 0
    assert "model step]" in capsys.readouterr().err


def test_generate_runs_a_given_engine(qwen3) -> None:
    _, reference, twin = qwen3
    engine = DecodeEngine(twin, 4)
    got = generate(engine, PROMPT, 12)
    assert engine.capacity == 19 and engine.length == 18, "grown for the request, the last token never fed"
    assert got.tokens == generate(reference, PROMPT, 12).tokens and got.runner.startswith("decode engine")
    with pytest.raises(TypeError, match=r"generate\(engine=False\) runs a model's own step"):
        generate(engine, PROMPT, 2, engine=False)
    with pytest.raises(ValueError, match="the twin's weights are on cpu but device='cuda' was asked"):
        generate(engine, PROMPT, 2, device="cuda")


def test_greedy_yields_decode_and_argmax_step_by_step(qwen3) -> None:
    """DecodeEngine.greedy (generate's greedy path) on a CPU: each step's first largest logit, fed to the next
    step; leaving the loop early leaves ``length`` at the steps taken, and the engine goes on from there."""
    twin = qwen3[2]
    engine = DecodeEngine(twin, 64)
    first = int(engine.prefill(PROMPT)[-1].argmax())
    want = [first]
    for _ in range(12):
        want.append(int(engine.decode(want[-1])[-1].argmax()))
    engine.reset()
    engine.prefill(PROMPT)
    got = list(engine.greedy(first, 12))
    assert [t for t, _ in got] == want[1:] and all(finite for _, finite in got)
    assert engine.length == PROMPT.numel() + 12
    engine.reset()
    engine.prefill(PROMPT)
    run = engine.greedy(first, 12)
    taken = [next(run)[0] for _ in range(5)]
    run.close()
    assert taken == want[1:6] and engine.length == PROMPT.numel() + 5
    assert int(engine.decode(taken[-1])[-1].argmax()) == want[6], "the engine goes on from the last yielded step"
    assert list(engine.greedy(first, 0)) == []
    with pytest.raises(ValueError, match="count must be an integer >= 0"):
        list(engine.greedy(first, -1))


@pytest.mark.parametrize("poison", [None, float("nan"), float("inf")])
def test_the_default_greedy_head_picks_the_token_and_feeds_the_next_step(poison: float | None) -> None:
    """KernelSet.greedy_head (what a set without a fused greedy kernel runs in the engine's greedy graphs): the
    head's logits, (first largest logit, all finite), and the next step's token / position + 1 / context + 1 in
    column 0 of ``step`` only."""
    gen = torch.Generator().manual_seed(7)
    x, norm = torch.randn(1, 16, generator=gen), torch.rand(16, generator=gen) + 0.5
    weight = torch.randn(40, 16, generator=gen)
    weight[11] = x[0] * 4  # far above the rest, and tied with row 29: the first index wins
    weight[29] = weight[11]
    kernels = TorchKernels()
    want = torch.empty(1, 40)
    kernels.head(x, norm, weight, want, 1e-6)
    if poison is not None:
        weight[3] = poison
    logits, result = torch.empty(1, 40), torch.full((2,), -1, dtype=torch.int64)
    step = torch.tensor([[5, 9], [17, 9], [18, 9]], dtype=torch.int32)
    kernels.greedy_head(x, norm, weight, logits, result, step, 1e-6)
    token = int(torch.argmax(logits[0]))
    if poison is None:
        torch.testing.assert_close(logits, want)
        assert token == 11
    assert result.tolist() == [token, 1 if poison is None else 0]
    assert step.tolist() == [[token, 9], [18, 9], [19, 9]]


def test_the_retired_hand_written_kernels_are_refused_with_the_way_forward() -> None:
    import tilefoundry.engine as engine

    with pytest.raises(ImportError, match=r"CudaKernels was retired .*CompiledKernels, the default"):
        from tilefoundry.engine import CudaKernels  # noqa: F401
    with pytest.raises(ImportError, match="load_kernels was retired"):
        engine.load_kernels  # noqa: B018
    with pytest.raises(AttributeError, match="no attribute 'NoSuchKernels'"):
        engine.NoSuchKernels  # noqa: B018
    assert "CudaKernels" not in engine.__all__

"""The decode engine on a CUDA device, on the path generation takes there: the decode step captured once as a CUDA
graph and replayed per token. Checked against the semantic Module (evaluated on the same GPU) at context lengths
0, 1, 255 and 1024; 64 greedy tokens equal to the reference's; a broken slot caught; capture failure falling back
to eager steps with a warning; re-capture when the buffers move. Skips without CUDA."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root, for tests.*

from tests.engine_cases import (  # noqa: E402
    BROKEN,
    CAPACITY,
    CONTEXTS,
    StaleNewest,
    check_step,
    load_qwen3,
    make_long_qwen3,
    save_random_qwen3,
    step_inputs,
)
from tests.hf_models import add_tokenizer, make_checkpoint  # noqa: E402

from tilefoundry.engine import (  # noqa: E402
    CompiledKernels,
    DecodeEngine,
    StepPositions,
    TorchKernels,
    default_kernels,
)
from tilefoundry.engine.reference import rms_norm  # noqa: E402
from tilefoundry.ir.core.tree import flatten, leaf_paths  # noqa: E402
from tilefoundry.models import Sampling, generate, open_checkpoint  # noqa: E402
from tilefoundry.models.engine_step import EngineStep  # noqa: E402
from tilefoundry.models.generation import engine_for  # noqa: E402
from tilefoundry.models.twins import build_twin  # noqa: E402
from tilefoundry.runtime.check import check, parse_predicate  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

PROMPT = torch.tensor([3, 17, 42, 99, 5, 250, 7])


@pytest.fixture(scope="module")
def qwen3(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    """(folder, opened checkpoint, reference reading on cuda, loaded twin on cuda): a tiny f32 Qwen3."""
    folder = tmp_path_factory.mktemp("engine_cuda") / "qwen3"
    make_long_qwen3(folder)
    return (folder, *load_qwen3(folder, "cuda"))


@pytest.mark.parametrize("graph", [False, True])
def test_the_compiled_slots_pass_check_on_cuda(qwen3, graph: bool) -> None:
    """The slots compiled from the DSL (engine/compiled_kernels.py) jitted for CUDA, in eager steps and on the
    graph path: the decode step captured once (attention reads the whole cache, bounded by the step's positions
    on the device) and replayed at every later context length."""
    _, _, reference, twin = qwen3
    engine = DecodeEngine(twin, CAPACITY, kernels=CompiledKernels(), graph=graph)
    step = EngineStep(engine)
    for context, tokens in CONTEXTS:
        report = check_step(step, reference, step_inputs(reference, context, tokens, seed=context + tokens,
                                                         device="cuda"))
        assert report.passed, f"context {context}, {tokens} token(s), graph {graph}:\n{report}"
    if graph:
        assert engine.graph_status == "captured", engine.graph_status
        decodes = sum(1 for _, n in CONTEXTS if n == 1)
        assert engine.stats.captures == 1 and engine.stats.replays == decodes - 1, engine.stats


def test_64_greedy_tokens_through_the_compiled_slots_in_a_graph_equal_the_references(qwen3) -> None:
    _, _, reference, twin = qwen3
    engine = DecodeEngine(twin, 256, kernels=CompiledKernels())
    got = generate(engine, PROMPT, 64, device="cuda")
    assert got.runner == "decode engine (compiled kernels; CUDA graph: captured)", got.runner
    assert got.tokens == generate(reference, PROMPT, 64, device="cuda").tokens


def test_a_moe_model_through_the_compiled_slots_passes_check_on_the_graph_path(tmp_path: Path) -> None:
    """A tiny Qwen3-MoE: its one-token routed slot compiled for CUDA (top-k on the device, only the chosen
    experts' weights read), captured in the step's graph and replayed; a prompt's routed experts through the
    several-token slots (moe_route, moe_grouped), torch's slot never called."""
    make_checkpoint("qwen3_moe", tmp_path / "moe", sharded=False)
    _, reference, twin = load_qwen3(tmp_path / "moe", "cuda")
    engine = DecodeEngine(twin, 128, kernels=CompiledKernels(), graph=True)
    step = EngineStep(engine)
    for context, tokens in [(0, 7), (0, 1), (1, 1), (60, 1), (100, 1), (40, 30)]:
        inputs = step_inputs(reference, context, tokens, seed=context + tokens, device="cuda", capacity=128)
        report = check_step(step, reference, inputs)
        assert report.passed, f"context {context}, {tokens} token(s):\n{report}"
    assert engine.graph_status == "captured" and engine.stats.replays == 3, engine.stats


@pytest.mark.parametrize(("tokens", "dtype"), [(2, "f32"), (17, "f32"), (300, "f32"), (17, "bf16"), (300, "bf16")])
def test_the_several_token_moe_slots_compute_the_family_moe_on_cuda(tokens: int, dtype: str) -> None:
    """The several-token routed slots (moe_route, moe_grouped) built for CUDA and run there against the family's
    MoE (unchosen experts' weights NaN). In bf16, chunks of 17 rows and more take the tensor-core GEMM through the
    gathered experts' weights (passed on an H100, 2026-12-05)."""
    from tests.test_compiled_kernels import check_several_token_moe

    check_several_token_moe(tokens, "cuda", tol=1e-4 if dtype == "f32" else 5e-2, dtype=dtype)


def test_the_graph_path_passes_check_at_every_context_length(qwen3) -> None:
    _, _, reference, twin = qwen3
    engine = DecodeEngine(twin, CAPACITY)
    step = EngineStep(engine)
    for context, tokens in CONTEXTS:
        report = check_step(step, reference, step_inputs(reference, context, tokens, seed=context + tokens,
                                                         device="cuda"))
        assert report.passed, f"context {context}, {tokens} token(s):\n{report}"
    assert engine.graph_status == "captured"
    decodes = sum(1 for _, n in CONTEXTS if n == 1)
    assert engine.stats.captures == 1 and engine.stats.replays == decodes - 1, engine.stats
    assert engine.stats.eager_steps == 1, "only the warm-up before the capture runs eagerly"


@pytest.mark.parametrize("broken", sorted(BROKEN))
def test_a_broken_kernel_slot_fails_the_check_on_the_graph_path(qwen3, broken: str) -> None:
    _, _, reference, twin = qwen3
    engine = DecodeEngine(twin, CAPACITY, kernels=BROKEN[broken]())
    step = EngineStep(engine)
    for context, tokens in [(0, 1), (1, 1), (255, 1), (1024, 1)]:
        report = check_step(step, reference, step_inputs(reference, context, tokens, seed=context, device="cuda"))
        assert not report.passed, f"{broken} passed at context {context}"
    assert engine.graph_status == "captured" and engine.stats.replays == 3


def test_64_greedy_tokens_equal_the_references(qwen3) -> None:
    _, _, reference, twin = qwen3
    want = generate(reference, PROMPT, 64, device="cuda")
    got = generate(twin, PROMPT, 64, device="cuda")
    assert got.runner == "decode engine (torch kernels; CUDA graph: captured)", got.runner
    assert len(set(want.tokens)) > 5 and got.tokens == want.tokens
    engine = engine_for(twin, 1, "cuda")
    replays = engine.stats.replays
    again = generate(twin, PROMPT[:3], 64, device="cuda")  # another prompt: the same graph, replayed
    assert engine.stats.replays == replays + 63 and engine.stats.captures == 2, "greedy: two graphs, replayed"
    assert isinstance(engine.greedy_graph, torch.cuda.CUDAGraph)
    assert again.tokens == generate(reference, PROMPT[:3], 64, device="cuda").tokens


def test_sampled_decoding_on_the_graph_path(qwen3) -> None:
    _, _, _, twin = qwen3
    sampling = Sampling(temperature=0.8, top_p=0.95, seed=5)
    engine = generate(twin, PROMPT, 32, sampling=sampling, device="cuda")
    step = generate(twin, PROMPT, 32, sampling=sampling, device="cuda", engine=False)
    assert engine.runner.endswith("CUDA graph: captured)") and engine.tokens == step.tokens
    greedy = generate(twin, PROMPT, 32, device="cuda").tokens
    assert generate(twin, PROMPT, 32, sampling=Sampling(temperature=0.5, top_k=1, seed=1), device="cuda").tokens \
        == greedy


class HostSyncKernels(TorchKernels):
    """Reads the position on the host in every attention: fine eagerly, impossible inside a CUDA graph."""

    def attention(self, q, cache_k, cache_v, out, scale, at: StepPositions) -> None:  # noqa: ANN001
        host = int(at.position.item())
        super().attention(q, cache_k, cache_v, out, scale, StepPositions(at.position, at.context, host))


def test_a_failed_capture_falls_back_to_eager_steps_with_one_warning(qwen3) -> None:
    _, _, reference, twin = qwen3
    engine = DecodeEngine(twin, 80, kernels=HostSyncKernels())
    engine.prefill(PROMPT)
    with pytest.warns(RuntimeWarning, match=r"DecodeEngine: CUDA graph capture failed \(.+\); decoding with eager "
                                            r"steps from now on") as caught:
        first = engine.decode(11).clone()
    ours = [str(w.message) for w in caught if "DecodeEngine" in str(w.message)]
    assert len(ours) == 1 and "\n" not in ours[0], ours
    assert engine.graph_status.startswith("eager: CUDA graph capture failed")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once: later steps say nothing
        engine.decode(12)
    assert engine.stats.captures == 0 and engine.stats.eager_steps == 2
    caches = reference.init_caches(capacity=80, device="cuda")
    out = reference(*reference.prepare_inputs_for_generation(torch.cat([PROMPT, torch.tensor([11])]), 0, caches,
                                                            device="cuda"))
    torch.testing.assert_close(first[0], out[0][-1], rtol=1e-4, atol=1e-5)
    tokens = generate(twin, PROMPT, 16, device="cuda", engine=True).tokens
    assert tokens == generate(reference, PROMPT, 16, device="cuda").tokens


def test_the_graph_is_captured_again_when_its_buffers_move(qwen3) -> None:
    _, _, reference, twin = qwen3
    engine = DecodeEngine(twin, 40)
    engine.prefill(PROMPT)
    for token in (5, 6, 7):
        engine.decode(token)
    assert engine.stats.captures == 1 and engine.stats.replays == 2
    old = engine.caches  # held, so the new cache cannot take the old one's place
    engine.resize(CAPACITY)
    assert engine.caches[0][0].data_ptr() != old[0][0].data_ptr() and engine.length == 0
    step = EngineStep(engine)
    for context in (1, 255, 1024):  # a graph still reading the old cache would fail these
        report = check_step(step, reference, step_inputs(reference, context, 1, seed=context, device="cuda"))
        assert report.passed, f"context {context}:\n{report}"
    assert engine.stats.captures == 2 and engine.stats.replays == 4 and engine.graph_status == "captured"


def test_bf16_engine_follows_the_twin_step(tmp_path: Path) -> None:
    """bf16 on the graph path: the first step's logits within bf16 rounding of the twin's own step."""
    folder = tmp_path / "bf16"
    make_long_qwen3(folder).to(torch.bfloat16).save_pretrained(str(folder))
    opened = open_checkpoint(folder, progress=False)
    twin = build_twin(opened.module, opened.config)
    twin.load(opened.resource("cuda"))
    engine = DecodeEngine(twin, 64)
    engine.prefill(PROMPT)
    got = engine.decode(11).float()
    caches = twin.init_caches(capacity=64, device="cuda")
    ids = torch.cat([PROMPT, torch.tensor([11])])
    want = twin(*twin.prepare_inputs_for_generation(ids, 0, caches, device="cuda"))[0][-1].float()
    assert engine.graph_status == "captured" and got.dtype == torch.float32
    assert (got[0] - want).norm() / want.norm() < 2e-2


def test_the_generate_command_decodes_on_the_graph(qwen3) -> None:
    folder = qwen3[0]
    add_tokenizer(folder)
    done = subprocess.run([sys.executable, "-m", "tilefoundry.cli.main", "generate", "--ckpt", str(folder),
                           "--prompt", "hello there", "--max-new-tokens", "24", "--backend", "twin", "--device",
                           "cuda", "--json"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["runner"] == "decode engine (torch kernels; CUDA graph: captured)"
    assert len(out["tokens"]) == 24 and out["decode_tokens_per_second"] > 0 and out["prefill_ms"] > 0


# ---- the compiled slots on a bf16 model on the graph path: what bench/decode.py times ---------------------------

BF16_BOUNDS = [parse_predicate("rel_l2:max=3e-2"), parse_predicate("cosine:min=0.999")]
"""bf16 engine (fused kernels, f32 accumulation) against the bf16 evaluator: bf16 rounding at different points."""


@pytest.fixture(scope="module")
def qwen3_bf16(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    """(reference reading, loaded twin) on cuda: a tiny bf16 Qwen3 (head_dim 64)."""
    folder = tmp_path_factory.mktemp("engine_cuda_bf16") / "qwen3"
    save_random_qwen3(folder, 1, torch.bfloat16, vocab_size=512, hidden_size=256, intermediate_size=512,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                      max_position_embeddings=2048)
    return load_qwen3(folder, "cuda")[1:]


def check_bf16(step: EngineStep, reference, inputs: tuple):  # noqa: ANN001, ANN201
    _, spec = flatten(reference(*inputs), lambda t: isinstance(t, torch.Tensor))
    return check(step, reference, inputs, expect={path: BF16_BOUNDS for path in leaf_paths(spec)})


def test_a_bf16_model_on_cuda_runs_the_compiled_slots_by_default(qwen3_bf16) -> None:
    _, twin = qwen3_bf16
    assert default_kernels(torch.bfloat16, torch.device("cuda")).name == "compiled"
    assert default_kernels(torch.float16, torch.device("cuda")).name == "torch"
    assert DecodeEngine(twin, CAPACITY).kernels.name == "compiled"


def test_the_compiled_bf16_slots_pass_check_on_the_graph_path(qwen3_bf16) -> None:
    reference, twin = qwen3_bf16
    engine = DecodeEngine(twin, CAPACITY, kernels=CompiledKernels())
    assert engine.kernels.name == "compiled"
    step = EngineStep(engine)
    for context, tokens in CONTEXTS:
        report = check_bf16(step, reference, step_inputs(reference, context, tokens, seed=context + tokens,
                                                         device="cuda"))
        assert report.passed, f"context {context}, {tokens} token(s):\n{report}"
    assert engine.graph_status == "captured" and engine.stats.captures == 1


class StaleNewestCompiled(StaleNewest, CompiledKernels):
    """Broken: the compiled attention never sees the step's own key and value (the cache's newest entry)."""


class SwappedSwigluCompiled(CompiledKernels):
    """Broken: the gate/up slot's SwiGLU takes gate and up the wrong way round, silu(up) * gate."""

    def norm_swiglu(self, x, norm, gate_up, out, eps) -> None:  # noqa: ANN001
        y = torch.mm(rms_norm(x, norm, eps), gate_up.t()).view(x.shape[0], -1, 2)
        torch.mul(torch.nn.functional.silu(y[..., 1]), y[..., 0], out=out)


# Under bf16 bounds a broken kernel must move the result well past bf16 noise: the stale attention is
# checked where the newest entry weighs much (short contexts; at 1024 it is one key in a thousand).
BROKEN_BF16 = {StaleNewestCompiled: (0, 1, 4), SwappedSwigluCompiled: (0, 1, 255, 1024)}


@pytest.mark.parametrize("broken", sorted(BROKEN_BF16, key=lambda k: k.__name__))
def test_a_broken_bf16_slot_fails_the_check_on_the_graph_path(qwen3_bf16, broken: type) -> None:
    reference, twin = qwen3_bf16
    engine = DecodeEngine(twin, CAPACITY, kernels=broken())
    step = EngineStep(engine)
    contexts = BROKEN_BF16[broken]
    for context in contexts:
        report = check_bf16(step, reference, step_inputs(reference, context, 1, seed=context, device="cuda"))
        assert not report.passed, f"{broken.__name__} passed at context {context}"
    assert engine.graph_status == "captured" and engine.stats.replays == len(contexts) - 1


def test_compiled_bf16_greedy_tokens_follow_the_reference_where_it_is_clear(qwen3_bf16) -> None:
    """64 greedy tokens, teacher-forced: the engine's choice equals the bf16 reference's wherever the reference's
    top-2 logit margin is clear of bf16 noise (most steps of a random model)."""
    reference, twin = qwen3_bf16
    want = generate(reference, PROMPT, 64, device="cuda").tokens
    ids = torch.cat([PROMPT, torch.tensor(want)])
    caches = reference.init_caches(capacity=ids.numel() + 1, device="cuda")
    logits = reference(*reference.prepare_inputs_for_generation(ids, 0, caches, device="cuda"))[0].float()
    engine = DecodeEngine(twin, ids.numel() + 1, kernels=CompiledKernels())
    choice = [int(engine.prefill(PROMPT)[-1].argmax())]
    choice += [int(engine.decode(t)[-1].argmax()) for t in want[:-1]]
    top2 = logits[PROMPT.numel() - 1: -1].topk(2, dim=-1).values
    clear = (top2[:, 0] - top2[:, 1]) > 0.1
    assert int(clear.sum()) >= 32, "too few clear steps to judge"
    wrong = [i for i in range(64) if clear[i] and choice[i] != want[i]]
    assert not wrong, f"steps {wrong} chose other tokens than the reference although its margin was clear"
    assert engine.graph_status == "captured" and engine.stats.replays == 62


def test_pipelined_greedy_decoding_equals_step_by_step_decoding(qwen3_bf16) -> None:
    """generate's greedy path (the step picks its token on the device, the next queued before it is read) gives
    the tokens of decode() + argmax one step at a time, on the same kernels (the default: the compiled slots, whose
    greedy head chooses on the device); a stop token ends it there."""
    _, twin = qwen3_bf16
    got = generate(twin, PROMPT, 48, device="cuda")
    engine = engine_for(twin, 1, "cuda")
    assert engine.kernels.name == "compiled" and got.runner.endswith("CUDA graph: captured)")
    engine.reset()
    want = [int(engine.prefill(PROMPT)[-1].argmax())]
    while len(want) < 48:
        want.append(int(engine.decode(want[-1])[-1].argmax()))
    assert got.tokens == want
    stop = want[20]
    first = want.index(stop)
    stopped = generate(twin, PROMPT, 48, device="cuda", stop_tokens=[stop])
    assert stopped.tokens == want[:first + 1]
    assert stopped.stopped_by == "eos" and stopped.stop_token == stop
    assert generate(twin, PROMPT, 48, device="cuda").tokens == want, "an early stop leaves the engine reusable"

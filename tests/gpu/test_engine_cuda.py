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

from tests.engine_cases import BROKEN, CAPACITY, CONTEXTS, check_step, make_long_qwen3, step_inputs  # noqa: E402
from tests.hf_models import add_tokenizer  # noqa: E402

from tilefoundry.engine import DecodeEngine, StepPositions, TorchKernels  # noqa: E402
from tilefoundry.models import Sampling, generate, open_checkpoint  # noqa: E402
from tilefoundry.models.engine_step import EngineStep  # noqa: E402
from tilefoundry.models.generation import engine_for  # noqa: E402
from tilefoundry.models.twins import build_twin  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

PROMPT = torch.tensor([3, 17, 42, 99, 5, 250, 7])


@pytest.fixture(scope="module")
def qwen3(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    """(folder, opened checkpoint, reference reading on cuda, loaded twin on cuda): a tiny f32 Qwen3."""
    folder = tmp_path_factory.mktemp("engine_cuda") / "qwen3"
    make_long_qwen3(folder)
    opened = open_checkpoint(folder, progress=False)
    twin = build_twin(opened.module, opened.config)
    twin.load(opened.resource("cuda"))
    return folder, opened, opened.module.load(opened.resource("cuda")), twin


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
    assert engine.stats.replays == replays + 63 and engine.stats.captures == 1
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

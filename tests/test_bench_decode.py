"""bench/decode.py on the CPU: every runner that runs there (the decode engine, transformers eager, the plain-torch
static-cache peer) generates on a tiny random Qwen3, the tokens agree with the peer's, and the JSON holds
each measurement. Guards the bench the GPU run depends on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_cpu_bench_runs_every_runner_and_agrees(tmp_path: Path) -> None:
    out = tmp_path / "decode.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "decode.py"), "--device", "cpu", "--shape", "tiny", "--runners",
         "project,hf,torch", "--kernels", "compiled,torch", "--no-compile", "--new-tokens", "12", "--prefill-tokens",
         "20", "--rounds", "1", "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads(out.read_text())
    assert set(report["results"]) == {"project", "project-torch", "hf", "torch"}
    for key, result in report["results"].items():
        assert result["error"] is None and result["tokens_per_s"] > 0 and len(result["tokens"]) == 12, key
        assert result["prefill_s"] > 0, key
    agreement = report["agreement_with_torch_peer"]
    assert agreement["project"]["ok"] and agreement["project-torch"]["ok"] and agreement["hf"]["ok"], agreement
    # the decode engine, eager on a CPU, once per kernel set, each result naming the set that ran
    assert report["results"]["project"]["label"] == "TileFoundry engine (compiled kernels)"
    assert [report["results"][k]["kernels"] for k in ("project", "project-torch", "hf")] == ["compiled", "torch", None]
    assert "=== batch-1 greedy decode, tiny" in proc.stdout


def test_bench_refuses_an_unknown_runner() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "decode.py"), "--device", "cpu", "--runners",
                           "project,vllm"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "unknown runner(s) vllm" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_bench_refuses_an_unknown_kernel_set() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "decode.py"), "--device", "cpu", "--kernels",
                           "compiled,triton"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "unknown kernel set(s) triton; choose from compiled, torch" in proc.stderr


def test_bench_refuses_the_retired_hand_written_kernel_set() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "decode.py"), "--device", "cpu", "--kernels",
                           "cuda"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "unknown kernel set(s) cuda; choose from compiled, torch" in proc.stderr
    assert "was retired: compiled replaces it" in proc.stderr


def test_cpu_bench_runs_the_engine_split_over_two_ranks(tmp_path: Path) -> None:
    out = tmp_path / "decode.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "decode.py"), "--device", "cpu", "--shape", "tiny", "--runners",
         "project,torch", "--no-compile", "--tp", "1,2", "--new-tokens", "8", "--prefill-tokens", "20", "--rounds",
         "1", "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads(out.read_text())
    split = report["results"]["project-tp2"]
    assert split["error"] is None and split["label"] == "TileFoundry engine, tp 2" and split["prefill_s"] > 0
    assert split["tokens"] == report["results"]["project"]["tokens"] and len(split["tokens"]) == 8
    assert report["agreement_with_torch_peer"]["project-tp2"]["ok"]


def test_bench_refuses_a_bad_rank_count() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "decode.py"), "--device", "cpu", "--tp", "1,x"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--tp takes comma-separated rank counts, got '1,x'" in proc.stderr

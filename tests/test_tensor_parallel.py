"""Tensor-parallel decoding over gloo, as CPU processes (``engine/parallel.py``, ``engine/parallel_kernels.py``,
``engine/ranks.py``): each family's tiny random model split over two ranks passes ``check`` against the semantic
Module (logits and the whole caches, every rank's heads gathered) and decodes the greedy tokens of one rank;
sizes that do not divide are refused by name; a rank that dies makes the other fail with a clear error, not hang.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests import tp_worker
from tilefoundry.engine import DecodeEngine, DecoderSpec, TensorParallel, TorchKernels
from tilefoundry.engine.parallel import local_spec, shard_weights
from tilefoundry.engine.ranks import RankFailedError, run_ranks
from tilefoundry.models import open_checkpoint
from tilefoundry.models.tensor_parallel import load_rank_twin
from tilefoundry.models.twins import build_twin

from .hf_models import add_tokenizer, make_chat_checkpoint, make_checkpoint


def _results(out: Path, world: int) -> list[dict]:
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(world)]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tp")
    folders = {}
    for family in ("llama", "llama_tied", "qwen2", "qwen3", "qwen3_moe"):
        make_checkpoint(family, root / family, sharded=False)
        folders[family] = root / family
    return folders


@pytest.mark.parametrize(("family", "kernels"), [
    ("llama", "torch"), ("llama_tied", "torch"), ("qwen2", "torch"), ("qwen3", "torch"), ("qwen3_moe", "torch"),
    ("qwen3", "compiled"), ("qwen3_moe", "compiled")])
def test_two_ranks_pass_check_and_decode_the_one_rank_tokens(checkpoints, tmp_path: Path, family: str,
                                                              kernels: str) -> None:
    run_ranks(2, tp_worker.check_family, (str(checkpoints[family]), kernels, str(tmp_path)), timeout_s=120)
    for rank, got in enumerate(_results(tmp_path, 2)):
        assert got["kernels"] == f"{kernels}, tensor parallel over 2 ranks"
        assert got["local_heads"] == 1  # of the models' 2 key/value heads
        for report in got["reports"]:
            assert report["passed"], f"{family} rank {rank} at {report['step']}:\n{report['text']}"
        assert got["logits_max_diff"] < 1e-4, (family, rank)
        assert got["tokens"] == got["want"], (family, rank)


@pytest.mark.parametrize("family", ["llama_tied", "qwen2", "qwen3_moe"])
def test_two_ranks_of_twins_read_slice_by_slice_pass_check(checkpoints, tmp_path: Path, family: str) -> None:
    run_ranks(2, tp_worker.check_family, (str(checkpoints[family]), "torch", str(tmp_path), True), timeout_s=120)
    for rank, got in enumerate(_results(tmp_path, 2)):
        for report in got["reports"]:
            assert report["passed"], f"{family} rank {rank} at {report['step']}:\n{report['text']}"
        assert got["logits_max_diff"] < 1e-4 and got["tokens"] == got["want"], (family, rank)


@pytest.mark.parametrize("family", ["llama", "llama_tied", "qwen2", "qwen3", "qwen3_moe"])
def test_a_rank_twin_holds_the_slice_the_engine_would_cut(checkpoints, family: str) -> None:
    """Read slice by slice from the file (models/tensor_parallel.py) or cut from the whole weights in memory
    (engine/parallel.py): the same tensors."""
    opened = open_checkpoint(checkpoints[family], progress=False)
    whole = build_twin(opened.module, opened.config)
    whole.load(opened.resource("cpu"))
    weights, spec = whole.decoder_weights(), type(whole).decoder_spec
    for rank in (0, 1):
        twin = load_rank_twin(opened, "cpu", TensorParallel(rank, 2))
        assert type(twin).decoder_rank == (rank, 2) and type(twin).decoder_spec == local_spec(spec, 2)
        got, want = twin.decoder_weights().tensors(), shard_weights(weights, spec, TensorParallel(rank, 2)).tensors()
        assert got.keys() == want.keys()
        for name in want:
            assert torch.equal(got[name], want[name]), (family, rank, name)
        assert (twin.decoder_weights().lm_head is twin.decoder_weights().embed) == (family == "llama_tied")
        with pytest.raises(ValueError, match=rf"the twin holds tensor-parallel rank {rank} of 2's slice"):
            DecodeEngine(twin, 16, kernels=TorchKernels())


def test_ranks_opening_an_unprepared_moe_checkpoint_at_once_share_one_prepare(checkpoints, tmp_path: Path,
                                                                              monkeypatch) -> None:
    """Per-expert weights are stacked into the cache once: the first rank prepares, the other waits for it (both
    used to prepare, and the second replaced the folder the first had opened)."""
    monkeypatch.setenv("TILEFOUNDRY_CACHE", str(tmp_path / "cache"))  # nothing prepared yet; the ranks inherit it
    run_ranks(2, tp_worker.open_at_once, (str(checkpoints["qwen3_moe"]), str(tmp_path)), timeout_s=120)
    got = _results(tmp_path, 2)
    assert got[0] == got[1] and got[0]["layers"] == 3
    assert Path(got[0]["weights_dir"]).parent == tmp_path / "cache" / "prepared"


def test_a_slice_is_read_without_reading_the_whole_tensor(checkpoints, monkeypatch) -> None:
    from tilefoundry.runtime.resource.safetensors_resource import SafetensorsResource

    opened = open_checkpoint(checkpoints["qwen3"], progress=False)
    layer = opened.resource("cpu").subtree("model").subtree("layers").subtree("0").subtree("self_attn")
    whole = layer.load("o_proj.weight")
    assert layer.shape_of("o_proj.weight") == tuple(whole.shape)

    def refused(*args: object) -> None:
        raise AssertionError("a slice read the whole tensor")

    monkeypatch.setattr(SafetensorsResource, "_read", refused)
    assert torch.equal(layer.load_slice("o_proj.weight", 1, 32, 64), whole[:, 32:64])
    assert layer.shape_of("o_proj.weight") == tuple(whole.shape)
    with pytest.raises(ValueError, match=r"load_slice\('o_proj.weight', dim=1, \[32, 129\)\): the tensor has shape "
                                         r"\(64, 128\)"):
        layer.load_slice("o_proj.weight", 1, 32, 129)
    with pytest.raises(ValueError, match=r"non-empty range of one of its axes"):
        layer.load_slice("o_proj.weight", 2, 0, 1)


def test_sizes_that_do_not_divide_are_refused_by_name(checkpoints) -> None:
    spec = DecoderSpec(hidden=64, heads=8, kv_heads=2, head_dim=16, vocab=256, eps=1e-6, max_positions=64)
    with pytest.raises(ValueError, match=r"num_key_value_heads = 2 is not a multiple of 4; choose a --tp"):
        local_spec(spec, 4)
    with pytest.raises(ValueError, match=r"num_attention_heads = 6 is not a multiple of 4"):
        local_spec(DecoderSpec(hidden=64, heads=6, kv_heads=6, head_dim=16, vocab=256, eps=1e-6,
                               max_positions=64), 4)
    with pytest.raises(ValueError, match=r"vocab_size = 255 is not a multiple of 2"):
        local_spec(DecoderSpec(hidden=64, heads=2, kv_heads=2, head_dim=16, vocab=255, eps=1e-6,
                               max_positions=64), 2)
    opened = open_checkpoint(checkpoints["llama"], progress=False)
    twin = build_twin(opened.module, opened.config)
    twin.load(opened.resource("cpu"))
    weights, spec = twin.decoder_weights(), type(twin).decoder_spec  # intermediate_size 96
    many = dataclasses.replace(spec, heads=64, kv_heads=64, head_dim=2)  # heads that divide over 64 ranks
    with pytest.raises(ValueError, match=r"layer 0's intermediate_size = 96 is not a multiple of 64"):
        shard_weights(weights, many, TensorParallel(0, 64))


def test_a_rank_slice_is_its_heads_and_vocabulary_rows(checkpoints) -> None:
    opened = open_checkpoint(checkpoints["qwen3_moe"], progress=False)
    twin = build_twin(opened.module, opened.config)
    twin.load(opened.resource("cpu"))
    weights, spec = twin.decoder_weights(), type(twin).decoder_spec
    part = shard_weights(weights, spec, TensorParallel(1, 2))
    d = spec.head_dim
    assert torch.equal(part.embed, weights.embed[128:])
    dense, routed = weights.layers[1], weights.layers[0]  # mlp_only_layers=[1]
    assert torch.equal(part.layers[1].q_proj, dense.q_proj[2 * d:])  # query heads 2, 3 of 4
    assert torch.equal(part.layers[1].k_proj, dense.k_proj[d:])  # key/value head 1 of 2
    assert torch.equal(part.layers[1].o_proj, dense.o_proj[:, 2 * d:])
    assert torch.equal(part.layers[1].down_proj, dense.down_proj[:, 48:])
    assert torch.equal(part.layers[0].experts_up, routed.experts_up[:, 16:])
    assert torch.equal(part.layers[0].experts_down, routed.experts_down[:, :, 16:])
    assert part.layers[0].router is routed.router and part.final_norm is weights.final_norm


def test_an_engine_refuses_a_group_this_process_is_not_in(checkpoints) -> None:
    opened = open_checkpoint(checkpoints["llama"], progress=False)
    twin = build_twin(opened.module, opened.config)
    twin.load(opened.resource("cpu"))
    with pytest.raises(ValueError, match=r"TensorParallel\(rank=1, world=2\): torch.distributed is not initialised"):
        DecodeEngine(twin, 16, kernels=TorchKernels(), parallel=TensorParallel(1, 2))
    with pytest.raises(ValueError, match=r"rank must lie in \[0, 2\), got 2"):
        TensorParallel(2, 2)


def test_a_rank_that_raises_is_named(tmp_path: Path) -> None:
    with pytest.raises(RankFailedError, match=r"tensor parallel rank \d of 2 failed:[\s\S]*FileNotFoundError"):
        run_ranks(2, tp_worker.check_family, (str(tmp_path / "missing"), "torch", str(tmp_path)), timeout_s=30)


def test_a_rank_that_dies_makes_the_other_fail_instead_of_hanging(checkpoints, tmp_path: Path) -> None:
    """Ranks joined by hand (as torchrun starts them: nobody ends the others when one dies)."""
    ctx = multiprocessing.get_context("spawn")
    store = str(tmp_path / "group")
    args = (2, store, 20.0, str(checkpoints["qwen3"]), str(tmp_path))
    ranks = [ctx.Process(target=tp_worker.join_by_hand, args=(r, *args)) for r in range(2)]
    start = time.monotonic()
    for p in ranks:
        p.start()
    for p in ranks:
        p.join(timeout=240)
    alive = [p.is_alive() for p in ranks]
    for p in ranks:
        if p.is_alive():
            p.kill()
    assert not any(alive), f"a rank still runs after {time.monotonic() - start:.0f} s: {alive}"
    assert ranks[1].exitcode == 3
    got = json.loads((tmp_path / "rank0.json").read_text())
    assert got["error"] == "TensorParallelError", got
    assert "rank 0 of 2: the embedding collective failed" in got["message"]
    assert "another rank died or stopped answering" in got["message"]


@pytest.fixture(scope="module")
def ckpt_with_tokenizer(checkpoints) -> Path:
    folder = checkpoints["qwen3"]
    add_tokenizer(folder)
    return folder


def _generate(*argv: str, runner: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    command = [*runner, "-m", "tilefoundry", "generate", *argv] if runner else [
        sys.executable, "-m", "tilefoundry", "generate", *argv]
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


def test_generate_tp_2_prints_the_one_rank_tokens_once(ckpt_with_tokenizer: Path) -> None:
    argv = ("--ckpt", str(ckpt_with_tokenizer), "--prompt", "Hello there", "--max-new-tokens", "6", "--json")
    one, two = _generate(*argv), _generate(*argv, "--tp", "2")
    assert one.returncode == 0, one.stderr
    assert two.returncode == 0, two.stderr
    assert len(two.stdout.splitlines()) == 1  # rank 0 alone speaks
    got, want = json.loads(two.stdout), json.loads(one.stdout)
    assert got["tokens"] == want["tokens"] and len(got["tokens"]) == 6
    assert got["tp"] == 2 and "tensor parallel over 2 ranks" in got["runner"]
    assert "Terminating process" not in two.stderr and "terminate called" not in two.stderr


def test_generate_tp_runs_as_torchruns_ranks(ckpt_with_tokenizer: Path) -> None:
    torchrun = Path(sys.executable).with_name("torchrun")
    argv = ("--ckpt", str(ckpt_with_tokenizer), "--prompt", "Hello there", "--max-new-tokens", "4", "--json")
    ran = _generate(*argv, "--tp", "2", runner=(str(torchrun), "--nproc-per-node", "2"))
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["tokens"] == json.loads(_generate(*argv).stdout)["tokens"]
    refused = _generate(*argv, "--tp", "4", runner=(str(torchrun), "--nproc-per-node", "2"))
    assert refused.returncode != 0
    assert "--tp 4 but torchrun started 2 ranks; give --tp 2" in refused.stderr


@pytest.fixture(scope="module")
def chat_ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_chat_checkpoint("qwen3", tmp_path_factory.mktemp("tp_chat") / "qwen3")


def test_chat_tp_2_answers_as_one_rank_does_and_waits_out_a_slow_turn(chat_ckpt: Path) -> None:
    """Three turns through a pipe: an answer, a turn too long for the model's 128 positions (refused, one line,
    the chat going on: status 2), and a turn typed after a pause longer than --tp-timeout (the ranks but rank 0
    wait for it in collectives: rank 0 tells them every second that no line has come)."""
    argv = [sys.executable, "-m", "tilefoundry", "chat", "--ckpt", str(chat_ckpt), "--max-new-tokens", "4"]
    turns = ["Hi there", "x" * 300, "Name a prime."]
    one = subprocess.run(argv, input="".join(t + "\n" for t in turns), capture_output=True, text=True, timeout=600)
    assert one.returncode == 2, one.stderr  # the long turn was refused
    pause_s, timeout_s = 15.0, 12.0
    two = subprocess.Popen([*argv, "--tp", "2", "--tp-timeout", str(timeout_s)], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert two.stdin is not None and two.stderr is not None
        two.stdin.write(turns[0] + "\n" + turns[1] + "\n")
        two.stdin.flush()
        said = []
        while not any("refused:" in line for line in said):  # the second turn answered (refused): rank 0 waits
            line = two.stderr.readline()
            assert line, "".join(said)
            said.append(line)
        time.sleep(pause_s)
        out, err = two.communicate(turns[2] + "\n", timeout=600)
    finally:
        if two.poll() is None:
            two.kill()
    err = "".join(said) + err
    assert two.returncode == 2, err
    assert out == one.stdout and out.count("\n") >= 2  # both answers, as one process gave them
    refusals = [line for line in err.splitlines() if "refused:" in line]
    assert len(refusals) == 1 and refusals[0].startswith("tilefoundry chat: refused: the prompt ("), err
    assert "TensorParallelError" not in err and "Terminating process" not in err


@pytest.mark.parametrize(("extra", "words"), [
    (("--tp", "4"), "refused: tensor parallel over 4 ranks: the model's num_key_value_heads = 2 is not a multiple "
                    "of 4; choose a --tp that divides it"),
    (("--tp", "2", "--backend", "reference"), "refused: --tp 2 splits the runtime twin's decode engine over ranks"),
    (("--tp", "0"), "argument --tp"),
])
def test_generate_tp_refusals_are_one_line(ckpt_with_tokenizer: Path, extra: tuple[str, ...], words: str) -> None:
    ran = _generate("--ckpt", str(ckpt_with_tokenizer), "--prompt", "Hi", "--max-new-tokens", "2", *extra)
    assert ran.returncode == 2
    lines = [line for line in ran.stderr.splitlines() if "Warning" not in line and line.strip()]
    assert len(lines) == 1 and words in lines[0], ran.stderr


def test_the_greedy_choice_is_gathered_as_torch_argmax_makes_it(tmp_path: Path) -> None:
    """(largest logit, its index, all finite) from each rank: the first largest across ranks, the first NaN."""
    run_ranks(2, tp_worker.greedy_choices, (str(tmp_path),), timeout_s=60)
    for rank, got in enumerate(_results(tmp_path, 2)):
        for name, case in got.items():
            assert case["result"] == case["want"], (rank, name, case)
            assert case["step"] == [case["want"][0], 1, 1], (rank, name, case)
    assert _results(tmp_path, 2)[0]["tie across ranks"]["result"] == [3, 1]

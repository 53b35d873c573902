"""What each rank of tests/test_tensor_parallel.py's groups runs (module-level functions: every rank is a fresh
interpreter, started by ``run_ranks`` or by hand). Each writes what it saw to ``out/rank<r>.json``."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import torch

from tilefoundry.engine import CompiledKernels, DecodeEngine, TensorParallel, TensorParallelError, TorchKernels
from tilefoundry.ir.core.tree import flatten, leaf_paths
from tilefoundry.models import open_checkpoint
from tilefoundry.models.engine_step import EngineStep
from tilefoundry.models.tensor_parallel import load_rank_twin
from tilefoundry.models.twins import build_twin
from tilefoundry.runtime.check import check, parse_predicate

CAPACITY = 96
# (cached positions, tokens of the step): a prompt, one token on an empty cache, a decode step deep into the
# cache, a chunk of several tokens deep into it.
STEPS = [(0, 7), (0, 1), (40, 1), (40, 5)]
F32 = [parse_predicate("rel_l2:max=1e-5"), parse_predicate("cosine:min=0.99999")]
PROMPT = [5, 17, 42, 99, 3, 250, 8]
NEW_TOKENS = 12


def _write(out: str, rank: int, result: dict) -> None:
    Path(out, f"rank{rank}.json").write_text(json.dumps(result))


def _loaded(folder: str):  # noqa: ANN202 - (reference, twin)
    torch.set_num_threads(1)
    opened = open_checkpoint(folder, progress=False)
    reference = opened.module.load(opened.resource("cpu"))
    twin = build_twin(opened.module, opened.config)
    twin.load(opened.resource("cpu"))
    return reference, twin


def _greedy(engine: DecodeEngine) -> list[int]:
    engine.reset()
    token = int(torch.argmax(engine.prefill(torch.tensor(PROMPT))[-1]))
    return [token] + [t for t, _ in engine.greedy(token, NEW_TOKENS - 1)]


def check_family(tp: TensorParallel, folder: str, kernels: str, out: str, sliced: bool = False) -> None:
    """The tensor-parallel engine's steps through ``check`` against the semantic Module, and its greedy tokens
    beside a one-rank engine's on the same weights; ``sliced``: the rank's engine built from the twin of its slice
    (each split weight read as only that slice), else from the whole twin, split in memory."""
    reference, twin = _loaded(folder)
    made = CompiledKernels() if kernels == "compiled" else TorchKernels()
    mine = twin
    if sliced:
        mine = load_rank_twin(open_checkpoint(folder, progress=False), "cpu", tp)
    engine = DecodeEngine(mine, CAPACITY, kernels=made, parallel=tp)
    reports = []
    for context, tokens in STEPS:
        gen = torch.Generator().manual_seed(context + tokens)
        caches = tuple((torch.randn(k.shape, generator=gen), torch.randn(v.shape, generator=gen))
                       for k, v in reference.init_caches(capacity=CAPACITY))
        ids = torch.randint(0, 256, (context + tokens,), generator=gen)
        inputs = reference.prepare_inputs_for_generation(ids, context, caches)
        _, spec = flatten(reference(*inputs), lambda t: isinstance(t, torch.Tensor))
        expect = {path: F32 for path in leaf_paths(spec)}
        report = check(EngineStep(engine), reference, inputs, expect=expect)
        reports.append({"step": [context, tokens], "passed": report.passed, "text": str(report)})
    single = DecodeEngine(twin, CAPACITY, kernels=TorchKernels(), parallel=TensorParallel(0, 1))
    engine.reset()
    logits = engine.prefill(torch.tensor(PROMPT), all_logits=True).clone()
    want = single.prefill(torch.tensor(PROMPT), all_logits=True)
    _write(out, tp.rank, {
        "kernels": engine.kernels.name, "local_heads": engine.caches[0][0].shape[1], "reports": reports,
        "logits_max_diff": float((logits - want).abs().max()), "tokens": _greedy(engine), "want": _greedy(single),
    })


def one_rank_dies(tp: TensorParallel, folder: str, out: str) -> None:
    """Rank 1 exits after building its engine; rank 0's next step must fail with a clear error, not hang."""
    _, twin = _loaded(folder)
    engine = DecodeEngine(twin, CAPACITY, kernels=TorchKernels(), parallel=tp)
    if tp.rank == 1:
        os._exit(3)
    start = time.monotonic()
    try:
        engine.prefill(torch.tensor(PROMPT))
        result = {"error": None}
    except TensorParallelError as error:
        result = {"error": "TensorParallelError", "message": str(error)}
    result["seconds"] = time.monotonic() - start
    _write(out, tp.rank, result)


def join_by_hand(rank: int, world: int, store: str, timeout_s: float, folder: str, out: str) -> None:
    """A rank that joins the group itself (as under torchrun), then runs :func:`one_rank_dies`."""
    import datetime

    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s))
    one_rank_dies(TensorParallel.from_group(timeout_s=timeout_s), folder, out)


def open_at_once(tp: TensorParallel, folder: str, out: str) -> None:
    """Every rank opens a checkpoint that must be prepared first, at the same time, and reads from it."""
    opened = open_checkpoint(folder, progress=False)
    twin = load_rank_twin(opened, "cpu", tp)
    _write(out, tp.rank, {"weights_dir": str(opened.weights_dir), "layers": len(twin.decoder_weights().layers)})


def cuda_greedy(tp: TensorParallel, folder: str, out: str) -> None:
    """On GPUs (rank r on cuda:r, NCCL): the rank's engine (its slice read alone, the default kernels, the greedy
    step captured as a CUDA graph with its collectives) against one GPU's engine on rank 0's device."""
    device = f"cuda:{torch.cuda.current_device()}"  # run_ranks made cuda:rank current (NCCL refuses one GPU twice)
    opened = open_checkpoint(folder, progress=False)
    engine = DecodeEngine(load_rank_twin(opened, device, tp), CAPACITY, parallel=tp)
    tokens = _greedy(engine)
    engine.reset()
    logits = engine.prefill(torch.tensor(PROMPT), all_logits=True).float().cpu()
    result = {"tokens": tokens, "graph": engine.graph_status, "kernels": engine.kernels.name}
    if tp.rank == 0:
        whole = build_twin(opened.module, opened.config)
        whole.load(opened.resource(device))
        single = DecodeEngine(whole, CAPACITY, parallel=TensorParallel(0, 1))
        result["want"] = _greedy(single)
        single.reset()
        want = single.prefill(torch.tensor(PROMPT), all_logits=True).float().cpu()
        result["rel_l2"] = float((logits - want).norm() / want.norm())
    _write(out, tp.rank, result)


class _PresetHead(TorchKernels):
    """A head that writes this rank's columns of a row chosen by the test (the greedy choice is what is tested)."""

    def __init__(self, row: torch.Tensor) -> None:
        self.row = row

    def head(self, x, norm, weight, out, eps) -> None:  # noqa: ANN001
        first = int(weight[0, 0])  # the test's weight carries the rank's first column
        out.copy_(self.row[first:first + weight.shape[0]][None])


def greedy_choices(tp: TensorParallel, out: str) -> None:
    """ParallelKernels.greedy_head's gathered choice against torch.argmax over the whole row, for rows with ties
    across ranks, a NaN, infinities."""
    from tilefoundry.engine import ParallelKernels

    torch.set_num_threads(1)
    vocab, rows = 16, 8
    cases = {"random": torch.randn(vocab, generator=torch.Generator().manual_seed(0))}
    cases["tie across ranks"] = torch.zeros(vocab).index_fill_(0, torch.tensor([3, 9]), 2.0)
    nan = float("nan")
    cases["nan on rank 1"] = torch.arange(vocab, dtype=torch.float32).index_fill_(0, torch.tensor([12, 14]), nan)
    cases["inf"] = torch.zeros(vocab).index_fill_(0, torch.tensor([5, 11]), float("inf"))
    got = {}
    for name, row in cases.items():
        kernels = ParallelKernels(_PresetHead(row), tp)
        weight = torch.full((rows, 4), float(tp.rank * rows))
        logits, result = torch.zeros(1, vocab), torch.zeros(2, dtype=torch.int64)
        step = torch.zeros(3, 4, dtype=torch.int32)
        kernels.greedy_head(torch.zeros(1, 4), torch.ones(4), weight, logits, result, step, 1e-6)
        got[name] = {"result": result.tolist(), "want": [int(torch.argmax(row)), int(torch.isfinite(row).all())],
                     "step": step[:, 0].tolist()}
    _write(out, tp.rank, got)

"""Batch-1 greedy decode speed: this project against the engines people use, in one run on one device.

On the GPU (``--shape qwen3-1.7b``, the default there): a model of Qwen3-1.7B's shape with random bf16
weights (the parameter count is asserted) decodes ``--new-tokens`` (1024) greedy tokens after a warm-up,
each runner timed end to end through its public generate loop:

* ``project``: this project's decode engine when ``tilefoundry.engine.DecodeEngine`` exists, else the runtime
  twin, both through ``tilefoundry.models.generate`` (``--project`` picks one);
* ``hf``: Hugging Face transformers eager (``--hf-tokens``, fewer: it is slow);
* ``torch``: plain torch written here, the strongest torch-only peer: packed weights, a static KV cache, the
  decode step compiled with ``torch.compile`` and replayed as one CUDA graph, the greedy choice and the
  position kept on the device;
* ``hf-compile``: transformers' static cache + ``torch.compile``, last, in a child process with a time limit
  (``--hf-compile-timeout``, and what ``--time-budget`` leaves; it fails on some versions: the failure is
  reported, not raised).

Tokens are compared with the torch peer's wherever its top-2 logit margin is clear (``--clear-margin``):
up to the first disagreement, which must fall on a near tie. The table gives tokens/s, the fraction of the
bandwidth bound (a device copy measured in the same run, over 2 bytes a parameter), peak GPU memory, and
the time to the first token of a ``--prefill-tokens`` (1024) prompt. ``--json`` writes everything.

On the CPU (``--device cpu``; default shape ``smollm2-135m`` in f32) the runners alternate for ``--rounds``
rounds, each round a generate and a ``--prefill-tokens`` (64) prefill of each runner, and medians are reported.

``--kernels compiled,torch`` (the engine's kernel sets: compiled, torch) runs this project's engine once per
kernel set, each its own runner (``project``, then ``project-<set>``), so one run measures the sets side by side;
each result's ``kernels`` names the set that ran.

``--tp 1,2`` also runs this project's engine split over N tensor-parallel ranks for each N above 1 (runner
``project-tp<N>``: N processes, rank r on cuda:r through NCCL, or gloo processes on the CPU), each rank reading
its slice of the saved checkpoint; its bound is N times the one-device bound (each GPU reads 1/N of the
weights a token), reported per N in ``bound_tokens_per_s_by_tp``.

    python bench/decode.py --shape qwen3-1.7b --json decode.json
    python bench/decode.py --device cpu --shape smollm2-135m
    python bench/decode.py --device cpu --runners project --kernels compiled,torch --rounds 5
    python bench/decode.py --shape qwen3-8b --runners project --tp 1,2 --json decode_tp.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from graph_timing import copy_bandwidth  # noqa: E402

from tilefoundry.engine.reference import rms_norm, rotate  # noqa: E402
from tilefoundry.models import generate, open_checkpoint  # noqa: E402
from tilefoundry.models.config import parse_config  # noqa: E402
from tilefoundry.models.rope import rope_tables  # noqa: E402
from tilefoundry.models.twins import build_twin  # noqa: E402

_QWEN3 = dict(num_attention_heads=16, num_key_value_heads=8, head_dim=128, tie_word_embeddings=True,
              rms_norm_eps=1e-6, rope_parameters={"rope_type": "default", "rope_theta": 1e6})
SHAPES: dict[str, tuple[str, dict[str, Any], int | None]] = {
    # name: (family, config, parameter count to assert)
    "qwen3-1.7b": ("qwen3", dict(_QWEN3, vocab_size=151936, hidden_size=2048, intermediate_size=6144,
                                 num_hidden_layers=28, max_position_embeddings=40960), 1_720_574_976),
    "qwen3-8b": ("qwen3", dict(_QWEN3, vocab_size=151936, hidden_size=4096, intermediate_size=12288,
                               num_hidden_layers=36, num_attention_heads=32, max_position_embeddings=40960,
                               tie_word_embeddings=False), 8_190_735_360),
    "qwen3-0.6b": ("qwen3", dict(_QWEN3, vocab_size=151936, hidden_size=1024, intermediate_size=3072,
                                 num_hidden_layers=28, max_position_embeddings=40960), 596_049_920),
    "smollm2-135m": ("llama", dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                                   num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192,
                                   tie_word_embeddings=True, rms_norm_eps=1e-5,
                                   rope_parameters={"rope_type": "default", "rope_theta": 1e5}), 134_515_008),
    "tiny": ("qwen3", dict(_QWEN3, vocab_size=1024, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, head_dim=64, max_position_embeddings=4096),
             None),
}
RUNNERS = ("project", "hf", "torch", "hf-compile")


# ---- results ---------------------------------------------------------------------------------------------------

@dataclass
class Result:
    """One runner's measurement (times in seconds; tokens/s over the new tokens, end to end)."""

    runner: str
    label: str
    new_tokens: int = 0
    tokens_per_s: float | None = None
    runs_tokens_per_s: list[float] = field(default_factory=list)
    prefill_s: float | None = None
    setup_s: float | None = None
    peak_memory_gb: float | None = None
    tokens: list[int] = field(default_factory=list)
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    kernels: str | None = None
    """The engine's kernel set that ran (this project's runners)."""


def sync(device: str) -> None:
    """Wait for queued GPU work, so wall-clock timings include it."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


class Peak:
    """Peak GPU memory allocated by torch while the block runs (None on the CPU)."""

    def __init__(self, device: str) -> None:
        self.cuda = torch.device(device).type == "cuda"
        self.gb: float | None = None

    def __enter__(self) -> Peak:
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.cuda:
            torch.cuda.synchronize()
            self.gb = torch.cuda.max_memory_allocated() / 1e9


# ---- the runners ------------------------------------------------------------------------------------------------

class ProjectRunner:
    """This project through its public generate loop: the decode engine when it exists, else the twin."""

    def __init__(self, folder: Path, device: str, capacity: int, kind: str, kernels: str | None = None) -> None:
        opened = open_checkpoint(folder, progress=False)
        twin = build_twin(opened.module, opened.config)
        twin.load(opened.resource(device))
        engine_cls = None
        if kind in ("auto", "engine") or kernels is not None:
            try:
                from tilefoundry.engine import DecodeEngine as engine_cls  # lands with the decode engine
            except ImportError:
                if kind == "engine" or kernels is not None:
                    raise SystemExit("decode.py: --project engine, but tilefoundry.engine has no DecodeEngine yet") \
                        from None
        self.kernels: str | None = None
        if engine_cls is not None:
            engine = engine_cls(twin, capacity, kernels=kernel_set(kernels) if kernels is not None else None)
            self.kernels = engine.kernels.name
            self.model = engine
            self.label = f"TileFoundry engine ({self.kernels} kernels)"
        else:
            self.model = twin
            self.label = "TileFoundry twin"
        self.device = device

    def generate(self, prompt: list[int], n: int) -> tuple[list[int], float]:
        sync(self.device)
        start = time.perf_counter()
        out = generate(self.model, prompt, n, device=self.device)
        sync(self.device)
        return out.tokens, time.perf_counter() - start

    def prefill(self, prompt: list[int]) -> float:
        sync(self.device)
        start = time.perf_counter()
        generate(self.model, prompt, 1, device=self.device)  # its first token ends with a host read
        return time.perf_counter() - start


class RankRunner(ProjectRunner):
    """This project's engine on one tensor-parallel rank: the twin of its slice, read slice by slice."""

    def __init__(self, tp: Any, folder: Path, device: str, capacity: int, kernels: str | None) -> None:
        from tilefoundry.engine import DecodeEngine
        from tilefoundry.models.tensor_parallel import load_rank_twin

        twin = load_rank_twin(open_checkpoint(folder, progress=False), device, tp)
        engine = DecodeEngine(twin, capacity, kernels=kernel_set(kernels) if kernels is not None else None,
                              parallel=tp)
        self.kernels = engine.kernels.name
        self.model, self.device = engine, device
        self.label = f"TileFoundry engine, tp {tp.world}"


def tp_rank_main(tp: Any, folder: str, device: str, capacity: int, kernels: str | None, prompt: list[int],
                 long_prompt: list[int], n: int, warmup: int, rounds: int, out: str) -> None:
    """One rank of a ``project-tp<N>`` runner (every rank runs the same steps; rank 0 writes the Result)."""
    if torch.device(device).type == "cuda":
        device = f"cuda:{torch.cuda.current_device()}"  # run_ranks made the rank's own GPU current
    else:
        from tilefoundry.runtime.threads import physical_cores, set_threads

        set_threads(max(1, physical_cores() // tp.world))
    runner = RankRunner(tp, Path(folder), device, capacity, kernels)
    key = f"project-tp{tp.world}"
    result = Result(key, runner.label, n, kernels=runner.kernels)
    start = time.perf_counter()
    runner.generate(prompt, warmup)
    result.setup_s = time.perf_counter() - start
    for _ in range(rounds):
        with Peak(device) as peak:
            result.tokens, seconds = runner.generate(prompt, n)
        result.runs_tokens_per_s.append(len(result.tokens) / seconds)
    result.tokens_per_s = statistics.median(result.runs_tokens_per_s)
    result.peak_memory_gb = peak.gb
    result.prefill_s = runner.prefill(long_prompt)
    result.notes = [f"{tp.world} ranks; peak memory of rank 0", f"median of {rounds} runs"]
    if tp.rank == 0:
        Path(out).write_text(json.dumps(asdict(result)))


def measure_tp(world: int, args: argparse.Namespace, folder: Path, prompt: list[int], long_prompt: list[int],
               capacity: int, tmp: str) -> Result:
    """The ``project-tp<world>`` runner: ``world`` ranks started for it, rank 0's measurement."""
    from tilefoundry.engine.ranks import RankFailedError, backend_for, run_ranks

    out = Path(tmp) / f"tp{world}.json"
    rounds = args.rounds if torch.device(args.device).type == "cpu" else 1
    try:
        run_ranks(world, tp_rank_main, (str(folder), args.device, capacity, args.kernels[0], prompt, long_prompt,
                                        args.new_tokens, args.warmup_tokens, rounds, str(out)),
                  backend=backend_for(args.device), timeout_s=600)
    except RankFailedError as error:
        return Result(f"project-tp{world}", f"TileFoundry engine, tp {world}", args.new_tokens,
                      error=str(error).splitlines()[0][:300])
    result = Result(**json.loads(out.read_text()))
    print(f"  {result.label}: {result.tokens_per_s:.1f} tokens/s over {args.new_tokens} tokens, prefill of "
          f"{len(long_prompt)} {1e3 * result.prefill_s:.0f} ms", flush=True)
    return result


def measure_tps(args: argparse.Namespace, folder: Path, prompt: list[int], long_prompt: list[int], capacity: int,
                tmp: str) -> dict[str, Result]:
    """The ``project-tp<N>`` runners by result key, one for each ``--tp`` N above 1."""
    return {f"project-tp{world}": measure_tp(world, args, folder, prompt, long_prompt, capacity, tmp)
            for world in args.tp if world > 1}


KERNEL_SETS = ("compiled", "torch")
"""The engine's kernel sets ``--kernels`` names (tilefoundry.engine): CompiledKernels, TorchKernels."""


def kernel_set(name: str) -> Any:
    """The engine's kernel set called ``name``."""
    from tilefoundry import engine

    return {"compiled": engine.CompiledKernels, "torch": engine.TorchKernels}[name]()


class HFRunner:
    """Hugging Face transformers eager: ``model.generate``, greedy, its default dynamic cache."""

    label = "HF transformers eager"

    def __init__(self, hf: torch.nn.Module, device: str) -> None:
        self.hf, self.device = hf, device

    def generate(self, prompt: list[int], n: int) -> tuple[list[int], float]:
        ids = torch.tensor([prompt], device=self.device)
        sync(self.device)
        start = time.perf_counter()
        with torch.inference_mode():
            out = self.hf.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False)
        sync(self.device)
        return out[0, len(prompt):].tolist(), time.perf_counter() - start

    def prefill(self, prompt: list[int]) -> float:
        ids = torch.tensor([prompt], device=self.device)
        sync(self.device)
        start = time.perf_counter()
        with torch.inference_mode():
            int(self.hf(ids).logits[0, -1].argmax())
        return time.perf_counter() - start


class TorchStaticDecoder(torch.nn.Module):
    """Plain torch: q/k/v and gate/up packed, a static (layers, KV, capacity, D) cache, masked SDPA over it.

    ``decode`` is one step at the device position: it writes the cache, the greedy token, the top-2 margin and
    the next position into buffers, so a CUDA graph of it replays with no host work.
    """

    def __init__(self, hf: torch.nn.Module, capacity: int) -> None:
        super().__init__()
        c = hf.config
        self.cfg = parse_config(c.to_dict())
        self.h, self.kv, self.d = self.cfg.num_heads, self.cfg.num_kv_heads, self.cfg.head_dim
        self.eps, self.capacity, self.qk_norm = self.cfg.rms_norm_eps, capacity, self.cfg.qk_norm
        self.layers = []
        for layer in hf.model.layers:
            a, mlp = layer.self_attn, layer.mlp
            self.layers.append({
                "qkv": torch.cat((a.q_proj.weight, a.k_proj.weight, a.v_proj.weight)).detach(),
                "o": a.o_proj.weight.detach(), "down": mlp.down_proj.weight.detach(),
                "gate_up": torch.cat((mlp.gate_proj.weight, mlp.up_proj.weight)).detach(),
                "in_norm": layer.input_layernorm.weight.detach(), "post_norm": layer.post_attention_layernorm.weight
                .detach(), **({"q_norm": a.q_norm.weight.detach(), "k_norm": a.k_norm.weight.detach()}
                              if self.qk_norm else {})})
        self.embed, self.norm = hf.model.embed_tokens.weight.detach(), hf.model.norm.weight.detach()
        self.head = hf.lm_head.weight.detach()
        w = self.embed
        cos, sin = rope_tables(self.cfg.rope, self.d, capacity, w.dtype, w.device)
        self.register_buffer("cos", cos)
        self.register_buffer("sin", sin)
        n = len(self.layers)
        self.register_buffer("cache_k", torch.zeros(n, self.kv, capacity, self.d, dtype=w.dtype, device=w.device))
        self.register_buffer("cache_v", torch.zeros(n, self.kv, capacity, self.d, dtype=w.dtype, device=w.device))
        self.register_buffer("out_tokens", torch.zeros(capacity, dtype=torch.int64, device=w.device))
        self.register_buffer("margins", torch.zeros(capacity, dtype=torch.float32, device=w.device))
        self.register_buffer("positions", torch.arange(capacity, device=w.device))

    def _forward(self, ids: torch.Tensor, pos: torch.Tensor, prefill: bool) -> torch.Tensor:
        """Logits of the last token; ``pos`` holds each token's position (the cache is written there)."""
        m = ids.shape[0]
        x = F.embedding(ids, self.embed)
        cos, sin = self.cos[pos][:, None], self.sin[pos][:, None]
        mask = None if prefill else (self.positions <= pos[-1])[None, None, None, :]
        for i, w in enumerate(self.layers):
            q, k, v = F.linear(rms_norm(x, w["in_norm"], self.eps), w["qkv"]).split(
                (self.h * self.d, self.kv * self.d, self.kv * self.d), dim=-1)
            q, k, v = q.view(m, self.h, self.d), k.view(m, self.kv, self.d), v.view(m, self.kv, self.d)
            if self.qk_norm:
                q, k = rms_norm(q, w["q_norm"], self.eps), rms_norm(k, w["k_norm"], self.eps)
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
            self.cache_k[i].index_copy_(1, pos, k.transpose(0, 1))
            self.cache_v[i].index_copy_(1, pos, v.transpose(0, 1))
            if prefill:  # positions 0..m-1 of an empty cache: causal over the prompt alone
                keys, vals = k.transpose(0, 1)[None], v.transpose(0, 1)[None]
                attn = F.scaled_dot_product_attention(q.transpose(0, 1)[None], keys, vals, is_causal=True,
                                                      enable_gqa=True)
            else:
                attn = F.scaled_dot_product_attention(q.transpose(0, 1)[None], self.cache_k[i][None],
                                                      self.cache_v[i][None], attn_mask=mask, enable_gqa=True)
            x = x + F.linear(attn[0].transpose(0, 1).reshape(m, self.h * self.d), w["o"])
            gate, up = F.linear(rms_norm(x, w["post_norm"], self.eps), w["gate_up"]).chunk(2, dim=-1)
            x = x + F.linear(F.silu(gate) * up, w["down"])
        return F.linear(rms_norm(x[-1:], self.norm, self.eps), self.head)[0]

    def _choose(self, logits: torch.Tensor, at: torch.Tensor) -> torch.Tensor:
        top = logits.float().topk(2).values
        token = logits.argmax(-1, keepdim=True)
        self.out_tokens.index_copy_(0, at, token)
        self.margins.index_copy_(0, at, (top[0] - top[1])[None])
        return token

    def prefill(self, ids: torch.Tensor) -> torch.Tensor:
        """Run the prompt (an empty cache) and return the first token (device, shape (1,))."""
        pos = self.positions[: ids.shape[0]]
        return self._choose(self._forward(ids, pos, prefill=True), pos[-1:])

    def decode(self, token: torch.Tensor, pos: torch.Tensor) -> None:
        """One step: ``token`` (1,) at ``pos`` (1,); both are advanced in place."""
        token.copy_(self._choose(self._forward(token, pos, prefill=False), pos))
        pos.add_(1)


class TorchPeerRunner:
    """The strongest torch-only peer: TorchStaticDecoder, its decode step compiled and captured as a CUDA graph."""

    label = "torch static + compile + graph"

    def __init__(self, hf: torch.nn.Module, device: str, capacity: int, *, compile: bool) -> None:
        self.device, self.graphs = device, torch.device(device).type == "cuda"
        self.model = TorchStaticDecoder(hf, capacity)
        self.token = torch.zeros(1, dtype=torch.int64, device=device)
        self.pos = torch.zeros(1, dtype=torch.int64, device=device)
        self.notes: list[str] = []
        self.step: Callable[[torch.Tensor, torch.Tensor], None] = self.model.decode
        if compile:
            self.step = torch.compile(self.model.decode, fullgraph=True, dynamic=False)
        else:
            self.notes.append("not compiled (--no-compile)")
        self.graph: torch.cuda.CUDAGraph | None = None

    def _capture(self) -> None:
        """Warm the step up (compiling it) and capture it once; later prompts replay the same graph."""
        self.token.zero_()
        self.pos.fill_(self.model.capacity - 1)
        with torch.inference_mode():
            for _ in range(3):
                self.step(self.token, self.pos)
                self.pos.fill_(self.model.capacity - 1)
            if self.graphs:
                sync(self.device)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    self.step(self.token, self.pos)
                self.graph = graph
        self.model.cache_k.zero_()
        self.model.cache_v.zero_()

    def setup(self) -> None:
        try:
            self._capture()
        except Exception as e:  # a compile failure leaves the eager step, graphed
            if self.step is self.model.decode:
                raise
            self.notes.append(f"torch.compile failed ({type(e).__name__}: {str(e).splitlines()[0][:200]}); "
                              "eager step instead")
            self.step = self.model.decode
            self._capture()
        if not self.graphs:
            self.notes.append("no CUDA graph on the CPU")

    def generate(self, prompt: list[int], n: int) -> tuple[list[int], float]:
        ids = torch.tensor(prompt, device=self.device)
        sync(self.device)
        start = time.perf_counter()
        with torch.inference_mode():
            self.token.copy_(self.model.prefill(ids))
            self.pos.fill_(len(prompt))
            for _ in range(n - 1):
                if self.graph is not None:
                    self.graph.replay()
                else:
                    self.step(self.token, self.pos)
            tokens = self.model.out_tokens[len(prompt) - 1: len(prompt) - 1 + n].tolist()
        return tokens, time.perf_counter() - start

    def prefill(self, prompt: list[int]) -> float:
        ids = torch.tensor(prompt, device=self.device)
        sync(self.device)
        start = time.perf_counter()
        with torch.inference_mode():
            int(self.model.prefill(ids)[0])
        return time.perf_counter() - start

    def margins(self, prompt_len: int, n: int) -> list[float]:
        return self.model.margins[prompt_len - 1: prompt_len - 1 + n].tolist()


# ---- transformers static cache + torch.compile, in a child process -------------------------------------------

def hf_compile_child(folder: str, prompt: list[int], n: int, prefill_tokens: int) -> dict[str, Any]:
    """Run in the child: load the checkpoint, generate with a static cache and a compiled forward."""
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16).to("cuda").eval()
    hf.generation_config.cache_implementation = "static"
    try:
        from transformers import CompileConfig

        hf.generation_config.compile_config = CompileConfig(fullgraph=True, mode="reduce-overhead")
    except ImportError:
        hf.forward = torch.compile(hf.forward, mode="reduce-overhead", fullgraph=True)
    ids = torch.tensor([prompt], device="cuda")

    def run(k: int) -> tuple[list[int], float]:
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.inference_mode():
            out = hf.generate(ids, max_new_tokens=k, min_new_tokens=k, do_sample=False, cache_implementation="static")
        torch.cuda.synchronize()
        return out[0, len(prompt):].tolist(), time.perf_counter() - start

    start = time.perf_counter()
    run(8)
    run(8)  # the compiled decode step is captured on its second use
    setup = time.perf_counter() - start
    with Peak("cuda") as peak:
        tokens, seconds = run(n)
    long_ids = torch.randint(0, hf.config.vocab_size, (1, prefill_tokens), device="cuda")
    torch.cuda.synchronize()
    start = time.perf_counter()
    with torch.inference_mode():
        int(hf(long_ids).logits[0, -1].argmax())
    prefill = time.perf_counter() - start
    return {"tokens": tokens, "seconds": seconds, "setup_s": setup, "prefill_s": prefill, "peak_memory_gb": peak.gb}


def run_hf_compile(folder: Path, prompt: list[int], n: int, prefill_tokens: int, timeout: float) -> Result:
    result = Result("hf-compile", "HF static cache + torch.compile", n)
    command = [sys.executable, __file__, "--hf-compile-child", str(folder), "--new-tokens", str(n),
               "--prefill-tokens", str(prefill_tokens), "--prompt-ids", ",".join(map(str, prompt))]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                              env=dict(os.environ, PYTHONUNBUFFERED="1"))
    except subprocess.TimeoutExpired:
        result.error = f"no result within {timeout:.0f} s (--hf-compile-timeout)"
        return result
    last = proc.stdout.strip().splitlines()[-1:] if proc.stdout.strip() else []
    if proc.returncode != 0 or not last or not last[0].startswith("{"):
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        result.error = f"failed (exit {proc.returncode}): {tail[:300]}"
        return result
    data = json.loads(last[0])
    result.tokens, result.setup_s = data["tokens"], data["setup_s"]
    result.tokens_per_s = n / data["seconds"]
    result.runs_tokens_per_s = [result.tokens_per_s]
    result.prefill_s, result.peak_memory_gb = data["prefill_s"], data["peak_memory_gb"]
    return result


# ---- measuring ----------------------------------------------------------------------------------------------

def measure(runner: Any, key: str, prompt: list[int], long_prompt: list[int], n: int, device: str,
            warmup: int) -> Result:
    """Warm up, then one timed generate of ``n`` tokens (peak memory around it) and one long-prompt prefill."""
    result = Result(key, runner.label, n, kernels=getattr(runner, "kernels", None))
    start = time.perf_counter()
    runner.generate(prompt, warmup)
    result.setup_s = time.perf_counter() - start
    with Peak(device) as peak:
        result.tokens, seconds = runner.generate(prompt, n)
    result.peak_memory_gb = peak.gb
    result.tokens_per_s = len(result.tokens) / seconds
    result.runs_tokens_per_s = [result.tokens_per_s]
    result.prefill_s = runner.prefill(long_prompt)
    result.notes = list(getattr(runner, "notes", []))
    print(f"  {result.label}: {result.tokens_per_s:.1f} tokens/s over {n} tokens, prefill of {len(long_prompt)} "
          f"{1e3 * result.prefill_s:.0f} ms", flush=True)
    return result


def agreement(tokens: list[int], peer: list[int], margins: list[float], clear: float) -> dict[str, Any]:
    """Compare up to the first disagreement: it must fall where the peer's top-2 margin is not clear."""
    n = min(len(tokens), len(peer))
    for i in range(n):
        if tokens[i] != peer[i]:
            ok = margins[i] < clear
            return {"compared": n, "agree": i, "first_difference": i, "peer_margin": margins[i], "ok": ok,
                    "verdict": (f"same first {i}, then differ on a near tie (margin {margins[i]:.3f})" if ok else
                                f"DIFFER at token {i} where the margin {margins[i]:.3f} is clear")}
    return {"compared": n, "agree": n, "first_difference": None, "ok": True, "verdict": f"all {n} equal"}


def copy_tb_per_s(device: str) -> float | None:
    """torch's device copy in TB/s on a GPU (graph_timing.copy_bandwidth), None on the CPU."""
    return copy_bandwidth(12) if torch.device(device).type == "cuda" else None


def build_hf(shape: str, device: str, dtype: torch.dtype) -> torch.nn.Module:
    """The model of ``shape`` with random weights, made directly on ``device``."""
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen3Config

    family, kwargs, _ = SHAPES[shape]
    config = (Qwen3Config if family == "qwen3" else LlamaConfig)(**kwargs)
    with torch.device(device):
        hf = AutoModelForCausalLM.from_config(config, dtype=dtype)
    return hf.eval()


# ---- main ---------------------------------------------------------------------------------------------------

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    ap.add_argument("--shape", choices=sorted(SHAPES), help="default: qwen3-1.7b on cuda, smollm2-135m on cpu")
    ap.add_argument("--dtype", choices=("bfloat16", "float32"), help="default: bfloat16 on cuda, float32 on cpu")
    ap.add_argument("--runners", help=f"comma-separated, of {', '.join(RUNNERS)} (default: all on cuda, "
                                      "project,hf on cpu)")
    ap.add_argument("--project", choices=("auto", "engine", "twin"), default="auto",
                    help="what runs for this project (auto: the engine when it exists)")
    ap.add_argument("--kernels", help=f"comma-separated kernel sets of the engine, each its own project runner "
                                      f"(project, then project-<set>), of {', '.join(KERNEL_SETS)} (default: the "
                                      "engine's default for the device)")
    ap.add_argument("--tp", default="1",
                    help="comma-separated tensor-parallel rank counts of this project's engine (default 1); each N "
                         "above 1 is its own runner, project-tp<N>, after the others")
    ap.add_argument("--prompt-tokens", type=int, default=32)
    ap.add_argument("--new-tokens", type=int, help="greedy tokens each runner generates (1024 on cuda, 16 on cpu)")
    ap.add_argument("--hf-tokens", type=int, help="tokens for transformers eager (128 on cuda)")
    ap.add_argument("--warmup-tokens", type=int, default=8)
    ap.add_argument("--prefill-tokens", type=int, help="prompt length of the prefill timing (1024 on cuda, 64 on cpu)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds on the CPU (medians)")
    ap.add_argument("--clear-margin", type=float, default=0.5,
                    help="a top-2 logit gap at least this large must give equal tokens")
    ap.add_argument("--no-compile", action="store_true", help="the torch peer without torch.compile")
    ap.add_argument("--hf-compile-timeout", type=float, default=300.0,
                    help="seconds the transformers static-cache + compile child may take")
    ap.add_argument("--time-budget", type=float,
                    help="seconds this whole run may take: the hf-compile runner, which runs last, gets what is "
                         "left (and is skipped under a minute)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--hf-compile-child", help=argparse.SUPPRESS)
    ap.add_argument("--prompt-ids", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    cuda = torch.device(args.device).type == "cuda"
    args.shape = args.shape or ("qwen3-1.7b" if cuda else "smollm2-135m")
    args.dtype = args.dtype or ("bfloat16" if cuda else "float32")
    args.new_tokens = args.new_tokens or (1024 if cuda else 16)
    args.hf_tokens = args.hf_tokens or (128 if cuda else args.new_tokens)
    args.prefill_tokens = args.prefill_tokens or (1024 if cuda else 64)
    args.runners = args.runners.split(",") if args.runners else (list(RUNNERS) if cuda else ["project", "hf"])
    unknown = [r for r in args.runners if r not in RUNNERS]
    if unknown:
        ap.error(f"unknown runner(s) {', '.join(unknown)}; choose from {', '.join(RUNNERS)}")
    if "hf-compile" in args.runners and not cuda:
        ap.error("the hf-compile runner needs --device cuda")
    try:
        args.tp = [int(n) for n in args.tp.split(",")]
    except ValueError:
        ap.error(f"--tp takes comma-separated rank counts, got {args.tp!r}")
    if any(n < 1 for n in args.tp):
        ap.error(f"--tp rank counts must be >= 1, got {args.tp}")
    if cuda and torch.cuda.is_available() and max(args.tp) > torch.cuda.device_count():
        ap.error(f"--tp {max(args.tp)} needs {max(args.tp)} GPUs, one a rank; torch sees {torch.cuda.device_count()}")
    args.kernels = args.kernels.split(",") if args.kernels else [None]
    bad = [k for k in args.kernels if k is not None and k not in KERNEL_SETS]
    if bad:
        retired = " (cuda, the hand-written kernels, was retired: compiled replaces it)" if "cuda" in bad else ""
        ap.error(f"unknown kernel set(s) {', '.join(map(str, bad))}; choose from {', '.join(KERNEL_SETS)}{retired}")
    return args


def project_runners(args: argparse.Namespace, folder: Path, device: str, capacity: int) -> dict[str, Any]:
    """This project's runners by result key: one per ``--kernels`` set (``project``, then ``project-<set>``)."""
    out = {}
    for i, kernels in enumerate(args.kernels):
        out["project" if i == 0 else f"project-{kernels}"] = ProjectRunner(folder, device, capacity, args.project,
                                                                            kernels)
    return out


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    args = parse_args(argv)
    if args.hf_compile_child:
        prompt = [int(t) for t in args.prompt_ids.split(",")]
        print(json.dumps(hf_compile_child(args.hf_compile_child, prompt, args.new_tokens, args.prefill_tokens)))
        return 0
    device, cuda = args.device, torch.device(args.device).type == "cuda"
    if cuda and not torch.cuda.is_available():
        print("decode.py: --device cuda, but torch sees no CUDA device; use --device cpu", file=sys.stderr)
        return 2
    dtype = getattr(torch, args.dtype)
    torch.manual_seed(0)
    hf = build_hf(args.shape, device, dtype)
    params = sum(p.numel() for p in hf.parameters())
    want = SHAPES[args.shape][2]
    assert want is None or params == want, f"{args.shape}: {params} parameters, expected {want}"
    vocab = hf.config.vocab_size
    gen = torch.Generator().manual_seed(1)
    prompt = torch.randint(0, vocab, (args.prompt_tokens,), generator=gen).tolist()
    long_prompt = torch.randint(0, vocab, (args.prefill_tokens,), generator=gen).tolist()
    capacity = max(args.prompt_tokens + max(args.new_tokens, args.hf_tokens, args.warmup_tokens),
                   args.prefill_tokens) + 1
    copy = copy_tb_per_s(device)
    bytes_per_token = params * torch.finfo(dtype).bits // 8
    print(f"{args.shape}: {params / 1e9:.3f}e9 parameters ({args.dtype}, {device}); "
          + (f"device copy {copy:.2f} TB/s, bound {copy * 1e12 / bytes_per_token:.0f} tokens/s" if copy else
             "CPU run") + f"; {args.new_tokens} new tokens after {args.prompt_tokens}", flush=True)

    results: dict[str, Result] = {}
    peer_margins: list[float] = []
    with tempfile.TemporaryDirectory(prefix="tf-decode-") as tmp:
        folder = Path(tmp) / args.shape
        hf.save_pretrained(folder)
        if not cuda:
            results, peer_margins = cpu_rounds(args, hf, folder, prompt, long_prompt, capacity)
            if "project" in args.runners:
                results.update(measure_tps(args, folder, prompt, long_prompt, capacity, tmp))
        else:
            if "torch" in args.runners:
                peer = TorchPeerRunner(hf, device, capacity, compile=not args.no_compile)
                start = time.perf_counter()
                peer.setup()
                setup = time.perf_counter() - start
                results["torch"] = measure(peer, "torch", prompt, long_prompt, args.new_tokens, device,
                                           args.warmup_tokens)
                results["torch"].setup_s = setup + (results["torch"].setup_s or 0.0)
                peer_margins = peer.margins(len(prompt), args.new_tokens)
                del peer
            if "hf" in args.runners:
                results["hf"] = measure(HFRunner(hf, device), "hf", prompt, long_prompt, args.hf_tokens, device,
                                        args.warmup_tokens)
            del hf
            torch.cuda.empty_cache()
            if "project" in args.runners:
                for i, kernels in enumerate(args.kernels):
                    key = "project" if i == 0 else f"project-{kernels}"
                    project = ProjectRunner(folder, device, capacity, args.project, kernels)
                    results[key] = measure(project, key, prompt, long_prompt, args.new_tokens, device,
                                           args.warmup_tokens)
                    del project
                    torch.cuda.empty_cache()
                results.update(measure_tps(args, folder, prompt, long_prompt, capacity, tmp))
            if "hf-compile" in args.runners:
                timeout = args.hf_compile_timeout
                if args.time_budget is not None:
                    timeout = min(timeout, args.time_budget - (time.monotonic() - started) - 15)
                if timeout < 60:
                    results["hf-compile"] = Result("hf-compile", "HF static cache + torch.compile", args.new_tokens,
                                                   error=f"skipped: {max(timeout, 0):.0f} s left of --time-budget")
                else:
                    results["hf-compile"] = run_hf_compile(folder, prompt, args.new_tokens, args.prefill_tokens,
                                                           timeout)
                r = results["hf-compile"]
                print(f"  {r.label}: " + (f"{r.tokens_per_s:.1f} tokens/s" if r.error is None else r.error),
                      flush=True)

    agreements = {}
    if peer_margins:
        for key in (*(k for k in results if k.startswith("project")), "hf", "hf-compile"):
            if key in results and results[key].tokens:
                agreements[key] = agreement(results[key].tokens, results["torch"].tokens, peer_margins,
                                            args.clear_margin)
    elif "project" in results and "hf" in results:  # the CPU: the twin against transformers
        for key in (k for k in results if k.startswith("project")):
            n = min(len(results[key].tokens), len(results["hf"].tokens))
            same = sum(a == b for a, b in zip(results[key].tokens, results["hf"].tokens))
            agreements[key] = {"compared": n, "agree": same, "ok": None,
                               "verdict": f"{same} of {n} equal to transformers'"}
    report = {"shape": args.shape, "device": device, "device_name": torch.cuda.get_device_name() if cuda else None,
              "dtype": args.dtype, "parameters": params, "bytes_per_token": bytes_per_token,
              "copy_tb_per_s": copy, "bound_tokens_per_s": copy * 1e12 / bytes_per_token if copy else None,
              "bound_tokens_per_s_by_tp": {n: n * copy * 1e12 / bytes_per_token for n in args.tp} if copy else None,
              "prompt_tokens": args.prompt_tokens, "prefill_tokens": args.prefill_tokens,
              "clear_margin": args.clear_margin, "results": {k: asdict(v) for k, v in results.items()},
              "agreement_with_torch_peer" if peer_margins else "agreement_with_transformers": agreements}
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    print_table(report)
    return 0 if all(a.get("ok") is not False for a in agreements.values()) else 1


def cpu_rounds(args: argparse.Namespace, hf: torch.nn.Module, folder: Path, prompt: list[int],
               long_prompt: list[int], capacity: int) -> tuple[dict[str, Result], list[float]]:
    """The CPU comparison: every runner once per round, in alternating order; medians over the rounds.

    Returns the results and the torch peer's top-2 margins of its last run (empty without the peer).
    """
    runners: dict[str, Any] = {}
    if "project" in args.runners:
        runners.update(project_runners(args, folder, "cpu", capacity))
    if "hf" in args.runners:
        runners["hf"] = HFRunner(hf, "cpu")
    if "torch" in args.runners:
        runners["torch"] = TorchPeerRunner(hf, "cpu", capacity, compile=not args.no_compile)
        runners["torch"].setup()
    results = {k: Result(k, r.label, args.new_tokens, kernels=getattr(r, "kernels", None))
               for k, r in runners.items()}
    for r in runners.values():
        r.generate(prompt, args.warmup_tokens)
    order = list(runners)
    prefills: dict[str, list[float]] = {k: [] for k in runners}
    for i in range(args.rounds):
        for k in (order if i % 2 == 0 else order[::-1]):
            tokens, seconds = runners[k].generate(prompt, args.new_tokens)
            results[k].tokens = tokens
            results[k].runs_tokens_per_s.append(len(tokens) / seconds)
            prefills[k].append(runners[k].prefill(long_prompt))
    margins = runners["torch"].margins(len(prompt), args.new_tokens) if "torch" in runners else []
    for k, r in runners.items():
        res = results[k]
        res.tokens_per_s = statistics.median(res.runs_tokens_per_s)
        res.prefill_s = statistics.median(prefills[k])
        res.notes = list(getattr(r, "notes", [])) + [f"median of {args.rounds} alternating rounds (decode and "
                                                     "prefill)"]
        print(f"  {res.label}: {res.tokens_per_s:.1f} tokens/s (runs: "
              f"{', '.join(f'{v:.1f}' for v in res.runs_tokens_per_s)}); prefill of {len(long_prompt)} "
              f"{1e3 * res.prefill_s:.0f} ms (runs: {', '.join(f'{1e3 * v:.0f}' for v in prefills[k])})", flush=True)
    return results, margins


def print_table(report: dict[str, Any]) -> None:
    bound = report["bound_tokens_per_s"]
    agreements = report.get("agreement_with_torch_peer") or report.get("agreement_with_transformers") or {}
    print(f"\n=== batch-1 greedy decode, {report['shape']} ({report['parameters'] / 1e9:.3f}e9 parameters, "
          f"{report['dtype']}) on {report['device_name'] or 'cpu'}"
          + (f"; bound {bound:.0f} tokens/s at {report['copy_tb_per_s']:.2f} TB/s" if bound else ""))
    print(f"{'runner':<34}{'tokens/s':>9}{'tokens':>7}{'% bound':>8}{'GPU GB':>7}"
          f"{'prefill ' + str(report['prefill_tokens']):>13}  tokens vs peer")
    by_tp = report.get("bound_tokens_per_s_by_tp") or {}
    for key, r in report["results"].items():
        if key.startswith("project-tp") and by_tp:
            bound = by_tp[int(key[len("project-tp"):])]
        else:
            bound = report["bound_tokens_per_s"]
        if r["error"]:
            print(f"{r['label']:<34}{'':>9}{'':>7}{'':>8}{'':>7}{'':>13}  {r['error']}")
            continue
        pct = f"{100 * r['tokens_per_s'] / bound:.1f}%" if bound else "-"
        mem = f"{r['peak_memory_gb']:.1f}" if r["peak_memory_gb"] is not None else "-"
        pre = f"{1e3 * r['prefill_s']:.0f} ms" if r["prefill_s"] is not None else "-"
        agree = agreements.get(key, {}).get("verdict", "(the peer)" if key == "torch" else "-")
        print(f"{r['label']:<34}{r['tokens_per_s']:>9.1f}{r['new_tokens']:>7}{pct:>8}{mem:>7}{pre:>13}  {agree}")
        for note in r["notes"]:
            print(f"{'':<34}  note: {note}")


if __name__ == "__main__":
    sys.exit(main())

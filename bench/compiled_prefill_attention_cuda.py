"""Benchmark: a prompt's causal attention, compiled by ``tilefoundry.jit`` for the GPU, against torch's SDPA.

The kernel is the attention the families write, over a KV cache in position order (the engine's attention slot):
``softmax(where(arange(C) <= pos, q k^T * scale, -inf)) v`` with the key and value heads repeated for grouped-query
attention, recognised as one fused attention and, at 17 query rows or more, lowered to blocks of query rows
through the tensor cores (``ops::attention_rows``, cuda/ops/attention_mma.cuh). Torch's side is
``scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)`` restricted to its flash backend. Shapes:
Qwen3-1.7B's heads (16 query heads, 8 key heads, head_dim 128), bf16, a prompt of S tokens from position 0 (issue
23's acceptance: 1024 and 8192). Each case is first checked against SDPA (relative L2 within 2e-2), then both run as
replays of a CUDA graph of ``--launches`` launches cycling through copies of their operands (bench/graph_timing.py),
the medians of ``--reps`` replays interleaved between the two. Reported: microseconds, TFLOP/s (the causal half of
the score and value products) and ``SDPA / compiled`` (above 1: the compiled kernel is faster).

    python bench/compiled_prefill_attention_cuda.py --json compiled_prefill_attention_h200.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from graph_timing import copies_for, graph_of, time_graphs  # noqa: E402

from tilefoundry import jit  # noqa: E402
from tilefoundry.dsl import DimVar, Tensor, func, tf  # noqa: E402
from tilefoundry.ir.core.function import Function  # noqa: E402

HEADS, KV_HEADS, HEAD_DIM = 16, 8, 128  # Qwen3-1.7B's
TOLERANCE = 2e-2


def prompt_attention(most: int) -> Function:
    """The engine's attention slot's math at Qwen3-1.7B's heads, for prompts of up to ``most`` tokens."""
    seq = DimVar("seq", 1, most + 1)
    cap = DimVar("capacity", 1, most + 1)
    h, kv, d = HEADS, KV_HEADS, HEAD_DIM
    scale = d**-0.5

    @func
    def attention(q: Tensor[(seq, h, d), "bf16"], keys: Tensor[(cap, kv, d), "bf16"],
                  vals: Tensor[(cap, kv, d), "bf16"], pos: Tensor[(seq,), "i32"]):
        qh = tf.transpose(q, (1, 0, 2))
        k = tf.repeat_interleave(tf.transpose(keys, (1, 2, 0)), h // kv, 0)
        v = tf.repeat_interleave(tf.transpose(vals, (1, 0, 2)), h // kv, 0)
        visible = tf.reshape(tf.arange(cap, dtype="i32"), (1, cap)) <= tf.reshape(pos, (seq, 1))
        probs = tf.softmax(tf.where(visible, tf.matmul(qh, k) * scale, float("-inf")))
        return tf.reshape(tf.transpose(tf.matmul(probs, v), (1, 0, 2)), (seq, h * d))

    return attention


def run_case(compiled: object, s: int, launches: int, reps: int) -> dict:
    """A prompt of ``s`` tokens from position 0: the check, then both sides' medians."""
    dev = torch.device("cuda")
    copies = copies_for(3 * s * HEADS * HEAD_DIM * 2, 8)
    qs = [torch.randn(s, HEADS, HEAD_DIM, device=dev, dtype=torch.bfloat16) for _ in range(copies)]
    ks = [torch.randn(s, KV_HEADS, HEAD_DIM, device=dev, dtype=torch.bfloat16) for _ in range(copies)]
    vs = [torch.randn(s, KV_HEADS, HEAD_DIM, device=dev, dtype=torch.bfloat16) for _ in range(copies)]
    pos = torch.arange(s, device=dev, dtype=torch.int32)
    ours = [torch.full((s, HEADS * HEAD_DIM), float("nan"), device=dev, dtype=torch.bfloat16) for _ in range(copies)]

    def compiled_launch(i: int) -> None:
        compiled(qs[i], ks[i], vs[i], pos, ours[i])

    def sdpa_launch(i: int) -> torch.Tensor:  # its output torch allocates (graph_of holds it)
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
            return F.scaled_dot_product_attention(qs[i].transpose(0, 1)[None], ks[i].transpose(0, 1)[None],
                                                  vs[i].transpose(0, 1)[None], is_causal=True, enable_gqa=True)[0]

    compiled_launch(0)
    want = sdpa_launch(0).transpose(0, 1).reshape(s, -1).float()
    torch.cuda.synchronize()
    error = ((ours[0].float() - want).norm() / want.norm()).item()
    if not error <= TOLERANCE:
        raise AssertionError(f"compiled_prefill_attention_cuda.py: {s} tokens: relative L2 {error:.3g} from SDPA")
    graphs = {"compiled": graph_of(compiled_launch, launches, copies), "SDPA": graph_of(sdpa_launch, launches, copies)}
    us = time_graphs(graphs, launches, reps)
    flops = 4 * HEADS * HEAD_DIM * s * (s + 1) / 2  # q k^T and p v over the causal half
    return {"tokens": s, "rel_l2_vs_sdpa": error, "us": us, "tflops": {k: flops / t / 1e6 for k, t in us.items()},
            "speed_vs_sdpa": us["SDPA"] / us["compiled"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, nargs="+", default=[1024, 8192])
    ap.add_argument("--launches", type=int, default=5, help="launches a graph (default 5)")
    ap.add_argument("--reps", type=int, default=15, help="replays of each graph (default 15)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("compiled_prefill_attention_cuda.py: needs a CUDA GPU (torch sees none)", file=sys.stderr)
        return 2
    compiled = jit(prompt_attention(max(args.tokens)), target="cuda")
    results = []
    print(f"{'tokens':>7}{'compiled us':>13}{'TFLOP/s':>9}{'SDPA us':>10}{'TFLOP/s':>9}{'vs SDPA':>9}")
    for s in args.tokens:
        r = run_case(compiled, s, args.launches, args.reps)
        results.append(r)
        print(f"{s:>7}{r['us']['compiled']:>13.1f}{r['tflops']['compiled']:>9.0f}{r['us']['SDPA']:>10.1f}"
              f"{r['tflops']['SDPA']:>9.0f}{r['speed_vs_sdpa']:>8.2f}x", flush=True)
    if args.json:
        out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "dtype": "bfloat16",
               "heads": HEADS, "kv_heads": KV_HEADS, "head_dim": HEAD_DIM, "launches_per_graph": args.launches,
               "reps": args.reps, "cases": results}
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

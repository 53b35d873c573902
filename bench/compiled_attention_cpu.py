"""Benchmark: a prompt's causal attention, compiled by ``tilefoundry.jit`` for the CPU against torch's SDPA.

The kernel is the engine's attention slot as the families write it (``engine/compiled_kernels.py``:
``matmul(q, keys) * scale``, the causal ``where`` from positions, ``softmax``, ``matmul(probs, vals)`` over the
keys' heads repeated for grouped queries), which the compiler recognises and runs fused (``ops::attention``:
on the CPU eight query rows against tiles of 64 keys, then ``ops::attention_combine``). ``--seq`` prompt rows
attend to themselves, each to the keys at or before its position. Torch's side is
``F.scaled_dot_product_attention`` with the same boolean mask and ``enable_gqa``, and SDPA told ``is_causal``
instead of a mask over operands with a batch axis (as the engine's torch kernel set calls it,
``TorchKernels.attention``: its flash kernel on the CPU), each writing (S, H * D) rows.
The shapes are SmolLM2-135M's (9 heads over 3, head_dim 64) and Qwen3-1.7B's (16 over 8, 128) in f32. Each case
is first checked against torch (relative L2 within 1e-5), then the two sides are timed ``--reps`` times in
alternating order, each repetition the mean of ``--iters`` calls, and the medians are reported with
``sdpa / compiled`` and ``causal / compiled`` (above 1: the compiled kernel is faster), every side on
``--threads`` threads.

    python bench/compiled_attention_cpu.py --threads 2 --spin --json bench/compiled_attention_cpu.json

(``--spin``: with OpenMP's passive wait policy, the default of the CPU benches here, each side's threads sleep between
calls and wake late; at 64 rows that doubles both sides' times, torch's more.)
"""

from __future__ import annotations

import os
import sys

if "--spin" not in sys.argv:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch's OpenMP runtime starts

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_timing import alternating_medians, sequence_bench_args, write_results  # noqa: E402

SEQ_MAX = 8192
SHAPES = {"smollm2": (9, 3, 64), "qwen3-1.7b": (16, 8, 128)}  # name -> (heads, key heads, head_dim)
TOLERANCE = 1e-5


def _attention(heads: int, kv: int, d: int):  # noqa: ANN202 - a CompiledModule
    from tilefoundry import func, jit
    from tilefoundry.dsl import DimVar, Tensor, tf

    seq, ctx = DimVar("seq", 1, SEQ_MAX + 1), DimVar("ctx", 1, SEQ_MAX + 1)
    scale = d**-0.5

    @func
    def attention(q: Tensor[(seq, heads, d), "f32"], keys: Tensor[(ctx, kv, d), "f32"],
                  vals: Tensor[(ctx, kv, d), "f32"], pos_ids: Tensor[(seq,), "i64"], kv_pos: Tensor[(ctx,), "i64"]):
        qh = tf.transpose(q, (1, 0, 2))
        k = tf.repeat_interleave(tf.transpose(keys, (1, 2, 0)), heads // kv, 0)
        v = tf.repeat_interleave(tf.transpose(vals, (1, 0, 2)), heads // kv, 0)
        scores = tf.matmul(qh, k) * scale
        visible = tf.reshape(kv_pos, (1, ctx)) <= tf.reshape(pos_ids, (seq, 1))
        probs = tf.softmax(tf.where(visible, scores, float("-inf")))
        return tf.reshape(tf.transpose(tf.matmul(probs, v), (1, 0, 2)), (seq, heads * d))

    return jit(attention, target="cpu")


def main() -> int:
    args = sequence_bench_args(__doc__, [64, 128, 500, 1000], SHAPES, 1, SEQ_MAX)
    gen = torch.Generator().manual_seed(0)
    results = []
    failed = False
    print(f"{'shape':<12}{'seq':>6}{'compiled ms':>13}{'sdpa ms':>10}{'causal ms':>11}{'sdpa / compiled':>17}"
          f"{'causal / compiled':>19}")
    for name in args.shapes or list(SHAPES):
        heads, kv, d = SHAPES[name]
        compiled = _attention(heads, kv, d)
        for s in args.seq:
            q, k, v = (torch.randn(s, h, d, generator=gen) for h in (heads, kv, kv))
            pos = torch.arange(s)
            mask = pos[None, :] <= pos[:, None]
            out, peer = torch.empty(s, heads * d), torch.empty(s, heads * d)

            def sdpa(q=q, k=k, v=v, mask=mask, peer=peer, scale=d**-0.5) -> None:  # noqa: ANN001
                o = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1),
                                                   attn_mask=mask, scale=scale, enable_gqa=True)
                peer.copy_(o.transpose(0, 1).reshape(peer.shape))

            causal_out = torch.empty(s, heads * d)

            def causal(q=q, k=k, v=v, peer=causal_out, scale=d**-0.5) -> None:  # noqa: ANN001
                # as TorchKernels.attention calls it: a batch axis (SDPA's flash backend takes 4-D operands only)
                o = F.scaled_dot_product_attention(q.transpose(0, 1)[None], k.transpose(0, 1)[None],
                                                   v.transpose(0, 1)[None], is_causal=True, scale=scale,
                                                   enable_gqa=True)
                peer.copy_(o[0].transpose(0, 1).reshape(peer.shape))

            compiled(q, k, v, pos, pos, out)
            sdpa()
            causal()
            error = float((out - peer).norm() / peer.norm())
            causal_error = float((causal_out - peer).norm() / peer.norm())
            if not (error <= TOLERANCE and causal_error <= TOLERANCE):
                print(f"{name} at {s} rows: relative L2 {error:.2e} (compiled), {causal_error:.2e} (is_causal) over "
                      f"{TOLERANCE:.0e}; not timed")
                failed = True
                continue
            sides = {"compiled": lambda c=compiled, q=q, k=k, v=v, p=pos, o=out: c(q, k, v, p, p, o), "sdpa": sdpa,
                     "causal": causal}
            iters, medians = alternating_medians(sides, args.iters, args.reps)
            ratio = medians["sdpa"] / medians["compiled"]
            causal_ratio = medians["causal"] / medians["compiled"]
            print(f"{name:<12}{s:>6}{medians['compiled'] * 1e3:>13.2f}{medians['sdpa'] * 1e3:>10.2f}"
                  f"{medians['causal'] * 1e3:>11.2f}{ratio:>16.2f}x{causal_ratio:>18.2f}x", flush=True)
            results.append({"shape": name, "heads": heads, "kv_heads": kv, "head_dim": d, "seq": s, "iters": iters,
                            "reps": args.reps, "compiled_s": medians["compiled"], "sdpa_s": medians["sdpa"],
                            "sdpa_causal_s": medians["causal"], "sdpa_over_compiled": ratio,
                            "causal_over_compiled": causal_ratio, "relative_l2": error})
    if args.json:
        write_results(args.json, results)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

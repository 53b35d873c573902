"""Benchmark: a prompt's routed experts through the engine's compiled kernel set on the CPU, against torch's slot.

``CompiledKernels.moe`` at several tokens runs the router's slot (``moe_route``: the norm, the router's softmax and
top-k), cuts each chosen expert's tokens into chunks (``moe_groups``) and runs the chunks through the experts' slot
(``moe_grouped``: each chunk against its expert's gathered gate / up / down weights, then each token's results
gathered, weighed and summed into its residual), every slot jitted for the CPU. Torch's side is the engine's torch
kernel set (``TorchKernels.moe``: the router, then each chosen expert's ``F.linear`` over its own tokens and an
``index_add_``). The shapes are random f32 weights of a Qwen3-MoE-like layer scaled down to this machine (hidden
1024, 32 experts of 256, 4 chosen a token) and of the test's tiny Qwen3-MoE; ``--seq`` tokens a step. Each case is
first checked against torch's (relative L2 within 1e-5), then the two sides are timed ``--reps`` times in
alternating order, each repetition the mean of ``--iters`` calls, and the medians are reported with ``torch /
compiled`` (above 1: the compiled set is faster), both on ``--threads`` threads.

    python bench/compiled_moe_cpu.py --threads 2 --spin --json bench/compiled_moe_cpu.json

(``--spin``: OpenMP's default wait policy, the engine's. With the passive one of the CPU benches' default, each of
torch's many small parallel ops a step (an expert's linears, its index_add) wakes sleeping threads: its slot took
54 ms at 512 tokens of the 1024-hidden layer against 24 with the default policy, the compiled side 26 both ways.)
"""

from __future__ import annotations

import os
import sys

if "--spin" not in sys.argv:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch's OpenMP runtime starts

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_timing import alternating_medians, sequence_bench_args, write_results  # noqa: E402

SEQ_MAX = 4096
SHAPES = {"moe-1024": (1024, 256, 32, 4), "tiny-qwen3-moe": (64, 32, 8, 2)}  # name -> (hidden, inter, experts, k)
TOLERANCE = 1e-5


def _kernels(hidden: int, inter: int, experts: int, k: int):  # noqa: ANN202 - (CompiledKernels, TorchKernels)
    from tilefoundry.engine import CompiledKernels, DecoderSpec, TorchKernels
    from tilefoundry.engine.compiled_kernels import SlotShapes, slot_functions
    from tilefoundry.runtime.jit import jit

    spec = DecoderSpec(hidden=hidden, heads=8, kv_heads=4, head_dim=64, vocab=256, eps=1e-6, max_positions=SEQ_MAX,
                       experts_per_token=k, normalize_experts=True)
    shapes = SlotShapes(spec, "f32", 0, False, True, experts, inter)
    compiled = CompiledKernels()
    compiled._shapes = shapes  # as prepare leaves it: the two slots a several-token step runs, built here
    compiled._fns = {name: jit(slot_functions(shapes)[name], target="cpu") for name in ("moe_route", "moe_grouped")}
    return compiled, TorchKernels()


def main() -> int:
    args = sequence_bench_args(__doc__, [16, 128, 512, 2048], SHAPES, 2, SEQ_MAX,
                               " (one token a step runs the one-token slot)")
    gen = torch.Generator().manual_seed(0)
    results = []
    failed = False
    print(f"{'shape':<16}{'seq':>6}{'compiled ms':>13}{'torch ms':>10}{'torch / compiled':>18}")
    for name in args.shapes or list(SHAPES):
        hidden, inter, experts, k = SHAPES[name]
        compiled, torch_set = _kernels(hidden, inter, experts, k)
        norm = 1 + 0.1 * torch.randn(hidden, generator=gen)
        router = torch.randn(experts, hidden, generator=gen) * hidden**-0.5
        gate, up = (torch.randn(experts, inter, hidden, generator=gen) * hidden**-0.5 for _ in range(2))
        down = torch.randn(experts, hidden, inter, generator=gen) * inter**-0.5
        for s in args.seq:
            x = torch.randn(s, hidden, generator=gen)
            out, peer = torch.empty_like(x), torch.empty_like(x)

            weights = (norm, router, gate, up, down)
            sides = {"compiled": lambda x=x, w=weights, o=out, k=k, c=compiled: c.moe(x, *w, o, 1e-6, k, True),
                     "torch": lambda x=x, w=weights, o=peer, k=k, t=torch_set: t.moe(x, *w, o, 1e-6, k, True)}
            for side in sides.values():
                side()
            error = float((out - peer).norm() / peer.norm())
            if not error <= TOLERANCE:
                print(f"{name} at {s} tokens: relative L2 {error:.2e} over {TOLERANCE:.0e}; not timed")
                failed = True
                continue
            iters, medians = alternating_medians(sides, args.iters, args.reps)
            ratio = medians["torch"] / medians["compiled"]
            print(f"{name:<16}{s:>6}{medians['compiled'] * 1e3:>13.2f}{medians['torch'] * 1e3:>10.2f}{ratio:>17.2f}x",
                  flush=True)
            results.append({"shape": name, "hidden": hidden, "intermediate": inter, "experts": experts, "top_k": k,
                            "seq": s, "iters": iters, "reps": args.reps, "compiled_s": medians["compiled"],
                            "torch_s": medians["torch"], "torch_over_compiled": ratio, "relative_l2": error})
    if args.json:
        write_results(args.json, results)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

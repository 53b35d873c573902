"""Benchmark: a prompt's projections, ``x @ w.T``, compiled by ``tilefoundry.jit`` for the CPU against torch's.

The kernel is the DSL's ``tf.matmul(x, tf.transpose(w, (1, 0)))`` over ``x`` of ``[rows, K]`` (rows a DimVar)
and a weight stored ``[N, K]`` as ``nn.Linear`` stores it, jitted with ``target="cpu"``: from 32 rows on it runs
the CPU's blocked GEMM tier (``runtime/common/ops/matmul_blocked.h``). Torch's side is ``torch.mm(x, w.t())``
(its BLAS), both writing into an output allocated once. The shapes are the projections of SmolLM2-135M (q/k/v,
gate/up, down) and of Qwen3-1.7B (q/k/v, down) at M = 128 to 1024 rows. Each case is first checked against a
float64 product (relative L2 within 1e-5 for f32, 1e-2 for bf16), then the two sides are timed ``--reps`` times
in alternating order, each repetition the mean of ``--iters`` calls, and the medians are reported with GFLOP/s
and ``torch / compiled`` (above 1: the compiled kernel is faster). Both sides use ``--threads`` threads; other
processes on the machine slow both sides alike within a repetition.

    python bench/compiled_gemm_cpu.py --threads 2 --json bench/compiled_gemm_cpu.json
"""

from __future__ import annotations

import argparse
import os
import sys

if "--spin" not in sys.argv:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch's OpenMP runtime starts

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_timing import add_host_options, alternating_medians, apply_threads, write_results  # noqa: E402

ROWS_MAX = 1 << 16
SHAPES = {  # name -> (N, K): out features, in features
    "smollm2 qkv": (960, 576),
    "smollm2 gate/up": (3072, 576),
    "smollm2 down": (576, 1536),
    "qwen3-1.7b qkv": (4096, 2048),
    "qwen3-1.7b down": (2048, 6144),
}
TOLERANCE = {"f32": 1e-5, "bf16": 1e-2}


def _linear(n: int, k: int, dtype: str):  # noqa: ANN202 - a CompiledModule
    from tilefoundry import func, jit
    from tilefoundry.dsl import ConstTensor, DimVar, Tensor, tf

    rows = DimVar("rows", 1, ROWS_MAX)

    @func
    def linear(x: Tensor[(rows, k), dtype], w: ConstTensor[(n, k), dtype]):
        return tf.matmul(x, tf.transpose(w, (1, 0)))

    return jit(linear, target="cpu")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, nargs="+", default=[128, 512, 1024])
    ap.add_argument("--shapes", nargs="+", choices=sorted(SHAPES), help="a subset of the shapes, by name")
    ap.add_argument("--dtypes", nargs="+", choices=sorted(TOLERANCE), default=["f32", "bf16"])
    ap.add_argument("--reps", type=int, default=7)
    add_host_options(ap)
    args = ap.parse_args()
    apply_threads(args.threads)
    gen = torch.Generator().manual_seed(0)
    results = []
    failed = False
    print(f"{'shape':<18}{'dtype':>6}{'rows':>6}{'compiled ms':>13}{'torch ms':>10}{'GFLOP/s':>9}"
          f"{'torch / compiled':>18}")
    for name in args.shapes or list(SHAPES):
        n, k = SHAPES[name]
        for dtype in args.dtypes:
            tdt = {"f32": torch.float32, "bf16": torch.bfloat16}[dtype]
            compiled = _linear(n, k, dtype)
            w = (torch.randn(n, k, generator=gen) / k**0.5).to(tdt)
            for m in args.rows:
                x = torch.randn(m, k, generator=gen).to(tdt)
                out, peer = torch.empty(m, n, dtype=tdt), torch.empty(m, n, dtype=tdt)
                compiled(x, w, out)
                want = x.double() @ w.double().t()
                error = float((out.double() - want).norm() / want.norm())
                if not error <= TOLERANCE[dtype]:
                    print(f"{name} {dtype} at {m} rows: relative L2 {error:.2e} over {TOLERANCE[dtype]:.0e}; not timed")
                    failed = True
                    continue
                sides = {"compiled": lambda c=compiled, x=x, w=w, o=out: c(x, w, o),
                         "torch": lambda x=x, w=w, o=peer: torch.mm(x, w.t(), out=o)}
                iters, medians = alternating_medians(sides, args.iters, args.reps)
                flops = 2.0 * m * n * k
                ratio = medians["torch"] / medians["compiled"]
                print(f"{name:<18}{dtype:>6}{m:>6}{medians['compiled'] * 1e3:>13.2f}{medians['torch'] * 1e3:>10.2f}"
                      f"{flops / medians['compiled'] / 1e9:>9.1f}{ratio:>17.2f}x", flush=True)
                results.append({"shape": name, "n": n, "k": k, "dtype": dtype, "rows": m, "iters": iters,
                                "reps": args.reps, "compiled_s": medians["compiled"], "torch_s": medians["torch"],
                                "compiled_gflops": flops / medians["compiled"] / 1e9,
                                "torch_over_compiled": ratio, "relative_l2": error})
    if args.json:
        write_results(args.json, results)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

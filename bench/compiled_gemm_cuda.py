"""Benchmark: a prompt's projections, ``x @ w.T``, compiled by ``tilefoundry.jit`` for the GPU against cuBLAS.

The kernel is the DSL's ``tf.matmul(x, tf.transpose(w, (1, 0)))`` (with ``--residual`` kinds also ``+ r``, the
epilogue o_proj and down run in a prefill) over ``x`` of ``[rows, K]`` bf16 (rows a DimVar of at least 17: the
GEMM schedule of lower/matmul.py, wgmma through cuda/ops/matmul_gmma.cuh) and a weight stored ``[N, K]`` as
``nn.Linear`` stores it, jitted for CUDA. Torch's side is ``torch.matmul(x, w.T, out=...)`` (cuBLAS; ``torch.addmm``
for the residual kinds). The shapes are Qwen3-1.7B's projections (q/k/v, o_proj, gate/up, down) at M = 1024 and
4096 rows (issue 23's acceptance shapes); ``--shapes o_proj down`` times o_proj and down without their residual,
which tells the epilogue's cost from the main loop's. Each case is first checked against cuBLAS's result (relative
L2 within 1e-2), then both run as replays of a CUDA graph of ``--launches`` back-to-back launches cycling through
three copies of their operands (bench/graph_timing.py), the medians of ``--reps`` replays interleaved between the
two. Reported: microseconds, TFLOP/s and ``cuBLAS / compiled`` (above 1: the compiled kernel is faster).
``--variant NAME=FLAGS`` also builds each shape with those compiler flags (a build-time knob of matmul_gmma.cuh)
and times it in the same graphs' rotation, so a schedule choice is measured against the default in one run.

    python bench/compiled_gemm_cuda.py --json compiled_gemm_h200.json
    python bench/compiled_gemm_cuda.py --rows 1024 --variant wg64=-DTILEFOUNDRY_MATMUL_GMMA_WARPGROUP_ROWS=64
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from graph_timing import graph_of, time_graphs  # noqa: E402

from tilefoundry import CompilerOptions, jit  # noqa: E402
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, func, tf  # noqa: E402
from tilefoundry.ir.core.function import Function  # noqa: E402

SHAPES = {  # name -> (N, K, residual): Qwen3-1.7B's projections
    "qkv": (4096, 2048, False),
    "o_proj + residual": (2048, 2048, True),
    "gate/up": (12288, 2048, False),
    "down + residual": (2048, 6144, True),
    # o_proj and down without their residual (not a prefill's own; --shapes asks for them): the epilogue's cost
    # apart from the main loop's
    "o_proj": (2048, 2048, False),
    "down": (2048, 6144, False),
}
DEFAULT_SHAPES = ("qkv", "o_proj + residual", "gate/up", "down + residual")
ROWS = DimVar("rows", 17, 8193)
TOLERANCE = 1e-2
COPIES = 3


def projection(n: int, k: int, residual: bool) -> Function:
    """x @ w.T (+ r) for a weight of (n, k), bf16, at ROWS rows."""
    if residual:
        @func
        def linear_residual(x: Tensor[(ROWS, k), "bf16"], w: ConstTensor[(n, k), "bf16"],
                            r: Tensor[(ROWS, n), "bf16"]):
            return tf.matmul(x, tf.transpose(w, (1, 0))) + r
        return linear_residual

    @func
    def linear(x: Tensor[(ROWS, k), "bf16"], w: ConstTensor[(n, k), "bf16"]):
        return tf.matmul(x, tf.transpose(w, (1, 0)))
    return linear


def run_case(kernels: dict[str, object], m: int, n: int, k: int, residual: bool, launches: int, reps: int) -> dict:
    """One shape at ``m`` rows: the check of each compiled kernel (``kernels``: ``compiled``, and each
    ``--variant`` by its name) against cuBLAS, then the medians of all of them and cuBLAS, their graphs replayed in
    turn."""
    dev = torch.device("cuda")
    xs = [torch.randn(m, k, device=dev, dtype=torch.bfloat16) for _ in range(COPIES)]
    ws = [torch.randn(n, k, device=dev, dtype=torch.bfloat16) / k**0.5 for _ in range(COPIES)]
    rs = [torch.randn(m, n, device=dev, dtype=torch.bfloat16) for _ in range(COPIES)] if residual else []
    ours = [torch.full((m, n), float("nan"), device=dev, dtype=torch.bfloat16) for _ in range(COPIES)]
    theirs = [torch.empty(m, n, device=dev, dtype=torch.bfloat16) for _ in range(COPIES)]

    def launcher(compiled: object) -> Callable[[int], None]:
        def launch(i: int) -> None:
            compiled(xs[i], ws[i], *rs[i:i + 1], ours[i])
        return launch

    def cublas_launch(i: int) -> None:
        if residual:
            torch.addmm(rs[i], xs[i], ws[i].T, out=theirs[i])
        else:
            torch.matmul(xs[i], ws[i].T, out=theirs[i])

    cublas_launch(0)
    graphs = {}
    for side, compiled in kernels.items():
        ours[0].fill_(float("nan"))
        launcher(compiled)(0)
        torch.cuda.synchronize()
        err = ((ours[0].float() - theirs[0].float()).norm() / theirs[0].float().norm()).item()
        if not err <= TOLERANCE:
            raise AssertionError(f"compiled_gemm_cuda.py: {side} at {m} x {n} x {k}: relative L2 {err:.3g} from "
                                 "cuBLAS")
        error = err if side == "compiled" else error
        graphs[side] = graph_of(launcher(compiled), launches, COPIES)
    graphs["cuBLAS"] = graph_of(cublas_launch, launches, COPIES)
    us = time_graphs(graphs, launches, reps)
    flops = 2 * m * n * k
    return {"m": m, "n": n, "k": k, "residual": residual, "rel_l2_vs_cublas": error, "us": us,
            "tflops": {side: flops / t / 1e6 for side, t in us.items()},
            "speed_vs_cublas": us["cuBLAS"] / us["compiled"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, nargs="+", default=[1024, 4096])
    ap.add_argument("--shapes", nargs="+", choices=sorted(SHAPES), help="the shapes, by name (default: "
                    f"{', '.join(DEFAULT_SHAPES)})")
    ap.add_argument("--launches", type=int, default=10, help="launches a graph (default 10)")
    ap.add_argument("--reps", type=int, default=15, help="replays of each graph (default 15)")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=FLAGS",
                    help="also jit each shape with these compiler flags (CompilerOptions.extra_flags, space-separated) "
                         "and time it beside the default build, e.g. "
                         "wg64=-DTILEFOUNDRY_MATMUL_GMMA_WARPGROUP_ROWS=64 (matmul_gmma.cuh's build-time knobs)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    variants = {"compiled": CompilerOptions()}
    for v in args.variant:
        name, sep, flags = v.partition("=")
        if not sep or not name or not flags.split():
            ap.error(f"--variant takes NAME=FLAGS, got {v!r}")
        variants[f"compiled ({name})"] = CompilerOptions(extra_flags=tuple(flags.split()))
    if not torch.cuda.is_available():
        print("compiled_gemm_cuda.py: needs a CUDA GPU (torch sees none)", file=sys.stderr)
        return 2
    names = args.shapes or list(DEFAULT_SHAPES)
    builds = [(s, v) for s in names for v in variants]
    with ThreadPoolExecutor(max_workers=len(builds)) as pool:  # the nvcc builds side by side
        kernels = list(pool.map(lambda b: jit(projection(*SHAPES[b[0]]), target="cuda", options=variants[b[1]]),
                                builds))
    built: dict[str, dict[str, object]] = {s: {} for s in names}
    for (s, v), kernel in zip(builds, kernels):
        built[s][v] = kernel
    results = []
    print(f"{'shape':<20}{'M':>6}{'compiled us':>13}{'TFLOP/s':>9}{'cuBLAS us':>11}{'TFLOP/s':>9}{'vs cuBLAS':>11}")
    for m in args.rows:
        for name in names:
            n, k, residual = SHAPES[name]
            r = run_case(built[name], m, n, k, residual, args.launches, args.reps)
            r["shape"] = name
            results.append(r)
            print(f"{name:<20}{m:>6}{r['us']['compiled']:>13.1f}{r['tflops']['compiled']:>9.0f}"
                  f"{r['us']['cuBLAS']:>11.1f}{r['tflops']['cuBLAS']:>9.0f}{r['speed_vs_cublas']:>10.2f}x"
                  + "".join(f"  {v} {r['us'][v]:.1f} us ({r['us']['cuBLAS'] / r['us'][v]:.2f}x)"
                            for v in variants if v != "compiled"), flush=True)
    if args.json:
        out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "dtype": "bfloat16",
               "variants": {v: list(o.extra_flags) for v, o in variants.items()},
               "launches_per_graph": args.launches, "reps": args.reps, "cases": results}
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

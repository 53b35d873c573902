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
``gate/up + SwiGLU`` is the engine's prompt MLP before down: ``silu(x @ gate.T) * (x @ up.T)`` of gate and up
interleaved row by row in one weight of 12288 rows (the engine's layout), compiled as one GEMM of the pair (both
products of a tile through one wgmma, the SwiGLU its epilogue: lower/pairs.py); its cuBLAS side is the matmul of the
whole weight alone (the same FLOPs), and ``torch`` also times that matmul followed by torch's silu and multiply (what
a torch prefill runs).
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

SHAPES = {  # name -> (N, K, kind): Qwen3-1.7B's projections (N the weight's rows)
    "qkv": (4096, 2048, "plain"),
    "o_proj + residual": (2048, 2048, "residual"),
    "gate/up": (12288, 2048, "plain"),
    "down + residual": (2048, 6144, "residual"),
    "gate/up + SwiGLU": (12288, 2048, "swiglu"),
    # o_proj and down without their residual (not a prefill's own; --shapes asks for them): the epilogue's cost
    # apart from the main loop's
    "o_proj": (2048, 2048, "plain"),
    "down": (2048, 6144, "plain"),
}
DEFAULT_SHAPES = ("qkv", "o_proj + residual", "gate/up", "down + residual", "gate/up + SwiGLU")
ROWS = DimVar("rows", 17, 8193)
TOLERANCE = 1e-2
COPIES = 3


def projection(n: int, k: int, kind: str) -> Function:
    """x @ w.T (+ r, kind ``residual``) for a weight of (n, k), bf16, at ROWS rows; of kind ``swiglu``, silu(x @
    gate.T) * (x @ up.T) of w's even and odd rows."""
    if kind == "swiglu":
        @func
        def swiglu(x: Tensor[(ROWS, k), "bf16"], w: ConstTensor[(n, k), "bf16"]):
            gate = tf.slice(w, (0, 0), (n // 2, k), (2, 1))
            up = tf.slice(w, (1, 0), (n // 2, k), (2, 1))
            return tf.silu(tf.matmul(x, tf.transpose(gate, (1, 0)))) * tf.matmul(x, tf.transpose(up, (1, 0)))
        return swiglu
    if kind == "residual":
        @func
        def linear_residual(x: Tensor[(ROWS, k), "bf16"], w: ConstTensor[(n, k), "bf16"],
                            r: Tensor[(ROWS, n), "bf16"]):
            return tf.matmul(x, tf.transpose(w, (1, 0))) + r
        return linear_residual

    @func
    def linear(x: Tensor[(ROWS, k), "bf16"], w: ConstTensor[(n, k), "bf16"]):
        return tf.matmul(x, tf.transpose(w, (1, 0)))
    return linear


def run_case(kernels: dict[str, object], m: int, n: int, k: int, kind: str, launches: int, reps: int) -> dict:
    """One shape at ``m`` rows: the check of each compiled kernel (``kernels``: ``compiled``, and each
    ``--variant`` by its name) against cuBLAS (and torch's silu and multiply, of kind ``swiglu``), then the medians
    of all of them and cuBLAS, their graphs replayed in turn."""
    dev = torch.device("cuda")
    residual, swiglu = kind == "residual", kind == "swiglu"
    cols = n // 2 if swiglu else n  # the result's
    xs = [torch.randn(m, k, device=dev, dtype=torch.bfloat16) for _ in range(COPIES)]
    ws = [torch.randn(n, k, device=dev, dtype=torch.bfloat16) / k**0.5 for _ in range(COPIES)]
    rs = [torch.randn(m, n, device=dev, dtype=torch.bfloat16) for _ in range(COPIES)] if residual else []
    ours = [torch.full((m, cols), float("nan"), device=dev, dtype=torch.bfloat16) for _ in range(COPIES)]
    theirs = [torch.empty(m, n, device=dev, dtype=torch.bfloat16) for _ in range(COPIES)]
    swiglus = [torch.empty(m, cols, device=dev, dtype=torch.bfloat16) for _ in range(COPIES)]

    def launcher(compiled: object) -> Callable[[int], None]:
        def launch(i: int) -> None:
            compiled(xs[i], ws[i], *rs[i:i + 1], ours[i])
        return launch

    def cublas_launch(i: int) -> None:
        if residual:
            torch.addmm(rs[i], xs[i], ws[i].T, out=theirs[i])
        else:
            torch.matmul(xs[i], ws[i].T, out=theirs[i])

    def torch_launch(i: int) -> None:  # what a torch prefill runs for the SwiGLU: the matmul, then silu and multiply
        cublas_launch(i)
        torch.mul(torch.nn.functional.silu(theirs[i][:, 0::2]), theirs[i][:, 1::2], out=swiglus[i])

    torch_launch(0) if swiglu else cublas_launch(0)
    expected = swiglus[0] if swiglu else theirs[0]
    graphs = {}
    for side, compiled in kernels.items():
        ours[0].fill_(float("nan"))
        launcher(compiled)(0)
        torch.cuda.synchronize()
        err = ((ours[0].float() - expected.float()).norm() / expected.float().norm()).item()
        if not err <= TOLERANCE:
            raise AssertionError(f"compiled_gemm_cuda.py: {side} at {m} x {n} x {k}: relative L2 {err:.3g} from "
                                 "cuBLAS")
        error = err if side == "compiled" else error
        graphs[side] = graph_of(launcher(compiled), launches, COPIES)
    graphs["cuBLAS"] = graph_of(cublas_launch, launches, COPIES)
    if swiglu:
        graphs["torch"] = graph_of(torch_launch, launches, COPIES)
    us = time_graphs(graphs, launches, reps)
    flops = 2 * m * n * k
    out = {"m": m, "n": n, "k": k, "kind": kind, "rel_l2_vs_cublas": error, "us": us,
           "tflops": {side: flops / t / 1e6 for side, t in us.items()},
           "speed_vs_cublas": us["cuBLAS"] / us["compiled"]}
    if swiglu:
        out["speed_vs_torch"] = us["torch"] / us["compiled"]
    return out


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
            n, k, kind = SHAPES[name]
            r = run_case(built[name], m, n, k, kind, args.launches, args.reps)
            r["shape"] = name
            results.append(r)
            print(f"{name:<20}{m:>6}{r['us']['compiled']:>13.1f}{r['tflops']['compiled']:>9.0f}"
                  f"{r['us']['cuBLAS']:>11.1f}{r['tflops']['cuBLAS']:>9.0f}{r['speed_vs_cublas']:>10.2f}x"
                  + "".join(f"  {v} {r['us'][v]:.1f} us ({r['us']['cuBLAS'] / r['us'][v]:.2f}x)"
                            for v in variants if v != "compiled")
                  + (f"  torch (cuBLAS, silu, mul) {r['us']['torch']:.1f} us ({r['speed_vs_torch']:.2f}x)"
                     if "torch" in r["us"] else ""), flush=True)
    if args.json:
        out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "dtype": "bfloat16",
               "variants": {v: list(o.extra_flags) for v, o in variants.items()},
               "launches_per_graph": args.launches, "reps": args.reps, "cases": results}
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

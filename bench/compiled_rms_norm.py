"""Benchmark: RMSNorm compiled by ``tilefoundry.jit`` for the CPU against torch's, at hidden 4096.

The kernel is the DSL's ``tf.rms_norm`` over ``[rows, 4096]`` (rows a DimVar), jitted with
``target="cpu"``; torch's side is ``torch.nn.functional.rms_norm`` (weight multiplied in the input's
dtype) and the evaluator's own formula (f32 through the weight multiply, as the compiled kernel
computes). Both run on the same inputs, their outputs are first compared with ``check``, then each is
timed ``--reps`` times in alternating order (compiled, torch, compiled, torch, ...), each repetition the
median-free mean of ``--iters`` calls, and the medians over repetitions are reported. Both sides use the
process's threads (torch's intra-op pool and the kernel's OpenMP CTAs; pass ``--threads`` to set both).
Torch's OpenMP runtime and the kernel's are two thread teams on the same cores: with the default wait
policy each team spins after its work and slows the other's next call, which is what alternating runs
measure. The bench therefore sets ``OMP_WAIT_POLICY=PASSIVE`` (both teams sleep when idle) unless it is set
already; ``--spin`` keeps the default.

GB/s counts the bytes the op must move: x read, y written, the weight read once. Prints a table and,
with ``--json PATH``, writes the numbers.

    python bench/compiled_rms_norm.py --rows 1 64 1024 --json bench/compiled_rms_norm_cpu.json
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

HIDDEN = 4096
EPS = 1e-6


def _kernel():  # noqa: ANN202 - a @func
    from tilefoundry import func
    from tilefoundry.dsl import ConstTensor, DimVar, Tensor, tf

    rows = DimVar("rows", 1, 1 << 20)

    @func
    def rms_norm_bf16(x: Tensor[(rows, HIDDEN), "bf16"], weight: ConstTensor[(HIDDEN,), "bf16"]):
        return tf.rms_norm(x, weight, EPS)

    @func
    def rms_norm_f32(x: Tensor[(rows, HIDDEN), "f32"], weight: ConstTensor[(HIDDEN,), "f32"]):
        return tf.rms_norm(x, weight, EPS)

    return {torch.bfloat16: rms_norm_bf16, torch.float32: rms_norm_f32}


def _torch_formula(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + EPS) * w.float()).to(x.dtype)


def _torch_fused(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.rms_norm(x, (HIDDEN,), w, EPS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 64, 1024])
    parser.add_argument("--reps", type=int, default=11)
    add_host_options(parser)
    args = parser.parse_args()
    apply_threads(args.threads)

    from tilefoundry import jit
    from tilefoundry.runtime.check import allclose, check

    kernels = _kernel()
    compiled = {dt: jit(k, target="cpu") for dt, k in kernels.items()}
    results = []
    header = f"{'dtype':<6} {'rows':>6} {'compiled us':>12} {'F.rms_norm us':>14} {'formula us':>11} " \
             f"{'compiled GB/s':>14} {'vs F.rms_norm':>14} {'vs formula':>11}"
    print(header)
    print("-" * len(header))
    for dt, c in compiled.items():
        for rows in args.rows:
            g = torch.Generator().manual_seed(rows)
            x = torch.randn(rows, HIDDEN, generator=g).to(dt)
            w = torch.randn(HIDDEN, generator=g).to(dt)
            out = torch.empty_like(x)
            # Two bf16 ulps (rms_norm rounds before and after the weight multiply, and a sum in another order
            # may tip either rounding); f32 to a few ulps.
            tol = allclose(atol=1e-3, rtol=2**-6) if dt == torch.bfloat16 else allclose(atol=1e-5, rtol=1e-5)
            report = check(c, kernels[dt], (x, w), expect={"output": [tol]})
            assert report.passed, str(report)
            sides = {"compiled": lambda c=c, x=x, w=w, out=out: c(x, w, out),
                     "fused": lambda x=x, w=w: _torch_fused(x, w), "formula": lambda x=x, w=w: _torch_formula(x, w)}
            iters, med = alternating_medians(sides, args.iters, args.reps)
            moved = (2 * rows * HIDDEN + HIDDEN) * x.element_size()
            row = {"dtype": str(dt).replace("torch.", ""), "rows": rows, "hidden": HIDDEN, "iters": iters,
                   "reps": args.reps, "compiled_s": med["compiled"], "torch_rms_norm_s": med["fused"],
                   "torch_formula_s": med["formula"], "compiled_gbps": moved / med["compiled"] / 1e9,
                   "speedup_vs_rms_norm": med["fused"] / med["compiled"],
                   "speedup_vs_formula": med["formula"] / med["compiled"]}
            results.append(row)
            print(f"{row['dtype']:<6} {rows:>6} {med['compiled'] * 1e6:>12.1f} {med['fused'] * 1e6:>14.1f} "
                  f"{med['formula'] * 1e6:>11.1f} {row['compiled_gbps']:>14.2f} "
                  f"{row['speedup_vs_rms_norm']:>13.2f}x {row['speedup_vs_formula']:>10.2f}x")
    if args.json:
        write_results(args.json, results)


if __name__ == "__main__":
    main()

"""Benchmark: the row kernels compiled by ``tilefoundry.jit`` for the CPU against torch's eager ops, same run.

Kernels (the DSL's own ops over ``[rows, hidden]``, rows a DimVar, jitted with ``target="cpu"``): bf16
``rms_norm``, residual add + ``rms_norm`` (two outputs), ``softmax`` and SwiGLU (``silu(gate) * up``), and
f32 ``rms_norm`` and ``softmax``. Torch's side is what a user writes in eager torch:
``torch.nn.functional.rms_norm``, ``x + residual`` then ``rms_norm``, ``torch.softmax``,
``torch.nn.functional.silu(gate) * up``. The compiled kernel writes into outputs allocated once (as
``bench/compiled_rms_norm.py`` calls it); torch allocates its results, from its allocator's cache.

Each kernel's outputs are first compared with ``check`` against the evaluator, then the two sides are timed
``--reps`` times in alternating order (compiled, torch, compiled, torch, ...), each repetition the mean of
``--iters`` calls; the medians over repetitions are reported, with ``torch / compiled`` (above 1: the
compiled kernel is faster). Other processes on the machine slow both sides alike within a repetition;
rerun when the machine is quiet. Both sides use ``--threads`` threads (torch's intra-op pool and the
kernel's OpenMP CTAs). ``OMP_WAIT_POLICY=PASSIVE`` is set unless it is set already (two OpenMP teams on the
same cores: with the default policy each spins after its work and slows the other's next call).

    python bench/compiled_rows_cpu.py --rows 2048 --hidden 4096 --threads 2 --json bench/compiled_rows_cpu.json
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

if "--spin" not in sys.argv:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch's OpenMP runtime starts

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_timing import add_host_options, alternating_medians, apply_threads, write_results  # noqa: E402

EPS = 1e-6
ROWS_MAX = 1 << 20


def _kernels(hidden: int) -> dict[str, tuple[Any, Callable[..., Any], str]]:
    """name -> (the @func, torch's eager equivalent, the dtype of its inputs)."""
    from tilefoundry.dsl import ConstTensor, DimVar, Tensor, tf
    from tilefoundry.ir.core.function import Function

    rows = DimVar("rows", 1, ROWS_MAX)

    def rms_norm_bf16(x: Tensor[(rows, hidden), "bf16"], weight: ConstTensor[(hidden,), "bf16"]):
        return tf.rms_norm(x, weight, EPS)

    def add_rms_norm_bf16(x: Tensor[(rows, hidden), "bf16"], residual: Tensor[(rows, hidden), "bf16"],
                          weight: ConstTensor[(hidden,), "bf16"]):
        h = x + residual
        return tf.rms_norm(h, weight, EPS), h

    def softmax_bf16(x: Tensor[(rows, hidden), "bf16"]):
        return tf.softmax(x, axis=-1)

    def swiglu_bf16(gate: Tensor[(rows, hidden), "bf16"], up: Tensor[(rows, hidden), "bf16"]):
        return tf.silu(gate) * up

    def rms_norm_f32(x: Tensor[(rows, hidden), "f32"], weight: ConstTensor[(hidden,), "f32"]):
        return tf.rms_norm(x, weight, EPS)

    def softmax_f32(x: Tensor[(rows, hidden), "f32"]):
        return tf.softmax(x, axis=-1)

    F = torch.nn.functional

    def add_rms_norm_torch(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = x + r
        return F.rms_norm(h, (hidden,), w, EPS), h

    eager: dict[str, tuple[Callable[..., Any], str]] = {
        "rms_norm_bf16": (lambda x, w: F.rms_norm(x, (hidden,), w, EPS), "bf16"),
        "add_rms_norm_bf16": (add_rms_norm_torch, "bf16"),
        "softmax_bf16": (lambda x: torch.softmax(x, -1), "bf16"),
        "swiglu_bf16": (lambda g, u: F.silu(g) * u, "bf16"),
        "rms_norm_f32": (lambda x, w: F.rms_norm(x, (hidden,), w, EPS), "f32"),
        "softmax_f32": (lambda x: torch.softmax(x, -1), "f32"),
    }
    scope = {"hidden": hidden, "rows": rows, "Tensor": Tensor, "ConstTensor": ConstTensor}
    fns = (rms_norm_bf16, add_rms_norm_bf16, softmax_bf16, swiglu_bf16, rms_norm_f32, softmax_f32)
    return {f.__name__: (Function(f, name=f.__name__, localns=scope), *eager[f.__name__]) for f in fns}


def _inputs(name: str, rows: int, hidden: int, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(len(name))

    def r(*shape: int, scale: float = 1.0) -> torch.Tensor:
        return (torch.randn(shape, generator=g) * scale).to(dtype)

    if name.startswith("add_rms_norm"):
        return r(rows, hidden), r(rows, hidden), r(hidden)
    if name.startswith("rms_norm"):
        return r(rows, hidden), r(hidden)
    if name.startswith("softmax"):
        return (r(rows, hidden, scale=4.0),)
    return r(rows, hidden), r(rows, hidden)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[2048])
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--kernels", nargs="+", help="a subset of the kernels, by name")
    parser.add_argument("--reps", type=int, default=15)
    add_host_options(parser)
    args = parser.parse_args()
    apply_threads(args.threads)

    from tilefoundry import jit
    from tilefoundry.runtime.check import allclose, check

    kernels = _kernels(args.hidden)
    unknown = set(args.kernels or ()) - set(kernels)
    if unknown:
        parser.error(f"unknown kernels {sorted(unknown)}; choose from {sorted(kernels)}")
    chosen = {k: v for k, v in kernels.items() if not args.kernels or k in args.kernels}
    header = f"{'kernel':<18} {'rows':>6} {'compiled us':>12} {'torch us':>10} {'compiled GB/s':>14} " \
             f"{'torch / compiled':>17}"
    print(header)
    print("-" * len(header))
    results = []
    for name, (fn, eager, dt) in chosen.items():
        dtype = torch.bfloat16 if dt == "bf16" else torch.float32
        compiled = jit(fn, target="cpu")
        for rows in args.rows:
            inputs = _inputs(name, rows, args.hidden, dtype)
            # bf16: two ulps (rms_norm rounds before and after the weight multiply) over an absolute floor; f32: a
            # few ulps (a sum in another order)
            tol = allclose(atol=1e-3, rtol=2**-6) if dt == "bf16" else allclose(atol=1e-6, rtol=1e-5)
            outs = compiled(*inputs)
            outs = outs if isinstance(outs, tuple) else (outs,)
            paths = ["output"] if len(outs) == 1 else [f"output[{i}]" for i in range(len(outs))]
            # the evaluator computes in f32 through the bf16 roundings, as the kernel does
            report = check(compiled, fn, inputs, expect={p: [tol] for p in paths})
            assert report.passed, str(report)
            sides = {"compiled": lambda c=compiled, i=inputs, o=outs: c(*i, *o),
                     "torch": lambda e=eager, i=inputs: e(*i)}
            iters, med = alternating_medians(sides, args.iters, args.reps)
            moved = sum(t.numel() * t.element_size() for t in (*inputs, *outs))
            row = {"kernel": name, "dtype": dt, "rows": rows, "hidden": args.hidden, "iters": iters,
                   "reps": args.reps, "compiled_s": med["compiled"], "torch_s": med["torch"],
                   "compiled_gbps": moved / med["compiled"] / 1e9,
                   "torch_over_compiled": med["torch"] / med["compiled"]}
            results.append(row)
            print(f"{name:<18} {rows:>6} {med['compiled'] * 1e6:>12.1f} {med['torch'] * 1e6:>10.1f} "
                  f"{row['compiled_gbps']:>14.2f} {row['torch_over_compiled']:>16.2f}x", flush=True)
    if args.json:
        write_results(args.json, results)


if __name__ == "__main__":
    main()

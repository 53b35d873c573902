"""Copy bandwidth: the runtime's copy kernels (bench/copy_bandwidth.cu) against torch's
device-to-device copy, in one process, on the same 2 GiB buffers: a float32 copy, and a bf16 copy
through float registers (the loads and stores of a row kernel: 16-byte accesses, packed
conversions both ways), against torch's copy of the same bf16 buffers.

Bandwidth counts bytes read plus bytes written. Each variant is checked for an exact copy before
it is timed; times are medians of CUDA-event timings after warm-up, interleaved across variants.
The target (>= 0.85 of torch) applies to the best variant of each kind.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics

import torch

ITERS = (2, 4, 8)


def load(path: str) -> ctypes.CDLL:
    lib = ctypes.CDLL(path)
    lib.tf_copy_f32.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong, ctypes.c_int, ctypes.c_void_p]
    lib.tf_copy_f32.restype = ctypes.c_int
    lib.tf_copy_bf16_via_f32.argtypes = lib.tf_copy_f32.argtypes
    lib.tf_copy_bf16_via_f32.restype = ctypes.c_int
    return lib


def time_ms(fn, reps: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lib", required=True, help="shared library built from copy_bandwidth.cu")
    parser.add_argument("--json", required=True, help="where to write the results")
    parser.add_argument("--gib", type=float, default=2.0, help="bytes copied per run, in GiB")
    parser.add_argument("--reps", type=int, default=100)
    args = parser.parse_args()

    lib = load(args.lib)
    n = int(args.gib * (1 << 30)) // 4
    n -= n % (8 * 256 * 8)
    x = torch.empty(n, dtype=torch.float32, device="cuda").uniform_(-1.0, 1.0)
    y = torch.empty_like(x)
    nb = 2 * n  # bf16 elements in the same number of bytes
    xb = torch.empty(nb, dtype=torch.bfloat16, device="cuda").uniform_(-1.0, 1.0)
    yb = torch.empty_like(xb)
    nbytes = n * 4

    def ours(entry, src: torch.Tensor, dst: torch.Tensor, count: int, iters: int):
        def run():
            stream = torch.cuda.current_stream().cuda_stream
            rc = entry(src.data_ptr(), dst.data_ptr(), count, iters, stream)
            if rc != 0:
                raise RuntimeError(f"{entry.__name__} failed with cudaError {rc}")

        return run

    fns = {"torch": lambda: y.copy_(x), "torch_bf16": lambda: yb.copy_(xb)}
    pairs = {"torch": (x, y), "torch_bf16": (xb, yb)}
    for i in ITERS:
        fns[f"runtime_iter{i}"] = ours(lib.tf_copy_f32, x, y, n, i)
        pairs[f"runtime_iter{i}"] = (x, y)
        fns[f"runtime_bf16_via_f32_iter{i}"] = ours(lib.tf_copy_bf16_via_f32, xb, yb, nb, i)
        pairs[f"runtime_bf16_via_f32_iter{i}"] = (xb, yb)

    correct = {}
    for name, fn in fns.items():
        src, dst = pairs[name]
        dst.fill_(float("nan"))
        fn()
        torch.cuda.synchronize()
        correct[name] = bool(torch.equal(src, dst))

    samples: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(args.reps):
        for name, fn in fns.items():
            samples[name] += time_ms(fn, reps=1, warmup=1)
    tbps = {k: 2 * nbytes / (statistics.median(v) * 1e-3) / 1e12 for k, v in samples.items()}

    def best_of(prefix: str) -> str | None:
        names = [f"{prefix}{i}" for i in ITERS if correct[f"{prefix}{i}"]]
        return max(names, key=lambda k: tbps[k], default=None)

    best = best_of("runtime_iter")
    best_bf16 = best_of("runtime_bf16_via_f32_iter")
    ratio = tbps[best] / tbps["torch"] if best else 0.0
    ratio_bf16 = tbps[best_bf16] / tbps["torch_bf16"] if best_bf16 else 0.0
    result = {
        "device": torch.cuda.get_device_name(),
        "bytes_copied": nbytes,
        "bandwidth_counts": "bytes read + bytes written",
        "median_ms": {k: statistics.median(v) for k, v in samples.items()},
        "tb_per_s": tbps,
        "exact_copy": correct,
        "best_runtime_variant": best,
        "ratio_best_runtime_to_torch": ratio,
        "best_runtime_bf16_variant": best_bf16,
        "ratio_best_runtime_bf16_to_torch_bf16": ratio_bf16,
        "target_ratio": 0.85,
        "meets_target": ratio >= 0.85 and ratio_bf16 >= 0.85,
    }
    with open(args.json, "w") as f:
        json.dump(result, f, indent=2)

    print(f"copy bandwidth on {result['device']}, {nbytes / (1 << 30):.2f} GiB, read + write")
    print(f"{'kernel':<28} {'median ms':>10} {'TB/s':>8}  exact")
    for k in fns:
        print(f"{k:<28} {result['median_ms'][k]:>10.3f} {tbps[k]:>8.3f}  {'yes' if correct[k] else 'NO'}")
    for label, b, r in (("f32", best, ratio), ("bf16 via f32", best_bf16, ratio_bf16)):
        verdict = "met" if r >= 0.85 else "NOT met"
        print(f"{label}: best runtime ({b}) / torch = {r:.3f} (target >= 0.85: {verdict})")
    return 0 if best is not None and best_bf16 is not None else 1


if __name__ == "__main__":
    raise SystemExit(main())

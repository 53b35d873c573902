"""Copy bandwidth: the runtime's copy kernel (bench/copy_bandwidth.cu) against torch's
device-to-device copy, in one process, on the same 2 GiB buffers.

Bandwidth counts bytes read plus bytes written. Each variant is checked for an exact copy before
it is timed; times are medians of CUDA-event timings after warm-up, interleaved across variants.
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
    n -= n % (8 * 256 * 4)
    x = torch.empty(n, dtype=torch.float32, device="cuda").uniform_(-1.0, 1.0)
    y = torch.empty_like(x)
    nbytes = n * 4

    def ours(iters: int):
        def run():
            stream = torch.cuda.current_stream().cuda_stream
            rc = lib.tf_copy_f32(x.data_ptr(), y.data_ptr(), n, iters, stream)
            if rc != 0:
                raise RuntimeError(f"tf_copy_f32 failed with cudaError {rc}")

        return run

    def torch_copy():
        y.copy_(x)

    correct = {}
    for iters in ITERS:
        y.fill_(float("nan"))
        ours(iters)()
        torch.cuda.synchronize()
        correct[iters] = bool(torch.equal(x, y))

    fns = {"torch": torch_copy} | {f"runtime_iter{i}": ours(i) for i in ITERS}
    samples: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(args.reps):
        for name, fn in fns.items():
            samples[name] += time_ms(fn, reps=1, warmup=1)
    tbps = {k: 2 * nbytes / (statistics.median(v) * 1e-3) / 1e12 for k, v in samples.items()}

    best = max((f"runtime_iter{i}" for i in ITERS if correct[i]), key=lambda k: tbps[k], default=None)
    ratio = tbps[best] / tbps["torch"] if best else 0.0
    result = {
        "device": torch.cuda.get_device_name(),
        "bytes_copied": nbytes,
        "bandwidth_counts": "bytes read + bytes written",
        "median_ms": {k: statistics.median(v) for k, v in samples.items()},
        "tb_per_s": tbps,
        "exact_copy": {f"runtime_iter{i}": correct[i] for i in ITERS},
        "best_runtime_variant": best,
        "ratio_best_runtime_to_torch": ratio,
        "target_ratio": 0.85,
        "meets_target": ratio >= 0.85,
    }
    with open(args.json, "w") as f:
        json.dump(result, f, indent=2)

    print(f"copy bandwidth on {result['device']}, {nbytes / (1 << 30):.2f} GiB, read + write")
    print(f"{'kernel':<16} {'median ms':>10} {'TB/s':>8}  exact")
    for k in fns:
        exact = "yes" if k == "torch" else ("yes" if correct[int(k.removeprefix("runtime_iter"))] else "NO")
        print(f"{k:<16} {result['median_ms'][k]:>10.3f} {tbps[k]:>8.3f}  {exact}")
    print(f"best runtime ({best}) / torch = {ratio:.3f} (target >= 0.85: {'met' if ratio >= 0.85 else 'NOT met'})")
    return 0 if best is not None else 1


if __name__ == "__main__":
    raise SystemExit(main())

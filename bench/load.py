"""Benchmark: SafetensorsResource reading every tensor of a checkpoint vs safetensors.torch.load_file.

Generates a Llama-shaped bf16 checkpoint (an embedding, then per layer q/k/v/o, gate/up/down and two norms)
of about ``--size-gb`` GB as ``--shards`` shards plus ``model.safetensors.index.json``, in a temporary folder
or in ``--dir``. Then, in one process and on the same files:

1. warms the page cache by reading every file once, and checks once (untimed) that both readers return
   bit-identical tensors for every key;
2. times, ``--reps`` times and in rotating order, (a) a fresh ``SafetensorsResource(dir, device=...)``
   loading every key of the index, (b) ``safetensors.torch.load_file(shard, device=...)`` on every shard,
   and (c) ``safe_open(shard).get_tensor(key)`` for every key -- the primitive the resource is built on, so
   (a) against (c) isolates the resource's own cost.

Two modes are timed on the CPU, because safetensors hands back zero-copy views of its memory map there:

* ``mapped``: what each reader returns, held until the end of the repetition -- it measures the readers'
  own bookkeeping, not moving bytes, so its GB/s is not a bandwidth;
* ``materialized``: every returned tensor is also cloned into private memory, so every byte is read
  (page faults of the mapping included). This is the comparable read throughput.

On a CUDA device the readers copy to the device themselves and a single ``to-device`` mode is timed.
GB means 1e9 bytes. Medians are reported (and the best repetition); the ratio is SafetensorsResource /
load_file throughput (1.0 = as fast). Prints a table and, with ``--json PATH``, writes the numbers.

    python bench/load.py --size-gb 1.2 --json /tmp/load.json
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import safetensors
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from tilefoundry.runtime.resource import INDEX_NAME, SafetensorsResource

HIDDEN = 2048
INTERMEDIATE = 5632
VOCAB = 32000


def _layer_shapes(i: int) -> dict[str, tuple[int, ...]]:
    p = f"model.layers.{i}."
    return {
        p + "input_layernorm.weight": (HIDDEN,),
        p + "self_attn.q_proj.weight": (HIDDEN, HIDDEN),
        p + "self_attn.k_proj.weight": (HIDDEN, HIDDEN),
        p + "self_attn.v_proj.weight": (HIDDEN, HIDDEN),
        p + "self_attn.o_proj.weight": (HIDDEN, HIDDEN),
        p + "post_attention_layernorm.weight": (HIDDEN,),
        p + "mlp.gate_proj.weight": (INTERMEDIATE, HIDDEN),
        p + "mlp.up_proj.weight": (INTERMEDIATE, HIDDEN),
        p + "mlp.down_proj.weight": (HIDDEN, INTERMEDIATE),
    }


def plan_checkpoint(size_gb: float) -> dict[str, tuple[int, ...]]:
    """Key -> shape of a bf16 Llama-shaped model of at least ``size_gb`` GB."""
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (VOCAB, HIDDEN)}
    per_layer = sum(math.prod(s) for s in _layer_shapes(0).values()) * 2
    fixed = (VOCAB * HIDDEN + HIDDEN) * 2
    layers = max(1, math.ceil((size_gb * 1e9 - fixed) / per_layer))
    for i in range(layers):
        shapes.update(_layer_shapes(i))
    shapes["model.norm.weight"] = (HIDDEN,)
    return shapes


def generate(directory: Path, size_gb: float, n_shards: int, seed: int) -> int:
    """Write the checkpoint into ``directory``; return its tensor bytes."""
    shapes = plan_checkpoint(size_gb)
    total = sum(math.prod(s) for s in shapes.values()) * 2
    target = total / n_shards
    groups: list[list[str]] = [[]]
    filled = 0
    for key, shape in shapes.items():
        if filled >= target * len(groups) and len(groups) < n_shards:
            groups.append([])
        groups[-1].append(key)
        filled += math.prod(shape) * 2
    gen = torch.Generator().manual_seed(seed)
    weight_map: dict[str, str] = {}
    for i, keys in enumerate(groups):
        name = f"model-{i + 1:05d}-of-{len(groups):05d}.safetensors"
        part = {k: torch.randn(shapes[k], generator=gen, dtype=torch.float32).to(torch.bfloat16) for k in keys}
        save_file(part, str(directory / name), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(keys, name))
        del part
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (directory / INDEX_NAME).write_text(json.dumps(index, indent=2))
    return total


def checkpoint_files(directory: Path) -> list[Path]:
    weight_map = json.loads((directory / INDEX_NAME).read_text())["weight_map"]
    return [directory / name for name in sorted(set(weight_map.values()))]


def warm_page_cache(files: list[Path]) -> None:
    """Read every byte of every file once, so the timed runs read from memory."""
    for path in files:
        with open(path, "rb", buffering=0) as f:
            while f.read(64 << 20):
                pass


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def read_with_resource(directory: Path, device: torch.device, materialize: bool) -> int:
    """Load every key of the index through a fresh SafetensorsResource; return the bytes read."""
    resource = SafetensorsResource(str(directory), device=str(device))
    assert resource.layout.weight_map is not None
    held = []
    for key in resource.layout.weight_map:
        tensor = resource.load(key)
        held.append(tensor.clone() if materialize else tensor)
    _sync(device)
    return sum(t.numel() * t.element_size() for t in held)


def read_with_get_tensor(files: list[Path], device: torch.device, materialize: bool) -> int:
    """``safe_open(...).get_tensor(key)`` per key, the primitive the resource uses; return the bytes read."""
    held = []
    for path in files:
        handle = safe_open(str(path), framework="pt", device=str(device))
        for key in handle.keys():
            tensor = handle.get_tensor(key)
            held.append(tensor.clone() if materialize else tensor)
    _sync(device)
    return sum(t.numel() * t.element_size() for t in held)


def read_with_load_file(files: list[Path], device: torch.device, materialize: bool) -> int:
    """``safetensors.torch.load_file`` on every shard; return the bytes read."""
    held = []
    for path in files:
        tensors = load_file(str(path), device=str(device))
        held.extend(t.clone() if materialize else t for t in tensors.values())
    _sync(device)
    return sum(t.numel() * t.element_size() for t in held)


def verify(directory: Path, files: list[Path]) -> None:
    """Untimed: both readers return bit-identical tensors, with the stored dtype, for every key."""
    resource = SafetensorsResource(str(directory), device="cpu")
    for path in files:
        for key, expected in load_file(str(path)).items():
            got = resource.load(key)
            if got.dtype != expected.dtype or not torch.equal(got.view(torch.uint8), expected.view(torch.uint8)):
                raise SystemExit(f"mismatch on {key!r} in {path.name}")


def time_once(fn: Callable[[], int]) -> tuple[float, int]:
    gc.collect()
    start = time.perf_counter()
    nbytes = fn()
    elapsed = time.perf_counter() - start
    gc.collect()
    return elapsed, nbytes


def run(directory: Path, device: torch.device, reps: int) -> dict[str, object]:
    files = checkpoint_files(directory)
    file_bytes = sum(p.stat().st_size for p in files)
    warm_page_cache(files)
    verify(directory, files)
    modes = ["mapped", "materialized"] if device.type == "cpu" else ["to-device"]
    results: dict[str, object] = {}
    for mode in modes:
        materialize = mode == "materialized"
        readers: dict[str, Callable[[], int]] = {
            "SafetensorsResource": lambda m=materialize: read_with_resource(directory, device, m),
            "load_file": lambda m=materialize: read_with_load_file(files, device, m),
            "safe_open.get_tensor": lambda m=materialize: read_with_get_tensor(files, device, m),
        }
        for reader in readers.values():  # one untimed round each
            time_once(reader)
        times: dict[str, list[float]] = {name: [] for name in readers}
        nbytes: dict[str, int] = {}
        for rep in range(reps):
            names = list(readers)
            order = names[rep % len(names):] + names[: rep % len(names)]
            for name in order:
                elapsed, nbytes[name] = time_once(readers[name])
                times[name].append(elapsed)
        if len(set(nbytes.values())) != 1:
            raise SystemExit(f"readers disagree on bytes read: {nbytes}")
        medians = {name: statistics.median(ts) for name, ts in times.items()}
        gbps = {name: nbytes[name] / 1e9 / medians[name] for name in readers}
        best = {name: nbytes[name] / 1e9 / min(ts) for name, ts in times.items()}
        results[mode] = {
            "bytes": nbytes["load_file"],
            "seconds": times,
            "median_s": medians,
            "GB_per_s": gbps,
            "best_GB_per_s": best,
            "ratio_resource_over_load_file": gbps["SafetensorsResource"] / gbps["load_file"],
            "ratio_resource_over_get_tensor": gbps["SafetensorsResource"] / gbps["safe_open.get_tensor"],
        }
    return {
        "checkpoint": {"dir": str(directory), "shards": len(files), "file_bytes": file_bytes},
        "device": str(device),
        "reps": reps,
        "modes": results,
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "safetensors": safetensors.__version__},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
    }


def print_table(report: dict[str, object]) -> None:
    ckpt = report["checkpoint"]
    assert isinstance(ckpt, dict)
    print(f"checkpoint: {ckpt['dir']}  {ckpt['shards']} shards, {ckpt['file_bytes'] / 1e9:.3f} GB on disk; "
          f"device {report['device']}; median of {report['reps']} reps")
    print(f"{'mode':<14}{'reader':<22}{'median s':>10}{'GB/s':>10}{'best GB/s':>11}")
    modes = report["modes"]
    assert isinstance(modes, dict)
    for mode, res in modes.items():
        for name in ("SafetensorsResource", "load_file", "safe_open.get_tensor"):
            print(f"{mode:<14}{name:<22}{res['median_s'][name]:>10.4f}{res['GB_per_s'][name]:>10.2f}"
                  f"{res['best_GB_per_s'][name]:>11.2f}")
        print(f"{'':<14}ratio SafetensorsResource / load_file = {res['ratio_resource_over_load_file']:.3f}, "
              f"/ safe_open.get_tensor = {res['ratio_resource_over_get_tensor']:.3f}")
    if "mapped" in modes:
        print("(mapped: zero-copy views of the memory map, so its GB/s measures bookkeeping, not bandwidth)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--dir", type=Path, default=None,
                        help="checkpoint folder: reused when it holds an index, else generated there "
                             "(default: a temporary folder, removed afterwards)")
    parser.add_argument("--size-gb", type=float, default=1.2, help="checkpoint size to generate (default 1.2)")
    parser.add_argument("--shards", type=int, default=4, help="number of shards to generate (default 4)")
    parser.add_argument("--reps", type=int, default=9, help="timed repetitions per reader (default 9)")
    parser.add_argument("--device", default="cpu", help="device to read onto (default cpu)")
    parser.add_argument("--seed", type=int, default=0, help="random seed of the generated weights")
    parser.add_argument("--json", type=Path, default=None, help="write the results as JSON to this path")
    args = parser.parse_args(argv)
    if args.size_gb < 1.0:
        print(f"note: --size-gb {args.size_gb} is below the 1 GB this benchmark is specified for",
              file=sys.stderr)

    device = torch.device(args.device)
    temp = None
    if args.dir is None:
        temp = tempfile.mkdtemp(prefix="tilefoundry-load-bench-")
        directory = Path(temp)
    else:
        directory = args.dir
        directory.mkdir(parents=True, exist_ok=True)
    try:
        if not (directory / INDEX_NAME).exists():
            start = time.perf_counter()
            total = generate(directory, args.size_gb, args.shards, args.seed)
            print(f"generated {total / 1e9:.3f} GB in {time.perf_counter() - start:.1f} s", file=sys.stderr)
        report = run(directory, device, args.reps)
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
    print_table(report)
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

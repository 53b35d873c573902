"""Module.prepare: raw checkpoint -> the clean safetensors directory ``Module.load`` reads (spec 1.1.2)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from tqdm import tqdm

from .function import Converter
from .module import Module, converters_of
from .weights import validate_weight

SHARD_NAME = "model-00001-of-00001.safetensors"
INDEX_NAME = "model.safetensors.index.json"
# Written into the index metadata so a prepared folder can be told from any other checkpoint.
PREPARED_MARK = "tilefoundry"


class PrepareError(RuntimeError):
    """prepare could not produce the output directory; nothing was written there."""


def _plan(mod: Module, raw: Any, path: str) -> list[tuple[str, Module, str, Any]]:
    """(key, owner Module, weight name, raw scope) for every declared weight, children after their parent."""
    items = [(f"{path}.{w}" if path else w, mod, w, raw) for w in mod.weights]
    for child in mod.modules:
        items.extend(_plan(child, raw.subtree(child.name), f"{path}.{child.name}" if path else child.name))
    return items


def _fetch(raw: Any, name: str) -> torch.Tensor:
    """One raw tensor by name; a one-to-many alias is stacked here, prepare's only reshaping."""
    group = raw.load_group(name)
    if group is not None:
        return torch.stack(tuple(group))
    return raw.load(name)


def _produce(key: str, mod: Module, weight: str, raw: Any, device: torch.device) -> torch.Tensor:
    conv: Converter | None = converters_of(mod).get(weight)
    declared = mod.weights[weight]
    owner = next(fn.name for fn in mod.functions.values() if any(p.name == weight for p in fn.weights))
    hint = f"@{owner}.converter({weight!r})"
    if conv is None:
        value = _fetch(raw, weight)
    else:
        from ...evaluator import evaluate

        inputs = [_fetch(raw, p.name).to(device) for p in conv.params]
        try:
            value = evaluate(conv, *inputs)
        except (TypeError, ValueError) as e:
            raise PrepareError(f"weight {key}: converter {hint} could not run on the raw tensors: {e}") from e
    return validate_weight(key, value, declared, {}, hint)


def _is_prepared_dir(path: Path) -> bool:
    try:
        index = json.loads((path / INDEX_NAME).read_text())
        return index.get("metadata", {}).get("prepared_by") == PREPARED_MARK
    except (OSError, json.JSONDecodeError, AttributeError):
        return False


def prepare_module(mod: Module, raw: Any, out_dir: str | os.PathLike[str], *, device: str = "cpu",
                   progress: bool = True, companions: Sequence[str | os.PathLike[str]] = ()) -> None:
    """Convert every declared weight of ``mod``'s tree from ``raw`` and write ``out_dir`` all at once.

    The output is written into a temporary folder beside ``out_dir`` and renamed into place, so a
    failure leaves no half-written directory and never damages an existing one. An existing
    ``out_dir`` is replaced only when it holds a previous prepare's output (or nothing).
    ``companions`` are files copied alongside (a model's config.json and tokenizer files).
    """
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ValueError(f"prepare: torch does not know the device {device!r}: {e}") from None
    out = Path(out_dir).resolve()
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not _is_prepared_dir(out))):
        raise FileExistsError(
            f"prepare: {out} exists and is not a prepared checkpoint directory; choose a new out_dir "
            "(prepare only replaces its own earlier output)"
        )
    raw_dir = getattr(raw, "ckpt_dir", None)
    if raw_dir is not None and Path(raw_dir).resolve() == out:
        raise ValueError(f"prepare: out_dir {out} is the raw checkpoint folder; write the prepared copy elsewhere")

    plan = _plan(mod, raw, "")
    tensors: dict[str, torch.Tensor] = {}
    # The bar shows on a terminal (disable=None); progress=False silences it everywhere.
    for key, owner, weight, scope in tqdm(plan, desc=f"prepare {mod.name}", unit="weight",
                                          disable=None if progress else True):
        tensors[key] = _produce(key, owner, weight, scope, dev).detach().to("cpu").contiguous()

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        # One metadata key only: safetensors writes metadata from a hash map, so two keys come out in a
        # different order from run to run and the shard would not be byte-for-byte reproducible.
        save_file(tensors, str(tmp / SHARD_NAME), metadata={"format": "pt"})
        total = sum(t.numel() * t.element_size() for t in tensors.values())
        index = {"metadata": {"total_size": total, "prepared_by": PREPARED_MARK},
                 "weight_map": {k: SHARD_NAME for k in sorted(tensors)}}
        (tmp / INDEX_NAME).write_text(json.dumps(index, indent=2) + "\n")
        for extra in companions:
            shutil.copy2(extra, tmp / Path(extra).name)
        _swap_into_place(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _swap_into_place(tmp: Path, out: Path) -> None:
    """Rename ``tmp`` to ``out``; an earlier output is moved aside first and removed only after success."""
    if not out.exists():
        os.replace(tmp, out)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
    os.rmdir(old)
    os.replace(out, old)
    try:
        os.replace(tmp, out)
    except BaseException:
        os.replace(old, out)
        raise
    shutil.rmtree(old, ignore_errors=True)

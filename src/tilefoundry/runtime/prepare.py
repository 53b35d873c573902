"""``Module.prepare``: a raw checkpoint resource -> the prepared folder ``Module.load`` reads (spec 1.1.2).

For each node of the tree, children first, and each weight it declares: fetch the weight's converter's
parameters from the raw resource by their raw names (a one-to-many alias is stacked with ``torch.stack``,
prepare's only reshaping), run the converter on the reference evaluator, and hold the result to the
declaration together with the node's other weights (:mod:`tilefoundry.ir.core.weights`). A weight with no
converter is its raw (or stacked) value, held to the same check. A converter may call a child Module (by
its bare name, or ``child.function``): the call reads the child's prepared weights, which is why children
are prepared before their parent.

Before anything is written, prepare refuses what would silently give a wrong model: a weight holding NaN or
Inf, and raw tensors that no declared weight read (the config declares fewer layers or experts than the
checkpoint holds) unless ``allow_unused`` accepts them. The folder itself is written by
:mod:`tilefoundry.runtime.resource.prepared`: all at once, replacing only an earlier prepared folder.

Importing this module fills the IR's prepare slot (:mod:`tilefoundry.ir.core.backends`); ``import
tilefoundry`` imports it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from ..evaluator import EvalContext, run_function
from ..ir.core import backends
from ..ir.core.function import Converter
from ..ir.core.loaded import LoadedModule
from ..ir.core.module import Module, converters_of, variant_only_weights
from ..ir.core.weights import NodeWeights, converter_hint
from .resource import prepared
from .resource.device import resolve_run_device

__all__ = ["PrepareError", "prepare_module"]


class PrepareError(ValueError):
    """prepare could not produce the output folder (a converter failed, a weight is not finite); nothing was
    written."""


def _nodes(mod: Module, raw: Any, path: str) -> Iterator[tuple[str, Module, Any]]:
    """(dotted path, node, the raw resource scoped to it) for every node, children before their parent."""
    for child in mod.modules:
        yield from _nodes(child, raw.subtree(child.name), f"{path}.{child.name}" if path else child.name)
    yield path, mod, raw


def _fetch(raw: Any, name: str) -> torch.Tensor:
    """One raw tensor by name; a one-to-many alias is stacked here, prepare's only reshaping."""
    group = raw.load_group(name)
    if group is not None:
        return torch.stack(tuple(group))
    return raw.load(name)


def _prepared_reading(mod: Module, path: str, prepared: dict[str, torch.Tensor], device: torch.device) -> Any:
    """A reading of ``mod``'s tree over the weights prepared so far (every child's, as children come first)."""
    prefix = f"{path}." if path else ""
    constants = {w: prepared[prefix + w].to(device) for w in mod.weights if prefix + w in prepared}
    children = tuple(_prepared_reading(c, f"{prefix}{c.name}", prepared, device) for c in mod.modules)
    return LoadedModule(mod, constants, children)


def _produce(mod: Module, weight: str, key: str, conv: Converter | None, raw: Any, device: torch.device,
             path: str, prepared: dict[str, torch.Tensor]) -> Any:
    if conv is None:
        return _fetch(raw, weight)
    inputs = [_fetch(raw, p.name).to(device) for p in conv.params]
    reading = _prepared_reading(mod, path, prepared, device)
    try:
        return run_function(conv, inputs, EvalContext(device, reading=reading, path=path or mod.name))
    except (TypeError, ValueError) as e:
        raise PrepareError(
            f"weight {key}: converter {converter_hint(mod, weight)} could not run on the raw tensors: {e}"
        ) from e


def _refuse_non_finite(key: str, t: torch.Tensor) -> None:
    if not (t.is_floating_point() or t.is_complex()):
        return
    if t.element_size() == 1:  # 8-bit floats (fp8): torch has no isfinite for them; their values fit f16 exactly
        t = t.to(torch.float16)
    finite = torch.isfinite(t)
    if bool(finite.all()):
        return
    nan, inf = int(torch.isnan(t).sum()), int(torch.isinf(t).sum())
    first = tuple(int(i) for i in (~finite).nonzero()[0])
    raise PrepareError(
        f"weight {key}: {nan} NaN and {inf} Inf values of {t.numel()} (the first at index {first}); a model "
        "with them generates garbage. The checkpoint is damaged, or a converter overflowed: restore the "
        "checkpoint from its source, or fix the converter"
    )


def _unused_patterns(allow_unused: bool | str | Iterable[str]) -> tuple[str, ...] | None:
    """None when every unread tensor is accepted, else the glob patterns of the accepted ones."""
    if allow_unused is True:
        return None
    if allow_unused is False:
        return ()
    if isinstance(allow_unused, str):
        return (allow_unused,)
    patterns = tuple(allow_unused)
    if not all(isinstance(p, str) for p in patterns):
        raise TypeError(f"allow_unused takes True / False or glob patterns of raw keys (str), got {allow_unused!r}")
    return patterns


def prepare_module(mod: Module, raw: Any, out_dir: str | os.PathLike[str], *, device: str = "cpu",
                   allow_unused: bool | str | Iterable[str] = False, progress: bool = True,
                   companions: Sequence[str | os.PathLike[str]] = ()) -> Path:
    """Convert every declared weight of ``mod``'s tree from ``raw`` and write the prepared folder ``out_dir``.

    Args:
        mod: the Module whose declared weights are produced.
        raw: the raw checkpoint resource (with the alias table that maps the Module's names onto it).
        out_dir: the folder to write; an existing one is replaced only when it holds nothing but an earlier
            prepare's output.
        device: where converters run.
        allow_unused: False refuses raw tensors no declared weight reads; True accepts them all; glob
            patterns of raw keys (``"*.rotary_emb.inv_freq"``) accept those that match (known extras).
        progress: show a progress bar on a terminal.
        companions: files copied beside the shard (a model's config.json and tokenizer files).

    Returns the prepared folder's resolved path. A failure leaves ``out_dir`` as it was.
    """
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ValueError(f"prepare: torch does not know the device {device!r}: {e}") from None
    try:
        resolve_run_device(dev)  # absent (CUDA without a GPU) or data-less (meta): refused, not ignored
    except ValueError as e:
        raise ValueError(f"prepare: {e}") from None
    patterns = _unused_patterns(allow_unused)
    files = getattr(raw, "files", None)
    inputs = [*(files() if callable(files) else ()), *map(Path, companions)]
    # Refuse a foreign or overlapping output before the work; write_prepared checks again at the swap.
    prepared.check_target(out_dir, owned=prepared.prepared_files, inputs=inputs, what="prepare",
                          kind="a prepared checkpoint directory")

    tensors: dict[str, torch.Tensor] = {}
    total = sum(len(node.weights) for _, node in mod._walk())
    # The bar shows on a terminal (disable=None); progress=False silences it everywhere.
    with tqdm(total=total, desc=f"prepare {mod.name}", unit="weight", disable=None if progress else True) as bar:
        for path, node, scope in _nodes(mod, raw, ""):
            weights = NodeWeights(node, path)
            converters = converters_of(node)
            optional = variant_only_weights(node)
            for name in node.weights:
                key = weights.key(name)
                try:
                    value = _produce(node, name, key, converters.get(name), scope, dev, path, tensors)
                except KeyError:
                    if name not in optional:  # a variant's weight the checkpoint lacks: that variant cannot run
                        raise
                else:
                    weights.add(name, value)
                bar.update()
            for name, value in weights.finish().items():
                key = weights.key(name)
                tensors[key] = value.detach().to("cpu").contiguous()
                _refuse_non_finite(key, tensors[key])

    if patterns is not None and callable(getattr(raw, "refuse_unread", None)):
        raw.refuse_unread(patterns)
    return prepared.write_prepared(out_dir, tensors, companions=companions, inputs=inputs)


def _prepare_slot(mod: Module, raw: Any, out_dir: str | os.PathLike[str], **options: Any) -> None:
    prepare_module(mod, raw, out_dir, **options)


backends.provide_preparer(_prepare_slot)

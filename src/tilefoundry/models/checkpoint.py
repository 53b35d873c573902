"""Opening a checkpoint folder: its config, the Module for it, and a resource to load it from.

A folder is either a Hugging Face checkpoint (read through the family's alias table) or one that
``tilefoundry prepare`` wrote (clean keys, read as is). A Hugging Face checkpoint whose weights must be
assembled from several tensors (per-expert weights) is prepared once into a cache folder first, since
only prepare stacks; nothing is ever written into the checkpoint folder itself.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..ir.core.module import Module
from ..runtime.prepare import prepare_module
from ..runtime.resource import AliasValue, SafetensorsResource
from ..runtime.resource.checkpoint_index import read_checkpoint_layout
from ..runtime.resource.prepared import cache_root, is_prepared
from ..runtime.resource.shard_file import read_shard_header
from .aliases import hf_alias_table, hf_known_extras, needs_prepare
from .config import ModelConfig, read_config
from .decoder import build_causal_lm

__all__ = ["CHECKPOINT_COMPANIONS", "OpenedCheckpoint", "checkpoint_keys", "is_prepared", "open_checkpoint",
           "prepare_hf_folder", "prepared_cache_dir"]

# Files of a Hugging Face folder that describe the model rather than hold weights; prepare copies them.
CHECKPOINT_COMPANIONS = (
    "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
    "chat_template.jinja", "tokenizer.model", "vocab.json", "merges.txt", "added_tokens.json",
)


@dataclass
class OpenedCheckpoint:
    """A checkpoint folder made ready to load: the Module, and where and how to read its weights.

    ``extras`` are glob patterns of raw keys the folder may hold that no weight reads (the family's known
    extras); ``allow_unused`` accepts every unread tensor.
    """

    folder: Path
    config: ModelConfig
    module: Module
    weights_dir: Path
    alias: dict[str, AliasValue] | None
    extras: tuple[str, ...] = ()
    allow_unused: bool = False

    def resource(self, device: str = "cpu") -> SafetensorsResource:
        """A resource over the weights, with the alias table when the folder is a Hugging Face one."""
        return SafetensorsResource(str(self.weights_dir), device=device, alias=self.alias)

    def refuse_unread(self, resource: Any) -> None:
        """After the whole Module was loaded from ``resource``: refuse the checkpoint tensors nothing read.

        A config declaring fewer layers or experts than the checkpoint holds would otherwise run a truncated
        model. Does nothing when ``allow_unused``.
        """
        if not self.allow_unused:
            resource.refuse_unread(self.extras)


def open_checkpoint(folder: str | os.PathLike[str], *, max_len: int, progress: bool = True,
                    allow_unused: bool = False) -> OpenedCheckpoint:
    """Read ``folder``'s config, build its Module for ``max_len`` positions and choose the weight source.

    ``allow_unused`` accepts checkpoint tensors no declared weight reads (see OpenedCheckpoint.refuse_unread).
    """
    path = Path(folder).resolve()
    if not path.is_dir():
        raise FileNotFoundError(f"checkpoint folder {path} does not exist")
    config = read_config(path)
    mod = build_causal_lm(config, max_len)
    if is_prepared(path):
        return OpenedCheckpoint(path, config, mod, path, None, allow_unused=allow_unused)
    keys = checkpoint_keys(path)
    alias = hf_alias_table(config, keys)
    if not needs_prepare(alias):
        return OpenedCheckpoint(path, config, mod, path, alias, hf_known_extras(config), allow_unused)
    cached = prepared_cache_dir(path)
    if not is_prepared(cached):
        print(f"{path.name}: per-expert weights must be stacked once; preparing into {cached}", flush=True)
        prepare_hf_folder(path, cached, config=config, mod=mod, alias=alias, progress=progress,
                          allow_unused=allow_unused)
    return OpenedCheckpoint(path, config, mod, cached, None, allow_unused=allow_unused)


def prepare_hf_folder(folder: Path, out: str | os.PathLike[str], *, config: ModelConfig | None = None,
                      mod: Module | None = None, alias: dict[str, AliasValue] | None = None, device: str = "cpu",
                      progress: bool = True, allow_unused: bool = False) -> ModelConfig:
    """Prepare the Hugging Face checkpoint ``folder`` into ``out``, config.json and tokenizer files beside.

    ``config``, ``mod`` and ``alias`` are derived from the folder unless the caller already has them.
    Checkpoint tensors no declared weight reads are refused, except the family's known extras, unless
    ``allow_unused``.
    """
    config = config or read_config(folder)
    mod = mod or build_causal_lm(config, config.max_position_embeddings)
    alias = alias or hf_alias_table(config, checkpoint_keys(folder))
    prepare_module(mod, SafetensorsResource(str(folder), device="cpu", alias=alias), out, device=device,
                   allow_unused=True if allow_unused else hf_known_extras(config), progress=progress,
                   companions=[folder / n for n in CHECKPOINT_COMPANIONS if (folder / n).is_file()])
    return config


def checkpoint_keys(folder: Path) -> set[str]:
    """Every raw tensor key the checkpoint holds (from the index, or the single shard's header)."""
    layout = read_checkpoint_layout(folder)
    if layout.weight_map is not None:
        return set(layout.weight_map)
    keys: set[str] = set()
    for shard in layout.shards.values():
        keys |= {k for k in read_shard_header(shard) if k != "__metadata__"}
    return keys


def prepared_cache_dir(folder: Path) -> Path:
    """Where an automatic prepare of ``folder`` goes: keyed by its path and its files' sizes and times."""
    root = cache_root() / "prepared"
    h = hashlib.sha256(str(folder).encode())
    for f in sorted(folder.iterdir()):
        if f.is_file():
            st = f.stat()
            h.update(f"{f.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return root / f"{folder.name}-{h.hexdigest()[:16]}"

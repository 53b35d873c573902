"""Opening a checkpoint folder: its config, the Module for it, and a resource to load it from.

A folder is either a Hugging Face checkpoint (read through the family's alias table) or one that
``tilefoundry prepare`` wrote (clean keys, read as is). A Hugging Face checkpoint whose weights must be
assembled from several tensors (per-expert weights) is prepared once into a cache folder first, since
only prepare stacks; nothing is ever written into the checkpoint folder itself.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from ..ir.core.module import Module
from ..ir.core.prepare import INDEX_NAME, PREPARED_MARK, prepare_module
from ..runtime.resource import AliasValue, SafetensorsResource
from ..runtime.resource.checkpoint_index import read_checkpoint_layout
from ..runtime.resource.shard_file import read_shard_header
from .aliases import hf_alias_table, needs_prepare
from .config import ModelConfig, read_config
from .decoder import build_causal_lm

# Files of a Hugging Face folder that describe the model rather than hold weights; prepare copies them.
CHECKPOINT_COMPANIONS = (
    "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
    "chat_template.jinja", "tokenizer.model", "vocab.json", "merges.txt", "added_tokens.json",
)


@dataclass
class OpenedCheckpoint:
    """A checkpoint folder made ready to load: the Module, and where and how to read its weights."""

    folder: Path
    config: ModelConfig
    module: Module
    weights_dir: Path
    alias: dict[str, AliasValue] | None

    def resource(self, device: str = "cpu") -> SafetensorsResource:
        """A resource over the weights, with the alias table when the folder is a Hugging Face one."""
        return SafetensorsResource(str(self.weights_dir), device=device, alias=self.alias)


def is_prepared(folder: Path) -> bool:
    """True when ``folder`` was written by prepare (its index carries prepare's mark)."""
    index = folder / INDEX_NAME
    if not index.is_file():
        return False
    try:
        return json.loads(index.read_text()).get("metadata", {}).get("prepared_by") == PREPARED_MARK
    except (json.JSONDecodeError, AttributeError):
        return False


def open_checkpoint(folder: str | os.PathLike[str], *, max_len: int, progress: bool = True) -> OpenedCheckpoint:
    """Read ``folder``'s config, build its Module for ``max_len`` positions and choose the weight source."""
    path = Path(folder).resolve()
    if not path.is_dir():
        raise FileNotFoundError(f"checkpoint folder {path} does not exist")
    config = read_config(path)
    mod = build_causal_lm(config, max_len)
    if is_prepared(path):
        return OpenedCheckpoint(path, config, mod, path, None)
    keys = checkpoint_keys(path)
    alias = hf_alias_table(config, keys)
    if not needs_prepare(alias):
        return OpenedCheckpoint(path, config, mod, path, alias)
    cached = prepared_cache_dir(path)
    if not is_prepared(cached):
        print(f"{path.name}: per-expert weights must be stacked once; preparing into {cached}", flush=True)
        prepare_hf_folder(path, cached, config=config, mod=mod, alias=alias, progress=progress)
    return OpenedCheckpoint(path, config, mod, cached, None)


def prepare_hf_folder(folder: Path, out: str | os.PathLike[str], *, config: ModelConfig | None = None,
                      mod: Module | None = None, alias: dict[str, AliasValue] | None = None, device: str = "cpu",
                      progress: bool = True) -> ModelConfig:
    """Prepare the Hugging Face checkpoint ``folder`` into ``out``, config.json and tokenizer files beside.

    ``config``, ``mod`` and ``alias`` are derived from the folder unless the caller already has them.
    """
    config = config or read_config(folder)
    mod = mod or build_causal_lm(config, config.max_position_embeddings)
    alias = alias or hf_alias_table(config, checkpoint_keys(folder))
    prepare_module(mod, SafetensorsResource(str(folder), device="cpu", alias=alias), out, device=device,
                   progress=progress, companions=[folder / n for n in CHECKPOINT_COMPANIONS if (folder / n).is_file()])
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
    root = Path(os.environ.get("TILEFOUNDRY_CACHE", Path.home() / ".cache" / "tilefoundry")) / "prepared"
    h = hashlib.sha256(str(folder).encode())
    for f in sorted(folder.iterdir()):
        if f.is_file():
            st = f.stat()
            h.update(f"{f.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return root / f"{folder.name}-{h.hexdigest()[:16]}"

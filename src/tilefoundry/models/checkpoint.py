"""Opening a checkpoint folder: its config, the Module for it, and a resource to load it from.

A folder is either a Hugging Face checkpoint (read through the family's alias table) or one that
``tilefoundry prepare`` wrote (clean keys, read as is). A Hugging Face checkpoint whose weights must be
assembled from several tensors (per-expert weights) is prepared once into a cache folder first, since
only prepare stacks; nothing is ever written into the checkpoint folder itself.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..ir.core.module import Module
from ..runtime.file_lock import exclusive_lock
from ..runtime.prepare import prepare_module
from ..runtime.resource import AliasValue, SafetensorsResource
from ..runtime.resource.checkpoint_index import read_checkpoint_layout
from ..runtime.resource.prepared import cache_root, hidden_output, is_prepared
from ..runtime.resource.shard_file import read_shard_header
from .aliases import hf_alias_table, hf_known_extras, needs_prepare
from .config import ConfigFieldError, ModelConfig, read_config
from .decoder import build_causal_lm
from .hub import model_id_folder

__all__ = ["CHECKPOINT_COMPANIONS", "OpenedCheckpoint", "check_sizes", "checkpoint_folder", "checkpoint_keys",
           "checkpoint_shapes", "is_prepared", "open_checkpoint", "prepare_hf_folder", "prepared_cache_dir"]

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


def checkpoint_folder(folder: str | os.PathLike[str]) -> Path:
    """``folder`` as a resolved local folder, or the snapshot a Hugging Face model id names in the local hub cache.

    A path that exists locally wins; a missing path shaped like a model id (``owner/name`` or
    ``owner/name@revision``) is resolved offline in the hub cache (``HF_HUB_CACHE`` / ``HF_HOME`` honoured, see
    :mod:`.hub`). Nothing is ever downloaded.

    Raises:
        FileNotFoundError: ``folder`` does not exist or is not a folder, or is a model id the cache does not hold;
            the message names it and the way out.
    """
    text = os.fspath(folder)
    path = Path(text).expanduser()
    if path.is_dir():
        return path.resolve()
    what = "is a file, not a folder" if path.exists() else "does not exist"
    hint = "pass the folder holding config.json and the safetensors files"
    hidden = hidden_output(path) if not path.exists() else None
    if hidden is not None:  # a reader renames nothing: it names the complete folder a killed prepare hid
        hint = (f"a prepare replacing it was stopped between its two renames, and its previous content is complete "
                f"in {str(hidden)!r}: run the same prepare again (it puts that back first), or pass that folder")
    else:
        snapshot = model_id_folder(text)  # an id: its cached snapshot, or a refusal naming the cache searched
        if snapshot is not None:
            return snapshot
    raise FileNotFoundError(f"checkpoint folder {text!r} {what}; {hint}")


def open_checkpoint(folder: str | os.PathLike[str], *, progress: bool = True, allow_unused: bool = False,
                    config: ModelConfig | None = None) -> OpenedCheckpoint:
    """Read ``folder``'s config, build its Module (once per config) and choose the weight source.

    The Module serves every prompt: caches get their capacity when they are made. The config's sizes are
    checked against the checkpoint's tensor headers before the Module is built.
    ``allow_unused`` accepts checkpoint tensors no declared weight reads (see OpenedCheckpoint.refuse_unread).
    ``config`` is the folder's config when the caller has read it already.
    """
    path = checkpoint_folder(folder)
    config = config or read_config(path)
    if is_prepared(path):
        shapes = checkpoint_shapes(path)
        config = untied_where_stored(config, path, shapes, prepared=True)
        check_sizes(config, shapes, None, path / "config.json")
        return OpenedCheckpoint(path, config, build_causal_lm(config), path, None, allow_unused=allow_unused)
    shapes = checkpoint_shapes(path)
    config = untied_where_stored(config, path, shapes, prepared=False)
    alias = hf_alias_table(config, shapes)
    check_sizes(config, shapes, alias, path / "config.json")
    mod = build_causal_lm(config)
    if not needs_prepare(alias):
        return OpenedCheckpoint(path, config, mod, path, alias, hf_known_extras(config), allow_unused)
    cached = prepared_cache_dir(path)
    if not is_prepared(cached):
        with _preparing(cached):  # one process prepares; another opening it meanwhile waits, then reads its folder
            if not is_prepared(cached):
                print(f"{path.name}: per-expert weights must be stacked once; preparing into {cached}", flush=True)
                prepare_hf_folder(path, cached, config=config, mod=mod, alias=alias, progress=progress,
                                  allow_unused=allow_unused)
    return OpenedCheckpoint(path, config, mod, cached, None, allow_unused=allow_unused)


@contextlib.contextmanager
def _preparing(cached: Path) -> Iterator[None]:
    """An exclusive lock on the automatic prepare into ``cached`` (a lock file in the cache's ``.locks``): without it
    two processes opening one checkpoint at once (the ranks of ``generate --tp``) both prepared, and the second
    replaced the folder the first had opened."""
    with exclusive_lock(cache_root() / ".locks" / f"prepare-{cached.name}.lock"):  # not among the prepared folders
        yield


def prepare_hf_folder(folder: Path, out: str | os.PathLike[str], *, config: ModelConfig | None = None,
                      mod: Module | None = None, alias: dict[str, AliasValue] | None = None, device: str = "cpu",
                      progress: bool = True, allow_unused: bool = False) -> ModelConfig:
    """Prepare the Hugging Face checkpoint ``folder`` into ``out``, config.json and tokenizer files beside.

    ``config``, ``mod`` and ``alias`` are derived from the folder unless the caller already has them; the
    config's sizes are then checked against the checkpoint's tensors before the Module is built.
    Checkpoint tensors no declared weight reads are refused, except the family's known extras, unless
    ``allow_unused``.
    """
    folder = checkpoint_folder(folder)
    if config is None or alias is None:
        config = config or read_config(folder)
        shapes = checkpoint_shapes(folder)
        config = untied_where_stored(config, folder, shapes, prepared=False)
        alias = alias or hf_alias_table(config, shapes)
        check_sizes(config, shapes, alias, folder / "config.json")
    mod = mod or build_causal_lm(config)
    prepare_module(mod, SafetensorsResource(str(folder), device="cpu", alias=alias), out, device=device,
                   allow_unused=True if allow_unused else hf_known_extras(config), progress=progress,
                   companions=[folder / n for n in CHECKPOINT_COMPANIONS if (folder / n).is_file()])
    return config


_HEAD, _EMBED = "lm_head.weight", "model.embed_tokens.weight"  # Hugging Face's keys
_PREPARED_HEAD = "lm_head"  # the root's own weight, in a prepared folder


def untied_where_stored(config: ModelConfig, folder: Path, shapes: dict[str, tuple[int, ...]], *,
                        prepared: bool) -> ModelConfig:
    """``config``, untied where it ties the embeddings but the checkpoint stores a head of its own that differs.

    transformers does not tie the head to the embedding table when the checkpoint holds an ``lm_head.weight``
    whose values differ (it warns and keeps the stored head); so the Module declares an lm_head read from it, and
    this says so once on stderr. A stored head equal to the table (exporters often save both) stays tied. A
    prepared folder holds a head of its own only when prepare untied it this way.
    """
    if not config.tie_word_embeddings:
        return config
    if prepared:
        differs = _PREPARED_HEAD in shapes
    else:
        if _HEAD not in shapes or _EMBED not in shapes:
            return config
        resource = SafetensorsResource(str(folder), device="cpu")
        head, table = resource.load(_HEAD), resource.load(_EMBED)
        differs = head.shape != table.shape or not torch.equal(head, table)
    if not differs:
        return config
    if not prepared:
        print(f"{folder.name}: config.json ties the output head to the embeddings (tie_word_embeddings), but the "
              f"checkpoint stores an {_HEAD} that differs from {_EMBED}; as transformers does, the stored head is "
              "used, not tied", file=sys.stderr, flush=True)
    return dataclasses.replace(config, tie_word_embeddings=False)


def checkpoint_keys(folder: Path) -> set[str]:
    """Every raw tensor key the checkpoint holds (the index's, or the single shard's)."""
    return set(checkpoint_shapes(folder))


def checkpoint_shapes(folder: Path) -> dict[str, tuple[int, ...]]:
    """Every tensor key the checkpoint holds with its shape, read from the shard headers alone."""
    layout = read_checkpoint_layout(folder)
    shapes: dict[str, tuple[int, ...]] = {}
    for shard in dict.fromkeys(layout.shards.values()):
        for key, entry in read_shard_header(shard).items():
            shapes[key] = tuple(int(d) for d in entry["shape"])
    if layout.weight_map is not None:
        shapes = {k: shapes[k] for k in layout.weight_map if k in shapes}
    return shapes


def _raw_key(alias: dict[str, AliasValue] | None, *parts: str) -> str | None:
    """The raw key of a canonical dotted path under ``alias`` (None where it is no single plain name)."""
    if alias is None:
        return ".".join(parts)
    names = [alias.get(part, part) for part in parts]
    return ".".join(names) if all(isinstance(n, str) for n in names) else None  # type: ignore[arg-type]


def check_sizes(config: ModelConfig, shapes: dict[str, tuple[int, ...]], alias: dict[str, AliasValue] | None,
                source: Path) -> None:
    """Refuse a config whose sizes disagree with the checkpoint's tensors, naming the fields, before any build.

    Checked: every declared layer has tensors (``num_hidden_layers``); the embedding (``vocab_size``,
    ``hidden_size``); layer 0's q / k projections (``num_attention_heads``, ``num_key_value_heads``,
    ``head_dim``); the first dense MLP (``intermediate_size``) and the first router (``num_experts``).
    A tensor the checkpoint lacks is left to the load, which names it.

    Raises:
        ConfigFieldError: the message names ``source`` (config.json), the fields and the tensor.
    """
    prefixes = {key.rsplit(".", n)[0] for key in shapes for n in range(1, key.count(".") + 1)}
    missing = [i for i in range(config.num_layers) if _raw_key(alias, f"layer{i}") not in prefixes]
    if missing:
        held = config.num_layers - len(missing)
        raise ConfigFieldError(
            f"{source}: num_hidden_layers is {config.num_layers}, but the checkpoint holds no tensors for layer "
            f"{missing[0]} ({_raw_key(alias, f'layer{missing[0]}')}.*); it holds {held} of the layers declared. "
            "Use the config.json the checkpoint was saved with"
        )
    c = config
    d = c.head_dim
    dense = next((i for i in range(c.num_layers) if i not in set(c.moe_layers)), None)
    checks: list[tuple[tuple[str, ...], tuple[int, ...], str]] = [
        (("embed_tokens",), (c.vocab_size, c.hidden_size), f"vocab_size {c.vocab_size} and hidden_size "
         f"{c.hidden_size}"),
        (("layer0", "q_proj"), (c.num_heads * d, c.hidden_size), f"num_attention_heads {c.num_heads} x head_dim {d}"
         f" and hidden_size {c.hidden_size}"),
        (("layer0", "k_proj"), (c.num_kv_heads * d, c.hidden_size), f"num_key_value_heads {c.num_kv_heads} x "
         f"head_dim {d} and hidden_size {c.hidden_size}"),
    ]
    if dense is not None:
        checks.append(((f"layer{dense}", "gate_proj"), (c.intermediate_size, c.hidden_size),
                       f"intermediate_size {c.intermediate_size} and hidden_size {c.hidden_size}"))
    if c.moe_layers:
        checks.append(((f"layer{c.moe_layers[0]}", "router"), (c.num_experts, c.hidden_size),
                       f"num_experts {c.num_experts} and hidden_size {c.hidden_size}"))
    for parts, want, fields in checks:
        key = _raw_key(alias, *parts)
        got = shapes.get(key) if key is not None else None
        if got is not None and got != want:
            raise ConfigFieldError(
                f"{source}: {fields} make {'.'.join(parts)} {want}, but the checkpoint's {key} is {got}; "
                "use the config.json the checkpoint was saved with"
            )


def prepared_cache_dir(folder: Path) -> Path:
    """Where an automatic prepare of ``folder`` goes: keyed by its path and its files' sizes and times."""
    root = cache_root() / "prepared"
    h = hashlib.sha256(str(folder).encode())
    for f in sorted(folder.iterdir()):
        if f.is_file():
            st = f.stat()
            h.update(f"{f.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return root / f"{folder.name}-{h.hexdigest()[:16]}"

"""ModelConfig: the facts of a Hugging Face ``config.json`` a decoder-only causal LM is built from."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from .config_schema import (
    CONFIG_FIELDS,
    GENERATION_FIELDS,
    ROPE_FIELDS,
    ROPE_TYPES,
    ConfigFieldError,
    UnsupportedModelError,
    read_fields,
)

__all__ = [
    "ARCHITECTURES", "ROPE_TYPES", "ConfigFieldError", "ModelConfig", "RopeConfig", "UnsupportedModelError",
    "parse_config", "read_config", "read_json_object",
]


# Architecture names in config.json -> our family names.
ARCHITECTURES = {
    "LlamaForCausalLM": "llama",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3_moe",
}

_DTYPES = {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}


@dataclass(frozen=True)
class RopeConfig:
    """Rotary embedding parameters, as transformers' ``config.rope_parameters`` holds them once standardized.

    ``rope_type`` is one of :data:`ROPE_TYPES`; ``theta`` is ``rope_theta``; ``max_position_embeddings`` is the
    model's (dynamic NTK scales against it, longrope derives its default ``factor`` from it). Every other field
    is the ``rope_parameters`` key of the same name, None where the config leaves it to transformers' default
    (``original_max_position_embeddings`` is filled in as transformers does, with ``max_position_embeddings``,
    for the types that read it). :mod:`.rope` hands them to transformers' ``ROPE_INIT_FUNCTIONS``.
    """

    theta: float
    rope_type: str = "default"
    max_position_embeddings: int = 2048
    factor: float | None = None
    original_max_position_embeddings: int | None = None
    low_freq_factor: float | None = None
    high_freq_factor: float | None = None
    attention_factor: float | None = None
    beta_fast: float | None = None
    beta_slow: float | None = None
    mscale: float | None = None
    mscale_all_dim: float | None = None
    truncate: bool | None = None
    short_factor: tuple[float, ...] | None = None
    long_factor: tuple[float, ...] | None = None
    partial_rotary_factor: float | None = None

    def transformers_parameters(self) -> dict[str, Any]:
        """The ``rope_parameters`` dict a transformers config holds for these parameters (lists as lists)."""
        out: dict[str, Any] = {"rope_type": self.rope_type, "rope_theta": self.theta}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name not in ("theta", "rope_type", "max_position_embeddings") and value is not None:
                out[f.name] = list(value) if isinstance(value, tuple) else value
        return out


@dataclass(frozen=True)
class ModelConfig:
    """Everything the decoder families need from a checkpoint's config.json."""

    family: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    rope: RopeConfig
    max_position_embeddings: int
    tie_word_embeddings: bool
    dtype: str
    attention_bias: bool = False
    qk_norm: bool = False
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    norm_topk_prob: bool = False
    moe_layers: tuple[int, ...] = ()
    eos_token_ids: tuple[int, ...] = ()
    bos_token_id: int | None = None
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def is_moe(self) -> bool:
        """True when at least one layer routes to experts."""
        return bool(self.moe_layers)


def read_json_object(path: Path) -> dict[str, Any]:
    """The JSON object stored in ``path``; every way the file can be unreadable is refused naming it.

    Raises:
        FileNotFoundError / OSError: the file cannot be read.
        UnsupportedModelError: the file is not UTF-8, not JSON, or holds something other than an object.
    """
    try:
        data = path.read_bytes()
    except OSError as e:
        raise type(e)(f"cannot read {path}: {e.strerror or e}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise UnsupportedModelError(
            f"{path} is not UTF-8 text ({e.reason} at byte {e.start}); restore it from the checkpoint's source"
        ) from None
    try:
        doc = json.loads(text)
    except RecursionError:
        raise UnsupportedModelError(
            f"{path} nests JSON deeper than any config does (Python's JSON reader gives up); restore it from the "
            "checkpoint's source"
        ) from None
    except json.JSONDecodeError as e:
        raise UnsupportedModelError(
            f"{path} is not valid JSON ({e.msg} at line {e.lineno}, column {e.colno}); restore it from the "
            "checkpoint's source"
        ) from None
    if not isinstance(doc, dict):
        kind = {list: "list", str: "string", int: "number", float: "number", bool: "boolean"}.get(type(doc), "null")
        raise UnsupportedModelError(
            f"{path} holds a JSON {kind}; it must hold a JSON object of fields, "
            '{"name": value, ...}, as Hugging Face writes it'
        )
    return doc


def read_config(ckpt_dir: str | Path) -> ModelConfig:
    """Parse ``<ckpt_dir>/config.json`` (and ``generation_config.json`` for stop tokens), validating every field.

    Raises:
        FileNotFoundError: there is no config.json.
        UnsupportedModelError: either file is unreadable, or a field is of the wrong type, out of range or
            unsupported (:class:`ConfigFieldError` for the first two); the message names the file and field.
    """
    path = Path(ckpt_dir) / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: a Hugging Face checkpoint folder holds its config.json")
    raw = read_json_object(path)
    gen_path = Path(ckpt_dir) / "generation_config.json"
    gen = read_json_object(gen_path) if gen_path.is_file() else None
    return parse_config(raw, gen, source=str(path), generation_source=str(gen_path))


def parse_config(raw: Mapping[str, Any], generation: Mapping[str, Any] | None = None, *,
                 source: str = "config.json", generation_source: str = "generation_config.json") -> ModelConfig:
    """Build a ModelConfig from config.json contents, refusing what the families cannot run.

    Every field is read through the schema of :mod:`.config_schema`; ``source`` and ``generation_source``
    name the two files in messages.

    Raises:
        UnsupportedModelError: an unsupported architecture or setting; :class:`ConfigFieldError` (a subclass)
            for a field of the wrong type or out of range, or fields that contradict each other.
    """
    for doc, where in ((raw, source), (generation, generation_source)):
        if doc is not None and not isinstance(doc, Mapping):
            raise ConfigFieldError(f"{where} holds a {type(doc).__name__}; it must be a JSON object of fields")
    v = read_fields(raw, CONFIG_FIELDS, source)
    archs = v["architectures"]
    arch = archs[0] if archs else None
    if arch is None:  # configs saved without a model class still say which model they describe
        arch = next((a for a, fam in ARCHITECTURES.items() if fam == v["model_type"]), None)
    if arch not in ARCHITECTURES:
        raise UnsupportedModelError(
            f"{source}: architecture {arch or v['model_type']!r} is not supported; supported: "
            f"{', '.join(sorted(ARCHITECTURES))} (see `tilefoundry models`)"
        )
    family = ARCHITECTURES[arch]
    if v["hidden_act"] != "silu":
        raise UnsupportedModelError(f"{source}: hidden_act {v['hidden_act']!r} is not supported (the families use "
                                    "silu)")
    for flag in ("mlp_bias", "use_sliding_window"):
        if v[flag]:
            raise UnsupportedModelError(f"{source}: {flag}=true is not supported")
    heads, hidden, layers = v["num_attention_heads"], v["hidden_size"], v["num_hidden_layers"]
    kv_heads = v["num_key_value_heads"] or heads
    if heads % kv_heads:
        raise ConfigFieldError(f"{source}: num_attention_heads {heads} is not a multiple of num_key_value_heads "
                               f"{kv_heads}; grouped attention shares each key/value head among whole groups")
    head_dim = v["head_dim"]
    if head_dim is None:
        if hidden % heads:
            raise ConfigFieldError(f"{source}: hidden_size {hidden} is not a multiple of num_attention_heads "
                                   f"{heads}, and no head_dim is given")
        head_dim = hidden // heads
    if head_dim % 2:
        raise ConfigFieldError(f"{source}: head_dim {head_dim} must be even (rotary embeddings rotate its halves)")
    moe_layers: tuple[int, ...] = ()
    experts = per_token = moe_inter = 0
    if family == "qwen3_moe":
        experts, per_token, moe_inter, moe_layers = _moe(v, layers, source)
    gen = read_fields(generation or {}, GENERATION_FIELDS, generation_source)
    eos = gen["eos_token_id"] if gen["eos_token_id"] is not None else v["eos_token_id"]
    return ModelConfig(
        family=family,
        vocab_size=v["vocab_size"],
        hidden_size=hidden,
        intermediate_size=v["intermediate_size"],
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        rms_norm_eps=v["rms_norm_eps"],
        rope=_rope(v, head_dim, family, source),
        max_position_embeddings=v["max_position_embeddings"],
        tie_word_embeddings=v["tie_word_embeddings"],
        dtype=_DTYPES[v["dtype"] or v["torch_dtype"] or "float32"],
        attention_bias=family == "qwen2" or v["attention_bias"],
        qk_norm=family in ("qwen3", "qwen3_moe"),
        num_experts=experts,
        num_experts_per_tok=per_token,
        moe_intermediate_size=moe_inter,
        norm_topk_prob=v["norm_topk_prob"],
        moe_layers=moe_layers,
        eos_token_ids=tuple(eos),
        bos_token_id=v["bos_token_id"],
        raw=dict(raw),
    )


def _moe(v: Mapping[str, Any], layers: int, source: str) -> tuple[int, int, int, tuple[int, ...]]:
    """(experts, experts per token, expert width, routed layers) of a qwen3_moe config."""
    experts = v["num_local_experts"] if v["num_local_experts"] is not None else v["num_experts"]
    for key, value in (("num_experts", experts), ("num_experts_per_tok", v["num_experts_per_tok"]),
                       ("moe_intermediate_size", v["moe_intermediate_size"])):
        if value is None:
            raise ConfigFieldError(f"{source}: a routed-expert model needs {key} (a positive integer); it is missing")
    if v["num_experts_per_tok"] > experts:
        raise ConfigFieldError(f"{source}: num_experts_per_tok {v['num_experts_per_tok']} exceeds the "
                               f"{experts} experts")
    dense = set(v["mlp_only_layers"])
    outside = sorted(i for i in dense if i >= layers)
    if outside:
        raise ConfigFieldError(f"{source}: mlp_only_layers names layer {outside[0]}, but num_hidden_layers is "
                               f"{layers} (layers 0..{layers - 1})")
    step = v["decoder_sparse_step"]
    routed = tuple(i for i in range(layers) if i not in dense and (i + 1) % step == 0)
    return experts, v["num_experts_per_tok"], v["moe_intermediate_size"], routed


# The rope_parameters keys transformers requires of each type (its RotaryEmbeddingConfigMixin validation refuses
# a config without them); rope_theta and original_max_position_embeddings always have defaults.
_ROPE_NEEDS: dict[str, tuple[str, ...]] = {
    "default": (),
    "linear": ("factor",),
    "dynamic": ("factor",),
    "yarn": ("factor",),
    "longrope": ("short_factor", "long_factor"),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor"),
    "proportional": (),
}
# The types whose frequencies depend on original_max_position_embeddings (transformers fills it in for them).
_ORIGINAL_MAX_TYPES = ("llama3", "yarn", "longrope")


def _rope(v: Mapping[str, Any], head_dim: int, family: str, source: str) -> RopeConfig:
    """The rotary parameters, read as transformers reads them: rope_scaling (earlier transformers) when given and
    not empty, else rope_parameters (transformers 5); rope_theta and partial_rotary_factor from the top level
    where the object leaves them out."""
    key = "rope_scaling" if v["rope_scaling"] else "rope_parameters" if v["rope_parameters"] else ""
    where = f"{source} ({key})" if key else source
    p = read_fields(v[key] if key else {}, ROPE_FIELDS, where)
    rope_type = p["rope_type"] or p["type"] or "default"
    for name in _ROPE_NEEDS[rope_type]:
        if p[name] is None:
            kind = ROPE_FIELDS[name].describe()
            raise ConfigFieldError(f"{where}: a {rope_type} rope_type needs {name} ({kind}); it is missing (add "
                                   f"it to {key}, as the checkpoint's source publishes it)")
    theta = p["rope_theta"] if p["rope_theta"] is not None else v["rope_theta"]
    partial = p["partial_rotary_factor"] if p["partial_rotary_factor"] is not None else v["partial_rotary_factor"]
    if partial is not None and partial != 1.0 and rope_type not in ("default", "proportional"):
        raise ConfigFieldError(
            f"{where}: partial_rotary_factor {partial} with a {rope_type} rope_type would rotate part of each head, "
            f"which the {family} family (like transformers' model of it) cannot apply; only the proportional "
            "rope_type rotates part of a head (set partial_rotary_factor to 1.0 or remove it)"
        )
    if rope_type == "default":
        # transformers' default frequencies use the whole head whatever partial_rotary_factor says
        partial = None
    if rope_type == "llama3" and p["high_freq_factor"] <= p["low_freq_factor"]:
        raise ConfigFieldError(f"{where}: high_freq_factor {p['high_freq_factor']} must exceed low_freq_factor "
                               f"{p['low_freq_factor']}")
    if rope_type == "longrope":
        for name in ("short_factor", "long_factor"):
            if len(p[name]) != head_dim // 2:
                raise ConfigFieldError(
                    f"{where}: {name} holds {len(p[name])} numbers; a longrope rope_type needs one per rotary "
                    f"frequency, head_dim / 2 = {head_dim // 2}"
                )
    original = p["original_max_position_embeddings"]
    if rope_type in _ORIGINAL_MAX_TYPES and original is None:
        original = v["max_position_embeddings"]
    return RopeConfig(
        theta, rope_type, max_position_embeddings=v["max_position_embeddings"], factor=p["factor"],
        original_max_position_embeddings=original, low_freq_factor=p["low_freq_factor"],
        high_freq_factor=p["high_freq_factor"], attention_factor=p["attention_factor"], beta_fast=p["beta_fast"],
        beta_slow=p["beta_slow"], mscale=p["mscale"], mscale_all_dim=p["mscale_all_dim"], truncate=p["truncate"],
        short_factor=p["short_factor"], long_factor=p["long_factor"], partial_rotary_factor=partial,
    )

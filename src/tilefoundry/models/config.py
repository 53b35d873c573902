"""ModelConfig: the facts of a Hugging Face ``config.json`` a decoder-only causal LM is built from."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class UnsupportedModelError(ValueError):
    """The checkpoint's architecture or one of its settings is not supported; the message names it."""


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
    """Rotary embedding parameters (``rope_type`` default, linear or llama3)."""

    theta: float
    rope_type: str = "default"
    factor: float = 1.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position: int = 8192


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


def read_config(ckpt_dir: str | Path) -> ModelConfig:
    """Parse ``<ckpt_dir>/config.json`` (and ``generation_config.json`` for stop tokens)."""
    path = Path(ckpt_dir) / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: a Hugging Face checkpoint folder holds its config.json")
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise UnsupportedModelError(f"{path} is not valid JSON: {e}") from None
    gen_path = Path(ckpt_dir) / "generation_config.json"
    gen = json.loads(gen_path.read_text()) if gen_path.is_file() else {}
    return parse_config(raw, gen, source=str(path))


def parse_config(raw: dict[str, Any], generation: dict[str, Any] | None = None, *,
                 source: str = "config.json") -> ModelConfig:
    """Build a ModelConfig from config.json contents, refusing what the families cannot run."""
    arch = (raw.get("architectures") or [None])[0]
    if arch is None:  # configs saved without a model class still say which model they describe
        arch = next((a for a, fam in ARCHITECTURES.items() if fam == raw.get("model_type")), None)
    if arch not in ARCHITECTURES:
        raise UnsupportedModelError(
            f"{source}: architecture {arch or raw.get('model_type')!r} is not supported; supported: "
            f"{', '.join(sorted(ARCHITECTURES))} (see `tilefoundry models`)"
        )
    family = ARCHITECTURES[arch]

    def need(key: str) -> Any:
        if key not in raw:
            raise UnsupportedModelError(f"{source}: {arch} config lacks {key!r}")
        return raw[key]

    act = raw.get("hidden_act", "silu")
    if act != "silu":
        raise UnsupportedModelError(f"{source}: hidden_act {act!r} is not supported (the families use silu)")
    if raw.get("mlp_bias"):
        raise UnsupportedModelError(f"{source}: mlp_bias=true is not supported")
    if raw.get("use_sliding_window"):
        raise UnsupportedModelError(f"{source}: use_sliding_window=true is not supported")
    heads = int(need("num_attention_heads"))
    hidden = int(need("hidden_size"))
    layers = int(need("num_hidden_layers"))
    dtype_name = raw.get("dtype") or raw.get("torch_dtype") or "float32"
    if dtype_name not in _DTYPES:
        raise UnsupportedModelError(f"{source}: dtype {dtype_name!r} is not supported; use one of {list(_DTYPES)}")
    moe_layers: tuple[int, ...] = ()
    experts = 0
    if family == "qwen3_moe":
        # transformers 5 writes num_local_experts; checkpoints saved earlier say num_experts.
        experts = int(raw["num_local_experts"] if "num_local_experts" in raw else need("num_experts"))
        step = int(raw.get("decoder_sparse_step", 1)) or 1
        dense = set(raw.get("mlp_only_layers") or [])
        moe_layers = tuple(i for i in range(layers) if i not in dense and experts > 0 and (i + 1) % step == 0)
    gen = generation or {}
    eos = gen.get("eos_token_id", raw.get("eos_token_id"))
    eos_ids = tuple(eos) if isinstance(eos, list) else ((eos,) if isinstance(eos, int) else ())
    return ModelConfig(
        family=family,
        vocab_size=int(need("vocab_size")),
        hidden_size=hidden,
        intermediate_size=int(need("intermediate_size")),
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=int(raw.get("num_key_value_heads") or heads),
        head_dim=int(raw.get("head_dim") or hidden // heads),
        rms_norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
        rope=_rope(raw, source),
        max_position_embeddings=int(raw.get("max_position_embeddings", 2048)),
        tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
        dtype=_DTYPES[dtype_name],
        attention_bias=family == "qwen2" or bool(raw.get("attention_bias", False)),
        qk_norm=family in ("qwen3", "qwen3_moe"),
        num_experts=experts,
        num_experts_per_tok=int(raw.get("num_experts_per_tok", 0)),
        moe_intermediate_size=int(raw.get("moe_intermediate_size", 0)),
        norm_topk_prob=bool(raw.get("norm_topk_prob", False)),
        moe_layers=moe_layers,
        eos_token_ids=eos_ids,
        bos_token_id=raw.get("bos_token_id"),
        raw=raw,
    )


def _rope(raw: dict[str, Any], source: str) -> RopeConfig:
    params = dict(raw.get("rope_parameters") or {})
    legacy = raw.get("rope_scaling") or {}
    params = {**legacy, **params}
    theta = float(params.get("rope_theta", raw.get("rope_theta", 10000.0)))
    rope_type = params.get("rope_type", params.get("type", "default"))
    if rope_type == "default":
        return RopeConfig(theta)
    if rope_type == "linear":
        return RopeConfig(theta, "linear", factor=float(params["factor"]))
    if rope_type == "llama3":
        return RopeConfig(
            theta, "llama3", factor=float(params["factor"]),
            low_freq_factor=float(params.get("low_freq_factor", 1.0)),
            high_freq_factor=float(params.get("high_freq_factor", 4.0)),
            original_max_position=int(params.get("original_max_position_embeddings", 8192)),
        )
    raise UnsupportedModelError(f"{source}: rope_type {rope_type!r} is not supported; supported: default, "
                                "linear, llama3")

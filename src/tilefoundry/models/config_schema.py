"""The fields of ``config.json`` and ``generation_config.json`` the families read: types, ranges, defaults.

Every value a model is built from is read through :data:`CONFIG_FIELDS` (or :data:`GENERATION_FIELDS`), so
every file is validated in one place and every refusal names the file and the field: ``hidden_size: "abc"``,
``-1``, ``0``, ``null``, ``[256]`` and ``256.9`` are all refused as not an integer in range, a string
``"false"`` as not a boolean, ``architectures`` given as a string as not a list. Sizes have generous upper
bounds (no published model comes near them), so an absurd value such as ``num_hidden_layers: 10**9`` is
refused here, before anything is built or allocated.

A field absent from the file, or ``null`` there, takes its default; a required field has none.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CONFIG_FIELDS", "GENERATION_FIELDS", "ROPE_FIELDS", "ROPE_TYPES", "ConfigFieldError", "Field",
    "UnsupportedModelError", "read_fields",
]


class UnsupportedModelError(ValueError):
    """The checkpoint's architecture or one of its settings is not supported; the message names it."""


class ConfigFieldError(UnsupportedModelError):
    """A config file holds a field of the wrong type or out of range; the message names the file and field."""


_MISSING = object()

# Upper bounds on sizes: far above any published model, low enough that nothing absurd gets built.
MAX_LAYERS = 4096
MAX_HEADS = 4096
MAX_WIDTH = 2**20
MAX_VOCAB = 2**24
MAX_POSITIONS = 2**24
MAX_EXPERTS = 2**16


@dataclass(frozen=True)
class Field:
    """One field: its JSON key, kind (``int``, ``float``, ``bool``, ``str``, ``str_list``, ``int_list``,
    ``float_list``, ``token_ids``, ``object``), inclusive range for numbers and for each number of a
    ``float_list`` (``lo_open``: the lower bound excluded), and default (:data:`_MISSING` when required)."""

    key: str
    kind: str
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    default: Any = _MISSING
    choices: tuple[str, ...] = ()

    @property
    def required(self) -> bool:
        """True when the field has no default."""
        return self.default is _MISSING

    def describe(self) -> str:
        """What the field must hold, e.g. ``"an integer in [1, 4096]"``."""
        if self.kind in ("int", "float", "float_list"):
            noun = {"int": "an integer", "float": "a finite number",
                    "float_list": "a list of finite numbers"}[self.kind]
            if self.lo is None and self.hi is None:
                return noun
            lo = "" if self.lo is None else f"{'> ' if self.lo_open else '>= '}{_num(self.lo)}"
            hi = "" if self.hi is None else f"<= {_num(self.hi)}"
            return f"{noun} {' and '.join(p for p in (lo, hi) if p)}"
        if self.kind == "str" and self.choices:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        return {
            "bool": "true or false (a JSON boolean, not a string)",
            "str": "a string",
            "str_list": 'a list of strings (e.g. ["LlamaForCausalLM"])',
            "int_list": "a list of integers",
            "token_ids": "a token id (an integer >= 0) or a list of them",
            "object": "a JSON object",
        }[self.kind]

    def read(self, raw: Mapping[str, Any], source: str) -> Any:
        """The validated value of this field in ``raw`` (its default when absent or null)."""
        value = raw.get(self.key)
        if value is None:
            if self.required:
                got = "null" if self.key in raw else "nothing (the field is missing)"
                raise ConfigFieldError(f"{source}: {self.key} must be {self.describe()}, got {got}")
            return self.default
        if not self._accepts(value):
            shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
            raise ConfigFieldError(
                f"{source}: {self.key} must be {self.describe()}, got {_json_kind(value)} {shown}"
            )
        if self.kind == "float":
            return float(value)
        if self.kind in ("str_list", "int_list"):
            return tuple(value)
        if self.kind == "float_list":
            return tuple(float(v) for v in value)
        if self.kind == "token_ids":
            return tuple(value) if isinstance(value, list) else (value,)
        return value

    def _accepts(self, value: Any) -> bool:
        if self.kind == "int":
            return _is_int(value) and self._in_range(value)
        if self.kind == "float":
            return _is_number(value) and math.isfinite(value) and self._in_range(value)
        if self.kind == "bool":
            return isinstance(value, bool)
        if self.kind == "str":
            return isinstance(value, str) and (not self.choices or value in self.choices)
        if self.kind == "str_list":
            return isinstance(value, list) and bool(value) and all(isinstance(v, str) for v in value)
        if self.kind == "int_list":
            return isinstance(value, list) and all(_is_int(v) and v >= 0 for v in value)
        if self.kind == "float_list":
            return isinstance(value, list) and bool(value) and all(
                _is_number(v) and math.isfinite(v) and self._in_range(v) for v in value)
        if self.kind == "token_ids":
            items = value if isinstance(value, list) else [value]
            return all(_is_int(v) and v >= 0 for v in items)
        if self.kind == "object":
            return isinstance(value, dict)
        raise AssertionError(f"unknown field kind {self.kind}")

    def _in_range(self, value: float) -> bool:
        if self.lo is not None and (value <= self.lo if self.lo_open else value < self.lo):
            return False
        return self.hi is None or value <= self.hi


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else repr(value)


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "the boolean"
    if isinstance(value, str):
        return "the string"
    if isinstance(value, int):
        return "the integer"
    if isinstance(value, float):
        return "the number"
    if isinstance(value, list):
        return "the list"
    if isinstance(value, dict):
        return "the object"
    return type(value).__name__


def _fields(*fields: Field) -> Mapping[str, Field]:
    return {f.key: f for f in fields}


CONFIG_FIELDS: Mapping[str, Field] = _fields(
    Field("architectures", "str_list", default=()),
    Field("model_type", "str", default=None),
    Field("hidden_act", "str", default="silu"),
    Field("mlp_bias", "bool", default=False),
    Field("use_sliding_window", "bool", default=False),
    Field("vocab_size", "int", 1, MAX_VOCAB),
    Field("hidden_size", "int", 1, MAX_WIDTH),
    Field("intermediate_size", "int", 1, MAX_WIDTH),
    Field("num_hidden_layers", "int", 1, MAX_LAYERS),
    Field("num_attention_heads", "int", 1, MAX_HEADS),
    Field("num_key_value_heads", "int", 1, MAX_HEADS, default=None),
    Field("head_dim", "int", 2, MAX_WIDTH, default=None),
    Field("rms_norm_eps", "float", 0.0, 1.0, lo_open=True, default=1e-6),
    Field("max_position_embeddings", "int", 1, MAX_POSITIONS, default=2048),
    Field("tie_word_embeddings", "bool", default=False),
    Field("attention_bias", "bool", default=False),
    Field("dtype", "str", default=None, choices=("float32", "bfloat16", "float16")),
    Field("torch_dtype", "str", default=None, choices=("float32", "bfloat16", "float16")),
    Field("rope_theta", "float", 0.0, None, lo_open=True, default=10000.0),
    Field("rope_scaling", "object", default=None),
    Field("rope_parameters", "object", default=None),
    Field("partial_rotary_factor", "float", 0.0, 1.0, lo_open=True, default=None),
    Field("eos_token_id", "token_ids", default=()),
    Field("bos_token_id", "int", 0, None, default=None),
    # routed experts (qwen3_moe); transformers 5 writes num_local_experts, earlier ones num_experts
    Field("num_local_experts", "int", 1, MAX_EXPERTS, default=None),
    Field("num_experts", "int", 1, MAX_EXPERTS, default=None),
    Field("num_experts_per_tok", "int", 1, MAX_EXPERTS, default=None),
    Field("moe_intermediate_size", "int", 1, MAX_WIDTH, default=None),
    Field("norm_topk_prob", "bool", default=False),
    Field("decoder_sparse_step", "int", 1, MAX_LAYERS, default=1),
    Field("mlp_only_layers", "int_list", default=()),
)
"""The config.json fields the families read."""

ROPE_TYPES = ("default", "linear", "dynamic", "yarn", "longrope", "llama3", "proportional")
"""The ``rope_type`` values the families run: ``default`` and the keys of transformers' ``ROPE_INIT_FUNCTIONS``."""

ROPE_FIELDS: Mapping[str, Field] = _fields(
    Field("rope_type", "str", default=None, choices=ROPE_TYPES),
    Field("type", "str", default=None, choices=ROPE_TYPES),
    Field("rope_theta", "float", 0.0, None, lo_open=True, default=None),
    Field("factor", "float", 0.0, None, lo_open=True, default=None),
    Field("original_max_position_embeddings", "int", 1, MAX_POSITIONS, default=None),
    Field("low_freq_factor", "float", 0.0, None, lo_open=True, default=None),
    Field("high_freq_factor", "float", 0.0, None, lo_open=True, default=None),
    Field("attention_factor", "float", 0.0, None, lo_open=True, default=None),
    Field("beta_fast", "float", 0.0, None, lo_open=True, default=None),
    Field("beta_slow", "float", 0.0, None, lo_open=True, default=None),
    Field("mscale", "float", default=None),
    Field("mscale_all_dim", "float", default=None),
    Field("truncate", "bool", default=None),
    Field("short_factor", "float_list", 0.0, None, lo_open=True, default=None),
    Field("long_factor", "float_list", 0.0, None, lo_open=True, default=None),
    Field("partial_rotary_factor", "float", 0.0, 1.0, lo_open=True, default=None),
)
"""The fields of config.json's rope_scaling / rope_parameters object (transformers' ``RopeParameters``)."""

GENERATION_FIELDS: Mapping[str, Field] = _fields(
    Field("eos_token_id", "token_ids", default=None),
)
"""The generation_config.json fields generation reads (the stop tokens)."""


def read_fields(raw: Mapping[str, Any], fields: Mapping[str, Field], source: str) -> dict[str, Any]:
    """Every field of ``fields`` read from ``raw``, validated (the first bad one raises ConfigFieldError)."""
    return {key: field.read(raw, source) for key, field in fields.items()}

"""Causal-LM families authored in the DSL (Llama, Qwen2, Qwen3, Qwen3-MoE), their Hugging Face alias
tables, the generation loop and runtime twins."""

from .aliases import hf_alias_table
from .checkpoint import OpenedCheckpoint, open_checkpoint
from .config import ARCHITECTURES, ConfigFieldError, ModelConfig, UnsupportedModelError, parse_config, read_config
from .decoder import build_causal_lm
from .generation import GenerationResult, NonFiniteLogitsError, Sampling, generate

__all__ = [
    "ARCHITECTURES", "ConfigFieldError", "GenerationResult", "ModelConfig", "NonFiniteLogitsError", "OpenedCheckpoint",
    "Sampling", "UnsupportedModelError",
    "build_causal_lm", "generate", "hf_alias_table", "open_checkpoint", "parse_config", "read_config",
]

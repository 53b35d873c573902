"""Tiny random Hugging Face checkpoints of each family, made with transformers in the test itself."""

from __future__ import annotations

import hashlib
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config, Qwen3Config, Qwen3MoeConfig

COMMON = dict(vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=128)

CONFIGS = {
    "llama": lambda: LlamaConfig(**COMMON, rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                         "high_freq_factor": 4.0,
                                                         "original_max_position_embeddings": 64}),
    "llama_tied": lambda: LlamaConfig(**COMMON, tie_word_embeddings=True),
    "qwen2": lambda: Qwen2Config(**COMMON),
    "qwen3": lambda: Qwen3Config(**COMMON, head_dim=32),
    "qwen3_moe": lambda: Qwen3MoeConfig(**COMMON, head_dim=16, moe_intermediate_size=32, num_experts=4,
                                        num_experts_per_tok=2, norm_topk_prob=True, mlp_only_layers=[1]),
}


def make_checkpoint(family: str, folder: Path, *, sharded: bool, fused_experts: bool = False,
                    seed: int = 0) -> torch.nn.Module:
    """Save a random model of ``family`` into ``folder`` and return it (eval mode, f32)."""
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(CONFIGS[family]()).eval()
    if fused_experts:
        # transformers keeps experts fused in memory (gate_up_proj, down_proj) but saves them per expert;
        # other tools store them fused, so write the in-memory layout directly.
        folder.mkdir(parents=True, exist_ok=True)
        state = {k: v.contiguous() for k, v in model.state_dict().items()}
        if model.config.tie_word_embeddings:
            state.pop("lm_head.weight", None)
        save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
        model.config.save_pretrained(str(folder))
    else:
        model.save_pretrained(str(folder), max_shard_size="100KB" if sharded else "10GB")
    return model


def make_chat_checkpoint(family: str, folder: Path) -> Path:
    """A random ``family`` model saved into ``folder`` (one shard) with a byte tokenizer and its chat template:
    what ``tilefoundry chat`` needs. Returns ``folder``."""
    make_checkpoint(family, folder, sharded=False)
    add_tokenizer(folder, chat=True)
    return folder


def folder_digest(folder: Path) -> dict[str, str]:
    """sha256 of every file below ``folder``, by relative path: equal digests mean nothing was written."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


CHAT_TEMPLATE = ("{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}[assistant] {% endif %}")
"""A chat template for the byte-level tokenizer: ``[role] content`` lines, then ``[assistant] ``."""


def add_tokenizer(folder: Path, *, chat: bool = False) -> None:
    """Save a byte-level tokenizer of 256 tokens (one per byte, no merges) into ``folder``: enough for generate;
    with :data:`CHAT_TEMPLATE` when ``chat``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {ch: i for i, ch in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok)
    if chat:
        fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(folder))

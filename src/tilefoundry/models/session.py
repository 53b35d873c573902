"""TextSession: tokenizer + model + generation loop, the path `tilefoundry generate` and the demo take."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

from ..runtime.resource.device import resolve_run_device
from .checkpoint import OpenedCheckpoint, checkpoint_folder, open_checkpoint
from .config import read_config
from .generation import GenerationResult, Sampling, generate


def load_tokenizer(folder: str | Path) -> Any:
    """The Hugging Face tokenizer saved in the checkpoint folder (read locally: nothing is downloaded)."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    except (OSError, ValueError) as e:
        raise ValueError(f"{folder} holds no usable tokenizer (tokenizer.json / tokenizer_config.json): {e}") from None


def encode_prompt(tokenizer: Any, prompt: str, chat: bool) -> list[int]:
    """Token ids of ``prompt``, wrapped in the tokenizer's chat template when ``chat``."""
    if chat:
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError("--chat needs a chat template, and this checkpoint's tokenizer has none")
        ids = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                            tokenize=True, return_dict=False)
        return list(ids)
    return list(tokenizer(prompt)["input_ids"])


@dataclass
class TextSession:
    """One prompt ready to generate from: its tokens, the loaded model and its tokenizer.

    ``with_prompt`` gives a session for another prompt on the same loaded model (nothing is read, built or
    traced again).
    """

    checkpoint: OpenedCheckpoint
    model: Any
    tokenizer: Any
    prompt_ids: list[int]
    max_new_tokens: int
    device: str
    load_seconds: float

    @property
    def prompt_tokens(self) -> int:
        """Number of prompt tokens."""
        return len(self.prompt_ids)

    @classmethod
    def open(cls, ckpt: str | Path, *, device: str, backend: str, max_new_tokens: int, prompt: str,
             chat: bool, allow_unused: bool = False) -> TextSession:
        """Tokenize ``prompt``, open ``ckpt`` and load the chosen backend on ``device``.

        The Module does not depend on the prompt (it is built once per config); the caches generation makes
        hold the prompt and ``max_new_tokens`` positions, which must fit ``max_position_embeddings``.

        Everything cheap is checked before anything is loaded: the backend, the token budget, the device,
        the folder (a local one: nothing is ever downloaded), its config, the prompt. Checkpoint tensors no
        declared weight reads are refused unless ``allow_unused``.

        Raises:
            ValueError / FileNotFoundError / UnsupportedModelError: the message names what is wrong.
        """
        if backend not in ("reference", "twin"):
            raise ValueError(f"backend must be 'reference' or 'twin', got {backend!r}")
        _check_budget(max_new_tokens)
        _check_prompt(prompt)
        resolve_run_device(device)  # refuses an unknown, absent or data-less device before any work
        folder = checkpoint_folder(ckpt)
        config = read_config(folder)
        start = time.perf_counter()
        tokenizer = load_tokenizer(folder)
        ids = _prompt_ids(tokenizer, prompt, chat, max_new_tokens, config.max_position_embeddings,
                          folder / "config.json")
        opened = open_checkpoint(folder, config=config, allow_unused=allow_unused)
        model = load_backend(opened, backend, device)
        return cls(opened, model, tokenizer, ids, max_new_tokens, device, time.perf_counter() - start)

    def with_prompt(self, prompt: str, *, chat: bool, max_new_tokens: int | None = None) -> TextSession:
        """A session for ``prompt`` on this one's loaded model and tokenizer (``max_new_tokens``: this one's
        unless given). Its ``load_seconds`` is 0: nothing is loaded.

        Raises:
            ValueError: an empty prompt, a bad token budget, or more positions than the model has.
        """
        budget = self.max_new_tokens if max_new_tokens is None else max_new_tokens
        _check_budget(budget)
        _check_prompt(prompt)
        ids = _prompt_ids(self.tokenizer, prompt, chat, budget, self.checkpoint.config.max_position_embeddings,
                          self.checkpoint.folder / "config.json")
        return replace(self, prompt_ids=ids, max_new_tokens=budget, load_seconds=0.0)

    def generate(self, sampling: Sampling | None = None, stream: TextIO | None = None) -> GenerationResult:
        """Generate (greedy unless ``sampling`` says otherwise), writing the text to ``stream`` as it arrives."""
        shown = ""
        produced: list[int] = []

        def on_token(token: int) -> None:
            nonlocal shown
            produced.append(token)
            if stream is None:
                return
            text = self.tokenizer.decode(produced, skip_special_tokens=True)
            if text.startswith(shown):
                stream.write(text[len(shown):])
                stream.flush()
                shown = text

        return generate(self.model, self.prompt_ids, self.max_new_tokens, sampling=sampling or Sampling(),
                        stop_tokens=self.checkpoint.config.eos_token_ids, device=self.device, on_token=on_token)

    def text(self, tokens: list[int]) -> str:
        """Decoded text of generated tokens."""
        return self.tokenizer.decode(tokens, skip_special_tokens=True)


def _check_budget(max_new_tokens: object) -> None:
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be an integer >= 1, got {max_new_tokens!r}")


def _check_prompt(prompt: object) -> None:
    if not isinstance(prompt, str) or not prompt:
        raise ValueError("the prompt is empty; give the text to continue (or to answer, with chat)")


def _prompt_ids(tokenizer: Any, prompt: str, chat: bool, max_new_tokens: int, limit: int, source: Path) -> list[int]:
    """The prompt's token ids, refused when there are none or when they and the new tokens exceed ``limit``
    positions (the model's max_position_embeddings, read from ``source``)."""
    ids = encode_prompt(tokenizer, prompt, chat)
    if not ids:
        raise ValueError(f"the prompt {prompt!r} gives no tokens with this checkpoint's tokenizer")
    needed = len(ids) + max_new_tokens
    if needed > limit:
        raise ValueError(
            f"the prompt ({len(ids)} tokens) and max_new_tokens ({max_new_tokens}) need {needed} positions, more "
            f"than the model's {limit} (max_position_embeddings in {source}); ask for at most "
            f"{max(limit - len(ids), 0)} new tokens"
        )
    return ids


def load_backend(opened: OpenedCheckpoint, backend: str, device: str) -> Any:
    """The reference LoadedModule, or the family's runtime twin loaded from the same weights.

    Checkpoint tensors the load did not read are refused (OpenedCheckpoint.refuse_unread).
    """
    resource = opened.resource(device)
    if backend == "reference":
        model: Any = opened.module.load(resource)
    else:
        from .twins import build_twin

        model = build_twin(opened.module, opened.config)
        model.load(resource)
    opened.refuse_unread(resource)
    return model

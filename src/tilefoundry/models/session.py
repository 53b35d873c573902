"""TextSession: tokenizer + model + generation loop, the path `tilefoundry generate` and the demo take."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

from ..runtime.resource.device import resolve_run_device
from .checkpoint import OpenedCheckpoint, checkpoint_folder, open_checkpoint
from .config import read_config
from .generation import GenerationResult, Sampling, generate
from .text_stream import TextStream


def load_tokenizer(folder: str | Path) -> Any:
    """The Hugging Face tokenizer saved in the checkpoint folder (read locally: nothing is downloaded)."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    except (OSError, ValueError) as e:
        raise ValueError(f"{folder} holds no usable tokenizer (tokenizer.json / tokenizer_config.json): {e}") from None


class PromptTooLongError(ValueError):
    """The prompt and the new tokens need more positions than the model has (the message names the limit and
    the ways out)."""


Message = Mapping[str, str]
"""One chat message: ``{"role": "system" | "user" | "assistant", "content": text}``."""

TRUNCATE = ("none", "left")
"""What a prompt longer than the model's positions allow becomes: refused (``none``), or its last tokens
(``left``: the oldest tokens go, as llama.cpp's and transformers' left truncation does)."""


def chat_messages(prompt: str | Sequence[Message], system: str | None = None) -> list[dict[str, str]]:
    """The messages a chat template is applied to: ``prompt`` as one user turn (or the given list of messages),
    after a ``system`` message when one is given.

    Raises:
        TypeError / ValueError: a message that is no mapping with string ``role`` and ``content``, an empty
            list, or a system prompt given both ways.
    """
    if isinstance(prompt, str):
        messages = [{"role": "user", "content": prompt}]
    else:
        messages = []
        for i, m in enumerate(prompt):
            if not isinstance(m, Mapping) or not isinstance(m.get("role"), str) or not isinstance(
                    m.get("content"), str):
                raise TypeError(f"message {i} must be a mapping with string 'role' and 'content' (like "
                                f"{{'role': 'user', 'content': 'Hi'}}), got {m!r}")
            messages.append({"role": m["role"], "content": m["content"]})
        if not messages:
            raise ValueError("the list of messages is empty; give at least one user message")
    if system is not None:
        if not isinstance(system, str):
            raise TypeError(f"system must be a string, got {type(system).__name__}")
        if messages[0]["role"] == "system":
            raise ValueError("a system prompt was given twice: as system= and as the first message; keep one")
        messages.insert(0, {"role": "system", "content": system})
    return messages


def encode_prompt(tokenizer: Any, prompt: str | Sequence[Message], chat: bool, system: str | None = None) -> list[int]:
    """Token ids of ``prompt``: the text as it is, or (``chat``, a list of messages, or a ``system`` prompt) the
    messages wrapped in the tokenizer's chat template, ready for the assistant's answer."""
    if chat or system is not None or not isinstance(prompt, str):
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError("a chat (--chat, --system, a list of messages) needs a chat template, and this "
                             "checkpoint's tokenizer has none; pass the prompt as plain text (without --chat or "
                             "--system)")
        ids = tokenizer.apply_chat_template(chat_messages(prompt, system), add_generation_prompt=True,
                                            tokenize=True, return_dict=False)
        return list(ids)
    return list(tokenizer(prompt)["input_ids"])


@dataclass
class TextSession:
    """One prompt ready to generate from: its tokens, the loaded model and its tokenizer.

    ``with_prompt`` gives a session for another prompt on the same loaded model (nothing is read, built or
    traced again). ``dropped_tokens`` counts the prompt's oldest tokens left out by ``truncate="left"``.
    """

    checkpoint: OpenedCheckpoint
    model: Any
    tokenizer: Any
    prompt_ids: list[int]
    max_new_tokens: int
    device: str
    load_seconds: float
    dropped_tokens: int = 0

    @property
    def prompt_tokens(self) -> int:
        """Number of prompt tokens."""
        return len(self.prompt_ids)

    @classmethod
    def open(cls, ckpt: str | Path, *, device: str, backend: str, max_new_tokens: int,
             prompt: str | Sequence[Message], chat: bool = False, system: str | None = None,
             truncate: str = "none", allow_unused: bool = False) -> TextSession:
        """Tokenize ``prompt``, open ``ckpt`` and load the chosen backend on ``device``.

        ``prompt`` is text (wrapped in the chat template as one user turn when ``chat`` or ``system`` is given)
        or a list of chat messages (``[{"role": "user", "content": ...}, ...]``, always through the template).
        The Module does not depend on the prompt (it is built once per config); the caches generation makes
        hold the prompt and ``max_new_tokens`` positions, which must fit ``max_position_embeddings``: a longer
        prompt is refused, naming the limit, unless ``truncate="left"`` keeps its last tokens.

        Everything cheap is checked before anything is loaded: the backend, the token budget, the device,
        the folder (a local one, or a model id the local Hugging Face cache holds: nothing is ever
        downloaded), its config, the prompt. Checkpoint tensors no
        declared weight reads are refused unless ``allow_unused``.

        Raises:
            ValueError / FileNotFoundError / UnsupportedModelError: the message names what is wrong.
        """
        _check_prompt(prompt)
        _check_truncate(truncate)
        folder, config, tokenizer, start = _tokenizer_first(ckpt, backend, max_new_tokens, device)
        ids, dropped = _prompt_ids(tokenizer, prompt, chat, system, max_new_tokens, truncate,
                                   config.max_position_embeddings, folder / "config.json")
        opened = open_checkpoint(folder, config=config, allow_unused=allow_unused)
        model = load_backend(opened, backend, device)
        return cls(opened, model, tokenizer, ids, max_new_tokens, device, time.perf_counter() - start, dropped)

    @classmethod
    def load(cls, ckpt: str | Path, *, device: str, backend: str, max_new_tokens: int = 64, chat: bool = False,
             allow_unused: bool = False) -> TextSession:
        """The model and tokenizer of ``ckpt`` loaded on ``device``, with no prompt yet (``prompt_ids`` is empty):
        :meth:`with_prompt` gives the sessions that generate. ``chat`` refuses a tokenizer without a chat
        template before the model is loaded (a conversation needs one).

        Raises:
            ValueError / FileNotFoundError / UnsupportedModelError: as :meth:`open`.
        """
        folder, config, tokenizer, start = _tokenizer_first(ckpt, backend, max_new_tokens, device)
        if chat and not getattr(tokenizer, "chat_template", None):
            raise ValueError(f"a chat needs a chat template, and the tokenizer in {folder} has none; use "
                             "`tilefoundry generate` with plain text instead")
        opened = open_checkpoint(folder, config=config, allow_unused=allow_unused)
        model = load_backend(opened, backend, device)
        return cls(opened, model, tokenizer, [], max_new_tokens, device, time.perf_counter() - start)

    def with_prompt(self, prompt: str | Sequence[Message], *, chat: bool = False, system: str | None = None,
                    max_new_tokens: int | None = None, truncate: str = "none") -> TextSession:
        """A session for ``prompt`` (text or chat messages, as :meth:`open` takes it) on this one's loaded model
        and tokenizer (``max_new_tokens``: this one's unless given). Its ``load_seconds`` is 0: nothing is loaded.

        Raises:
            ValueError: an empty prompt or a bad token budget; PromptTooLongError (a ValueError): more positions
                than the model has.
        """
        budget = self.max_new_tokens if max_new_tokens is None else max_new_tokens
        _check_budget(budget)
        _check_prompt(prompt)
        _check_truncate(truncate)
        ids, dropped = _prompt_ids(self.tokenizer, prompt, chat, system, budget, truncate,
                                   self.checkpoint.config.max_position_embeddings,
                                   self.checkpoint.folder / "config.json")
        return replace(self, prompt_ids=ids, max_new_tokens=budget, load_seconds=0.0, dropped_tokens=dropped)

    def generate(self, sampling: Sampling | None = None, stream: TextIO | None = None,
                 stop: Sequence[str] | str = ()) -> GenerationResult:
        """Generate (greedy unless ``sampling`` says otherwise), writing the text to ``stream`` as it arrives.

        The text is detokenised incrementally (:class:`~.text_stream.TextStream`). Generation ends at the
        model's end-of-sequence tokens, after ``max_new_tokens``, or when the text reaches one of the ``stop``
        strings (matched on the text, across tokens; the text ends before it). The result's ``text`` is the
        generated text, ``stopped_by`` the reason.

        Raises:
            TypeError / ValueError: a stop string that is not a non-empty string.
        """
        texts = TextStream(self.tokenizer, stop)

        def on_token(token: int) -> None:
            piece = texts.push(token)
            if stream is not None and piece:
                stream.write(piece)
                stream.flush()

        def stopped(_token: int) -> bool:
            return texts.matched is not None

        result = generate(self.model, self.prompt_ids, self.max_new_tokens, sampling=sampling or Sampling(),
                          stop_tokens=self.checkpoint.config.eos_token_ids, device=self.device, on_token=on_token,
                          stop_when=stopped if texts.stop else None)
        rest = texts.finish()
        if stream is not None and rest:
            stream.write(rest)
            stream.flush()
        result.text, result.stop_string = texts.text, texts.matched
        return result

    def text(self, tokens: list[int]) -> str:
        """Decoded text of generated tokens."""
        return self.tokenizer.decode(tokens, skip_special_tokens=True)


def _tokenizer_first(ckpt: str | Path, backend: str, max_new_tokens: int, device: str) -> tuple[Path, Any, Any, float]:
    """The cheap checks, then the folder, its config and its tokenizer (before any weight is read), and the time
    loading started."""
    if backend not in ("reference", "twin"):
        raise ValueError(f"backend must be 'reference' or 'twin', got {backend!r}")
    _check_budget(max_new_tokens)
    resolve_run_device(device)  # refuses an unknown, absent or data-less device before any work
    folder = checkpoint_folder(ckpt)
    config = read_config(folder)
    start = time.perf_counter()
    return folder, config, load_tokenizer(folder), start


def _check_budget(max_new_tokens: object) -> None:
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be an integer >= 1, got {max_new_tokens!r}")


def _check_prompt(prompt: object) -> None:
    if isinstance(prompt, str):
        if not prompt:
            raise ValueError("the prompt is empty; give the text to continue (or to answer, with chat)")
        return
    if not isinstance(prompt, Sequence):
        raise TypeError(f"the prompt must be text or a list of chat messages, got {type(prompt).__name__}")
    chat_messages(prompt)


def _check_truncate(truncate: object) -> None:
    if truncate not in TRUNCATE:
        raise ValueError(f"truncate must be one of {', '.join(map(repr, TRUNCATE))}, got {truncate!r}")


def _prompt_ids(tokenizer: Any, prompt: str | Sequence[Message], chat: bool, system: str | None,
                max_new_tokens: int, truncate: str, limit: int, source: Path) -> tuple[list[int], int]:
    """The prompt's token ids and how many of its oldest were dropped, refused when there are none or when they
    and the new tokens exceed ``limit`` positions (the model's max_position_embeddings, read from ``source``)
    and ``truncate`` is ``"none"``; ``"left"`` keeps the last ``limit - max_new_tokens``."""
    ids = encode_prompt(tokenizer, prompt, chat, system)
    if not ids:
        raise ValueError(f"the prompt {prompt!r} gives no tokens with this checkpoint's tokenizer")
    room = limit - max_new_tokens  # prompt tokens that fit beside the new ones
    if len(ids) <= room:
        return ids, 0
    where = f"the model holds {limit} positions (max_position_embeddings in {source})"
    if room < 1:
        raise PromptTooLongError(f"max_new_tokens ({max_new_tokens}) leaves no position for the prompt: {where}; "
                                 f"ask for at most {limit - 1} new tokens")
    if truncate == "left":
        return ids[-room:], len(ids) - room
    ways = [f"shorten the prompt to at most {room} tokens"]
    if len(ids) < limit:
        ways.append(f"ask for at most {limit - len(ids)} new tokens")
    ways.append(f"pass --truncate left (truncate='left') to keep the prompt's last {room} tokens")
    raise PromptTooLongError(f"the prompt ({len(ids)} tokens) and max_new_tokens ({max_new_tokens}) need "
                     f"{len(ids) + max_new_tokens} positions, and {where}: {', or '.join(ways)}")


def load_backend(opened: OpenedCheckpoint, backend: str, device: str) -> Any:
    """The reference LoadedModule, or the family's runtime twin loaded from the same weights (inside a
    ``TensorParallel.active()`` group: the twin of this rank's slice, reading only that slice of each split weight).

    Checkpoint tensors the load did not read are refused (OpenedCheckpoint.refuse_unread).
    """
    from ..engine.parallel import active_parallel

    tp = active_parallel()
    if backend == "twin" and tp is not None and tp.world > 1:  # a tensor-parallel rank reads its slice alone
        from .tensor_parallel import load_rank_twin

        return load_rank_twin(opened, device, tp)
    resource = opened.resource(device)
    if backend == "reference":
        model: Any = opened.module.load(resource)
    else:
        from .twins import build_twin

        model = build_twin(opened.module, opened.config)
        model.load(resource)
    opened.refuse_unread(resource)
    return model

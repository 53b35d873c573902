"""Generated text as it arrives: incremental detokenisation and stop strings.

``TextStream`` turns token ids into text one token at a time, without decoding everything generated again
for each token: a fast tokenizer goes through ``tokenizers``' own ``DecodeStream`` (which holds back bytes
that do not yet form a whole UTF-8 character); any other tokenizer decodes a short window of recent tokens
(the ids since the last whole-text boundary, as ``DecodeStream`` does).

Stop strings are matched on the detokenised text, anywhere in it and across token boundaries, as
transformers' ``stop_strings`` are. The stream never shows text that might be the start of a stop string
until it is known not to be: what :meth:`TextStream.push` returns is safe to print, and the text ends just
before the stop string that matched (the stop string itself is not part of the answer).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["TextStream", "check_stop_strings"]


def check_stop_strings(stop: Sequence[str] | str | None) -> tuple[str, ...]:
    """``stop`` as a tuple of non-empty strings (one string is one stop string).

    Raises:
        TypeError: an entry that is not a string.
        ValueError: an empty stop string (it would match before any text).
    """
    if stop is None:
        return ()
    if isinstance(stop, str):
        stop = (stop,)
    out = []
    for s in stop:
        if not isinstance(s, str):
            raise TypeError(f"stop strings must be strings, got {type(s).__name__} {s!r}")
        if not s:
            raise ValueError("a stop string is empty; it would end generation before any text (drop it)")
        out.append(s)
    return tuple(out)


class _WindowDecoder:
    """Incremental decoding for a tokenizer without a ``tokenizers`` backend: decode the ids since the last
    boundary where the text was whole, and return what they add."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.prefix = 0  # ids[:prefix] are context only: their text was returned already

    def step(self, token: int) -> str | None:
        self.ids.append(token)
        before = self.tokenizer.decode(self.ids[: self.prefix], skip_special_tokens=True) if self.prefix else ""
        after = self.tokenizer.decode(self.ids, skip_special_tokens=True)
        if after.endswith("\ufffd") or not after.startswith(before):
            return None  # a character split over tokens: wait for the rest
        new = after[len(before):]
        # Keep one id of context (a tokenizer may drop a leading space of a fresh decode), the rest goes.
        keep = len(self.ids) - 1
        self.ids = self.ids[keep:]
        self.prefix = len(self.ids)
        return new


class TextStream:
    """Token ids in, printable text out; ends at the first stop string.

    Args:
        tokenizer: the checkpoint's Hugging Face tokenizer.
        stop: stop strings (see :func:`check_stop_strings`).
    """

    def __init__(self, tokenizer: Any, stop: Sequence[str] = ()) -> None:
        self.stop = check_stop_strings(stop)
        backend = getattr(tokenizer, "backend_tokenizer", None) or getattr(tokenizer, "_tokenizer", None)
        if backend is not None and hasattr(backend, "decode"):
            from tokenizers.decoders import DecodeStream

            decoder = DecodeStream(skip_special_tokens=True)
            self._step = lambda token: decoder.step(backend, token)
        else:
            self._step = _WindowDecoder(tokenizer).step
        self.tokenizer = tokenizer
        self.ids: list[int] = []  # every token pushed
        self.text = ""  # everything decoded so far (up to, not including, a matched stop string)
        self.shown = 0  # characters of ``text`` returned by push/finish so far
        self.matched: str | None = None  # the stop string that ended the text

    def push(self, token: int) -> str:
        """Add one generated token; returns the new text that is safe to print (may be empty).

        After a stop string matched, the stream takes no more text (``matched`` names it).
        """
        if self.matched is not None:
            return ""
        self.ids.append(int(token))
        piece = self._step(int(token))
        if piece:
            self.text += piece
            self._match(len(piece))
        if self.matched is not None:
            return self._show(len(self.text))
        return self._show(len(self.text) - self._held_back())

    def finish(self) -> str:
        """Generation ended: the rest of the text (held back as a possible stop string's start, or bytes the
        incremental decoder still waited on to complete a character, decoded as the whole decode does)."""
        if self.matched is None:
            whole = self.tokenizer.decode(self.ids, skip_special_tokens=True)
            if whole.startswith(self.text) and len(whole) > len(self.text):
                added = len(whole) - len(self.text)
                self.text = whole
                self._match(added)
        return self._show(len(self.text))

    def _match(self, added: int) -> None:
        """End the text before the earliest stop string that the latest piece completed."""
        longest = max((len(s) for s in self.stop), default=0)
        start = max(len(self.text) - added - longest + 1, 0)
        found = [(i, s) for s in self.stop if (i := self.text.find(s, start)) >= 0]
        if found:
            at, s = min(found)
            self.text, self.matched = self.text[:at], s

    def _held_back(self) -> int:
        """Length of the longest end of the text that begins some stop string (not shown until known)."""
        held = 0
        for s in self.stop:
            for n in range(min(len(s) - 1, len(self.text)), held, -1):
                if self.text.endswith(s[:n]):
                    held = n
                    break
        return held

    def _show(self, upto: int) -> str:
        upto = max(upto, self.shown)
        new, self.shown = self.text[self.shown:upto], upto
        return new

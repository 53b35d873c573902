"""Generated text as it arrives (models/text_stream.py): incremental detokenisation equal to a whole decode,
and stop strings matched across tokens, never shown, never printed in part."""

from __future__ import annotations

from pathlib import Path

import pytest

from tilefoundry.models.text_stream import TextStream, check_stop_strings

from .hf_models import add_tokenizer


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory):
    from transformers import AutoTokenizer

    folder = tmp_path_factory.mktemp("tok")
    add_tokenizer(folder)
    return AutoTokenizer.from_pretrained(str(folder))


def _stream(tokenizer, ids: list[int], stop: tuple[str, ...] = ()) -> tuple[TextStream, list[str]]:
    s = TextStream(tokenizer, stop)
    pieces = [s.push(t) for t in ids]
    pieces.append(s.finish())
    return s, pieces


def test_streamed_pieces_make_the_whole_decode_of_multibyte_text(tokenizer) -> None:
    text = "héllo wörld, ∑ 日本語 🙂 end"
    ids = tokenizer(text)["input_ids"]  # one token per byte: characters split over tokens
    assert len(ids) > len(text)
    s, pieces = _stream(tokenizer, ids)
    assert "".join(pieces) == text == s.text
    assert all("\ufffd" not in p for p in pieces)  # a split character is held until it is whole


def test_the_stream_decodes_only_what_is_new(tokenizer, monkeypatch: pytest.MonkeyPatch) -> None:
    """No re-decode of everything generated per token: the whole decode runs once, at the end."""
    calls: list[int] = []
    real = type(tokenizer).decode

    def counting(self, ids, *args, **kwargs):
        calls.append(len(ids))
        return real(self, ids, *args, **kwargs)

    monkeypatch.setattr(type(tokenizer), "decode", counting)
    ids = tokenizer("a" * 200)["input_ids"]
    _stream(tokenizer, ids)
    assert calls == [200]  # finish's one check


def test_a_stop_string_across_tokens_ends_the_text_before_it(tokenizer) -> None:
    ids = tokenizer("The answer is 42.\nUser: next")["input_ids"]
    s, pieces = _stream(tokenizer, ids, ("\nUser:",))
    assert s.matched == "\nUser:" and s.text == "The answer is 42."
    assert "".join(pieces) == "The answer is 42."


def test_a_possible_stop_string_start_is_held_back_then_shown(tokenizer) -> None:
    ids = tokenizer("ab#c#d")["input_ids"]
    s = TextStream(tokenizer, ("#e",))
    shown = [s.push(t) for t in ids]
    assert shown == ["a", "b", "", "#c", "", "#d"]  # '#' waits: it may start '#e'
    assert s.finish() == "" and s.matched is None and s.text == "ab#c#d"


def test_the_earliest_of_several_stop_strings_wins(tokenizer) -> None:
    s, pieces = _stream(tokenizer, tokenizer("xx END yy STOP")["input_ids"], ("STOP", "END"))
    assert s.matched == "END" and "".join(pieces) == "xx "
    # nothing is taken after the match
    assert s.push(tokenizer("z")["input_ids"][0]) == "" and s.text == "xx "


def test_held_text_at_the_end_is_shown_when_no_stop_string_completes(tokenizer) -> None:
    s, pieces = _stream(tokenizer, tokenizer("see you tomorr")["input_ids"], ("tomorrow",))
    assert s.matched is None and "".join(pieces) == "see you tomorr"


@pytest.mark.parametrize(("stop", "error", "words"), [
    ([""], ValueError, "a stop string is empty"),
    ([3], TypeError, "stop strings must be strings, got int 3"),
])
def test_bad_stop_strings_are_refused(stop, error, words) -> None:
    with pytest.raises(error, match=words):
        check_stop_strings(stop)


def test_one_string_is_one_stop_string() -> None:
    assert check_stop_strings("\n\n") == ("\n\n",) and check_stop_strings(None) == ()


def test_a_tokenizer_without_a_tokenizers_backend_streams_through_a_window(tokenizer, tmp_path: Path) -> None:
    class Plain:
        """Only decode, as a slow tokenizer offers."""

        def decode(self, ids, skip_special_tokens=True):
            return tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)

    text = "naïve café ✓ done"
    s, pieces = _stream(Plain(), tokenizer(text)["input_ids"], ("done",))
    assert s.text == "naïve café ✓ " and "".join(pieces) == s.text and s.matched == "done"

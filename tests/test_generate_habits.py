"""What users bring from the tools they know (issue 26): prompts from files and stdin, a system prompt, chat
messages in Python, `tilefoundry chat` through a pipe, stop strings, left truncation, the stop reason, the
thread count."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tilefoundry.cli.main import main
from tilefoundry.models.session import PromptTooLongError, TextSession

from .hf_models import add_tokenizer, make_chat_checkpoint, make_checkpoint
from .refusals import refused

SRC = Path(__file__).resolve().parents[1] / "src"


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_chat_checkpoint("llama", tmp_path_factory.mktemp("habits") / "llama")


@pytest.fixture(scope="module")
def session(ckpt: Path) -> TextSession:
    return TextSession.load(ckpt, device="cpu", backend="twin", max_new_tokens=12)


def _json(capsys: pytest.CaptureFixture[str], argv: list[str], stdin: str | None = None,
          monkeypatch: pytest.MonkeyPatch | None = None) -> dict:
    if stdin is not None:
        assert monkeypatch is not None
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def _tokens(session: TextSession, prompt, **kwargs) -> list[int]:
    return session.with_prompt(prompt, max_new_tokens=kwargs.pop("max_new_tokens", 8), **kwargs).generate().tokens


# -- the prompt: --prompt, --prompt-file, stdin -------------------------------------------------------------------


def test_the_prompt_comes_from_a_file_or_stdin_as_from_the_option(ckpt: Path, tmp_path: Path, session: TextSession,
                                                                  capsys, monkeypatch) -> None:
    base = ["generate", "--ckpt", str(ckpt), "--max-new-tokens", "6"]
    want = _tokens(session, "Once upon a time", max_new_tokens=6)
    assert _json(capsys, [*base, "--prompt", "Once upon a time"])["tokens"] == want
    (tmp_path / "p.txt").write_text("Once upon a time\n")  # the file's last newline is no part of the prompt
    assert _json(capsys, [*base, "--prompt-file", str(tmp_path / "p.txt")])["tokens"] == want
    assert _json(capsys, [*base, "--prompt", "-"], "Once upon a time\n", monkeypatch)["tokens"] == want
    assert _json(capsys, [*base, "--prompt-file", "-"], "Once upon a time", monkeypatch)["tokens"] == want
    assert _json(capsys, base, "Once upon a time\n", monkeypatch)["tokens"] == want  # piped, no option


def test_a_prompt_piped_into_the_command_through_a_real_pipe(ckpt: Path, session: TextSession) -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = subprocess.run([sys.executable, "-m", "tilefoundry.cli.main", "generate", "--ckpt", str(ckpt),
                          "--max-new-tokens", "5", "--json"], input="Once upon a time\n", capture_output=True,
                         text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["tokens"] == _tokens(session, "Once upon a time", max_new_tokens=5)


@pytest.mark.parametrize(("argv", "stdin", "words"), [
    (["--prompt-file", "{tmp}/absent.txt"], None, ("--prompt-file", "absent.txt", "does not exist")),
    (["--prompt-file", "{tmp}"], None, ("is a folder",)),
    (["--prompt-file", "{tmp}/latin1.txt"], None, ("is not UTF-8 text",)),
    (["--prompt-file", "{tmp}/empty.txt"], None, ("the prompt read from --prompt-file", "is empty")),
    (["--prompt", "-"], "\n", ("the prompt read from standard input is empty",)),
    (["--prompt", "x", "--prompt-file", "{tmp}/p.txt"], None, ("not allowed with argument",)),
    (["--prompt", "x", "--stop", ""], None, ("--stop", "a stop string is empty")),
    (["--prompt", "x", "--truncate", "right"], None, ("--truncate", "invalid choice")),
    (["--prompt", "x", "--threads", "0"], None, ("--threads", "must be >= 1")),
])
def test_bad_prompts_and_options_are_one_line_refusals(ckpt: Path, tmp_path: Path, capsys, monkeypatch, argv, stdin,
                                                       words) -> None:
    (tmp_path / "latin1.txt").write_bytes("café".encode("latin-1"))
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "p.txt").write_text("x")
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    args = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    refused(capsys, ["generate", "--ckpt", str(ckpt), *args], *words)


def test_no_prompt_at_a_terminal_is_refused_naming_the_three_ways(ckpt: Path, capsys, monkeypatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stdin", Terminal(""))
    refused(capsys, ["generate", "--ckpt", str(ckpt)], "no prompt", "--prompt TEXT", "--prompt-file PATH",
            "standard input")


# -- chat: --system, messages in Python, tilefoundry chat -----------------------------------------------------------


def test_system_and_messages_go_through_the_chat_template(session: TextSession) -> None:
    tok = session.tokenizer
    ids = session.with_prompt("Hi", system="Be brief.").prompt_ids
    assert tok.decode(ids) == "[system] Be brief.\n[user] Hi\n[assistant] "
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."},
                {"role": "user", "content": "Bye"}]
    ids = session.with_prompt(messages, system="Be brief.").prompt_ids
    assert tok.decode(ids) == "[system] Be brief.\n[user] Hi\n[assistant] Hello.\n[user] Bye\n[assistant] "
    assert tok.decode(session.with_prompt("Hi", chat=True).prompt_ids) == "[user] Hi\n[assistant] "
    assert tok.decode(session.with_prompt("Hi").prompt_ids) == "Hi"  # plain text stays plain


@pytest.mark.parametrize(("prompt", "system", "error", "words"), [
    ([], None, ValueError, "the list of messages is empty"),
    ([{"role": "user"}], None, TypeError, "message 0 must be a mapping with string 'role' and 'content'"),
    (["hi"], None, TypeError, "message 0 must be a mapping"),
    ([{"role": "system", "content": "a"}, {"role": "user", "content": "b"}], "c", ValueError,
     "a system prompt was given twice"),
    (42, None, TypeError, "the prompt must be text or a list of chat messages, got int"),
])
def test_bad_messages_are_refused(session: TextSession, prompt, system, error, words) -> None:
    with pytest.raises(error, match=words):
        session.with_prompt(prompt, system=system)


def test_the_system_option_wraps_the_prompt_like_the_python_api(ckpt: Path, session: TextSession, capsys) -> None:
    out = _json(capsys, ["generate", "--ckpt", str(ckpt), "--prompt", "Hi", "--system", "Be brief.",
                         "--max-new-tokens", "6"])
    assert out["tokens"] == _tokens(session, "Hi", system="Be brief.", max_new_tokens=6)
    assert out["prompt_tokens"] == len("[system] Be brief.\n[user] Hi\n[assistant] ")


def test_a_checkpoint_without_a_chat_template_refuses_a_chat(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "plain"
    make_checkpoint("llama", folder, sharded=False)
    add_tokenizer(folder)
    capsys.readouterr()
    refused(capsys, ["generate", "--ckpt", str(folder), "--prompt", "Hi", "--system", "x"],
            "needs a chat template", "has none")
    refused(capsys, ["chat", "--ckpt", str(folder)], "a chat needs a chat template")


def test_chat_holds_the_conversation_through_a_pipe(ckpt: Path, session: TextSession) -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = subprocess.run([sys.executable, "-m", "tilefoundry.cli.main", "chat", "--ckpt", str(ckpt), "--system",
                          "Be brief.", "--max-new-tokens", "5"], input="Hi\nMore\n/reset\nAgain\n",
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""  # a pipe gets no prompt marks and no speed lines
    # The same three turns through the Python API: each answer's text becomes the next turn's history.
    history: list[dict[str, str]] = []
    answers = []
    for line in ("Hi", "More", None, "Again"):
        if line is None:
            history.clear()
            continue
        history.append({"role": "user", "content": line})
        result = session.with_prompt(history, system="Be brief.", max_new_tokens=5).generate()
        history.append({"role": "assistant", "content": result.text})
        answers.append(result.text)
    assert out.stdout == "".join(a + "\n" for a in answers)


def test_chat_drops_its_oldest_turns_when_the_conversation_outgrows_the_model(ckpt: Path, capsys, monkeypatch) -> None:
    # 128 positions: three turns of 40 characters and 20 new tokens each do not fit together.
    turns = "".join(f"{c * 40}\n" for c in "abc")
    monkeypatch.setattr(sys, "stdin", io.StringIO(turns))
    assert main(["chat", "--ckpt", str(ckpt), "--max-new-tokens", "20"]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) >= 3 or captured.out.count("\n") == 3
    assert "dropped its oldest turn" in captured.err


def test_chat_refuses_a_budget_no_turn_can_fit_before_reading_any(ckpt: Path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("Hi\n"))
    refused(capsys, ["chat", "--ckpt", str(ckpt), "--max-new-tokens", "128"], "--max-new-tokens 128 leaves no "
            "position for a conversation: the model holds 128 positions", "ask for at most 127")


def test_chat_refuses_a_turn_too_long_for_the_model_and_goes_on(ckpt: Path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("x" * 300 + "\nHi\n"))
    assert main(["chat", "--ckpt", str(ckpt), "--max-new-tokens", "4"]) == 2  # a turn was refused
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tilefoundry chat: refused: the prompt (")
    assert "--truncate left" in err[0] and captured.out.count("\n") == 1  # the second turn was answered


# -- stop strings and the stop reason ------------------------------------------------------------------------------


def test_a_stop_string_ends_generation_and_is_not_printed(ckpt: Path, session: TextSession, capsys) -> None:
    full = session.with_prompt("Once upon a time", max_new_tokens=12).generate()
    assert full.stopped_by == "max_new_tokens" and full.stop_token is None and full.stop_string is None
    text = full.text
    assert text == session.text(full.tokens) and len(text) >= 6
    stop = text[3:6]
    cut = text.find(stop)
    stream = io.StringIO()
    result = session.with_prompt("Once upon a time", max_new_tokens=12).generate(stream=stream, stop=[stop])
    assert result.stopped_by == "stop_string" and result.stop_string == stop
    assert result.text == text[:cut] == stream.getvalue()
    assert result.tokens == full.tokens[: len(result.tokens)] and len(result.tokens) < 12
    out = _json(capsys, ["generate", "--ckpt", str(ckpt), "--prompt", "Once upon a time", "--max-new-tokens", "12",
                         "--stop", "never there", "--stop", stop])
    assert out["text"] == text[:cut] and out["stopped_by"] == "stop_string" and out["stop_string"] == stop


def test_the_stop_reason_names_eos_with_the_token_under_its_own_key(ckpt: Path, session: TextSession) -> None:
    free = session.with_prompt("Once upon a time", max_new_tokens=8).generate()
    eos = free.tokens[2]
    config = dataclasses.replace(session.checkpoint.config, eos_token_ids=(eos,))
    other = dataclasses.replace(session, checkpoint=dataclasses.replace(session.checkpoint, config=config))
    result = other.with_prompt("Once upon a time", max_new_tokens=8).generate()
    assert result.stopped_by == "eos" and result.stop_token == eos and result.tokens[-1] == eos


# -- context overflow ---------------------------------------------------------------------------------------------


def test_a_prompt_too_long_names_the_limit_and_truncate_left_keeps_its_end(ckpt: Path, session: TextSession,
                                                                           capsys) -> None:
    prompt = "".join(chr(ord("a") + i % 26) for i in range(200))  # 200 tokens, the model holds 128 positions
    with pytest.raises(PromptTooLongError) as info:
        session.with_prompt(prompt, max_new_tokens=8)
    message = str(info.value)
    assert "the prompt (200 tokens) and max_new_tokens (8) need 208 positions, and the model holds 128" in message
    assert "shorten the prompt to at most 120 tokens" in message and "--truncate left" in message
    assert "ask for at most" not in message  # no number of new tokens makes 200 fit
    kept = session.with_prompt(prompt, max_new_tokens=8, truncate="left")
    assert kept.prompt_ids == session.tokenizer(prompt[-120:])["input_ids"] and kept.dropped_tokens == 80
    refused(capsys, ["generate", "--ckpt", str(ckpt), "--prompt", prompt, "--max-new-tokens", "8"],
            "need 208 positions", "--truncate left")
    out = _json(capsys, ["generate", "--ckpt", str(ckpt), "--prompt", prompt, "--max-new-tokens", "8", "--truncate",
                         "left"])
    assert out["prompt_tokens"] == 120 and out["dropped_prompt_tokens"] == 80
    assert out["tokens"] == kept.generate().tokens


def test_a_prompt_that_fits_alone_is_offered_fewer_new_tokens(session: TextSession) -> None:
    with pytest.raises(PromptTooLongError, match=r"ask for at most 28 new tokens"):
        session.with_prompt("x" * 100, max_new_tokens=40)


# -- threads --------------------------------------------------------------------------------------------------------


def test_threads_default_to_the_physical_cores_this_process_may_use(tmp_path: Path) -> None:
    from tilefoundry.runtime.threads import physical_cores

    sysfs = tmp_path / "cpu"
    for cpu, (package, core) in enumerate([(0, 0), (0, 0), (0, 1), (0, 1), (1, 0), (1, 0)]):  # 2-way SMT
        topology = sysfs / f"cpu{cpu}" / "topology"
        topology.mkdir(parents=True)
        (topology / "physical_package_id").write_text(f"{package}\n")
        (topology / "core_id").write_text(f"{core}\n")
    assert physical_cores(set(range(6)), sysfs) == 3
    assert physical_cores({0, 1}, sysfs) == 1  # two siblings of one core
    assert physical_cores({0, 2, 4}, sysfs) == 3
    assert physical_cores({0, 7}, sysfs) == 2  # no topology for cpu7: the CPU count


def test_the_threads_option_sets_torch_and_openmp(ckpt: Path, capsys, monkeypatch) -> None:
    import torch

    before = torch.get_num_threads()
    monkeypatch.setenv("OMP_NUM_THREADS", str(before))  # restored after the test
    try:
        out = _json(capsys, ["generate", "--ckpt", str(ckpt), "--prompt", "Hi", "--max-new-tokens", "2", "--threads",
                             "1"])
        assert out["threads"] == 1 and torch.get_num_threads() == 1 and os.environ["OMP_NUM_THREADS"] == "1"
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize(("value", "error"), [(0, ValueError), (True, TypeError), (1.5, TypeError)])
def test_bad_thread_counts_are_refused(value, error) -> None:
    from tilefoundry.runtime.threads import set_threads

    with pytest.raises(error, match="threads must be an integer >= 1"):
        set_threads(value)


@pytest.mark.parametrize(("value", "threads"), [("1", 1), ("3", 3), ("2,1", 2), (" 4 ", 4)])
def test_the_default_thread_count_is_omp_num_threads_where_it_is_set(monkeypatch, value: str, threads: int) -> None:
    from tilefoundry.runtime.threads import default_threads

    monkeypatch.setenv("OMP_NUM_THREADS", value)
    assert default_threads() == threads


@pytest.mark.parametrize("value", ["0", "many", "-2"])
def test_an_omp_num_threads_that_is_no_count_is_ignored_with_a_warning(monkeypatch, value: str) -> None:
    from tilefoundry.runtime.threads import default_threads, physical_cores

    monkeypatch.setenv("OMP_NUM_THREADS", value)
    with pytest.warns(RuntimeWarning, match=rf"OMP_NUM_THREADS='{value}' is not a thread count"):
        assert default_threads() == physical_cores()
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert default_threads() == physical_cores()

"""jit's in-process cache, the disk cache of built libraries, and the `tilefoundry cache` command.

The two-process tests run real Python processes against one cache folder: one loads what another built
with no compiler on its PATH; two building one key at once both succeed while the compiler (a wrapper
script that counts its calls) runs once.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import torch

from tests import compile_kernels as K
from tilefoundry import CompilerOptions, jit
from tilefoundry.cli.main import main
from tilefoundry.codegen import BuildError, CompilerNotFoundError, DiskCache

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.usefixtures("compile_cache")


def test_cache_info_counts_and_cache_clear_makes_a_new_object() -> None:
    first = jit(K.swiglu, target="cpu")
    assert jit(K.swiglu, target="cpu") is first
    size = jit.cache_info()["size"]
    assert size >= 1 and set(jit.cache_info()) == {"size"}
    jit.cache_clear()
    assert jit.cache_info() == {"size": 0}
    again = jit(K.swiglu, target="cpu")  # from the disk cache: no compiler run, a new object
    assert again is not first and jit.cache_info() == {"size": 1}
    g, u = torch.randn(3, K.FFN).bfloat16(), torch.randn(3, K.FFN).bfloat16()
    assert torch.equal(again(g, u), first(g, u))


def test_jit_from_several_threads_compiles_one_key_once() -> None:
    jit.cache_clear()
    results: list[object] = []
    threads = [threading.Thread(target=lambda: results.append(jit(K.swiglu, target="cpu"))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4 and all(r is results[0] for r in results)
    assert jit.cache_info() == {"size": 1}


def test_a_missing_compiler_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILEFOUNDRY_CACHE", str(tmp_path))  # nothing cached here
    with pytest.raises(CompilerNotFoundError, match=r"CPU target compiles with 'no-such-g\+\+', which is not "
                                                    r"installed or not on PATH.*TILEFOUNDRY_CXX"):
        jit(K.swiglu, target="cpu", options=CompilerOptions(compiler="no-such-g++"))
    assert isinstance(CompilerNotFoundError("x"), FileNotFoundError)


def test_a_failed_build_shows_the_compilers_diagnostics(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILEFOUNDRY_CACHE", str(tmp_path))
    missing = tmp_path / "no_such_header.h"
    with pytest.raises(BuildError) as info:
        jit(K.swiglu, target="cpu", options=CompilerOptions(extra_flags=("-include", str(missing))))
    text = str(info.value)
    assert "building swiglu failed; the compiler said:" in text
    assert "no_such_header.h: No such file or directory" in text
    assert "command: " in text and info.value.source.is_file()
    assert DiskCache().entries() == []  # nothing half-written stays behind


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _progress(out: io.StringIO, seconds: float, monkeypatch: pytest.MonkeyPatch) -> str:
    """What a build of ``seconds`` writes on ``out`` (its stderr)."""
    from tilefoundry.codegen import build

    monkeypatch.setattr("sys.stderr", out)
    with build._Progress("compiling k for cpu (g++)"):
        time.sleep(seconds)
    return out.getvalue()


def test_a_long_build_shows_a_tqdm_line_on_a_terminal_and_clears_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from tilefoundry.codegen import build

    monkeypatch.setattr(build, "PROGRESS_AFTER", 0.05)
    text = _progress(_Terminal(), 0.8, monkeypatch)
    assert "\rtilefoundry: compiling k for cpu (g++) ... 00:00" in text  # tqdm's line, its elapsed time
    assert text.endswith("\r") and "\n" not in text  # cleared when the build ends
    monkeypatch.setattr(build, "PROGRESS_AFTER", 5.0)
    assert _progress(_Terminal(), 0.1, monkeypatch) == ""  # a short build shows nothing


def test_a_build_says_one_line_when_stderr_is_no_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    from tilefoundry.codegen import build

    monkeypatch.setattr(build, "PROGRESS_AFTER", 0.05)
    assert _progress(io.StringIO(), 0.8, monkeypatch) == "tilefoundry: compiling k for cpu (g++) ...\n"


def test_build_progress_keeps_a_log_clean_in_every_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    from tilefoundry.codegen import build, build_progress

    monkeypatch.setattr(build, "PROGRESS_AFTER", 0.05)
    with build_progress("terminal"):
        log = io.StringIO()
        worker = threading.Thread(target=_progress, args=(log, 0.2, monkeypatch))
        worker.start()
        worker.join()
        assert log.getvalue() == ""  # what the engine's kernel set asks: a command's stderr stays its own
        assert "compiling k" in _progress(_Terminal(), 0.8, monkeypatch)
        with build_progress("off"):
            assert _progress(_Terminal(), 0.8, monkeypatch) == ""
        assert build.progress_mode() == "terminal"
    assert build.progress_mode() == "auto"
    with pytest.raises(ValueError, match="build_progress: mode 'quiet' is not one of 'auto', 'terminal', 'off'"):
        with build_progress("quiet"):  # type: ignore[arg-type]
            pass


def test_dump_folder_receives_the_source_and_tir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILEFOUNDRY_DUMP", str(tmp_path / "dump"))
    jit.cache_clear()
    compiled = jit(K.swiglu, target="cpu")
    sources = list((tmp_path / "dump").glob("swiglu-*.cpp"))
    tirs = list((tmp_path / "dump").glob("swiglu-*.tir"))
    assert len(sources) == 1 and len(tirs) == 1
    assert sources[0].read_text() == compiled.source
    assert "prim_func swiglu" in tirs[0].read_text()


def test_cache_command_shows_and_empties_only_the_kernel_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    compiled = jit(K.swiglu, target="cpu")
    entry = compiled.library.parent
    monkeypatch.setenv("TILEFOUNDRY_CACHE", str(tmp_path))
    shutil.copytree(entry, tmp_path / "kernels" / entry.name)
    (tmp_path / "kernels" / "mine.txt").write_text("a file of the user's")
    (tmp_path / "prepared").mkdir()
    assert main(["cache", "info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["path"] == str(tmp_path / "kernels") and info["entries"] == 1 and info["bytes"] > 0
    assert main(["cache", "info"]) == 0
    assert "1 compiled libraries" in capsys.readouterr().out
    assert main(["cache", "clear"]) == 0
    assert "removed 1 compiled libraries" in capsys.readouterr().out
    assert not (tmp_path / "kernels" / entry.name).exists()
    assert (tmp_path / "kernels" / "mine.txt").read_text() == "a file of the user's"
    assert (tmp_path / "prepared").is_dir()
    assert main(["cache", "info", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["entries"] == 0


def test_cache_command_refuses_an_unknown_action_and_an_unreadable_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cache", "wipe"]) == 2
    assert capsys.readouterr().err.startswith("tilefoundry cache: refused: argument action: invalid choice: 'wipe'")
    (tmp_path / "kernels").write_text("a file of the user's where the kernel folder would be")
    monkeypatch.setenv("TILEFOUNDRY_CACHE", str(tmp_path))
    for action in ("info", "clear"):
        assert main(["cache", action]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"tilefoundry cache: refused: the kernel cache {tmp_path / 'kernels'} cannot be read")
        assert err.count("\n") == 1 and "is not a folder" in err
    assert (tmp_path / "kernels").read_text() == "a file of the user's where the kernel folder would be"


# -- across processes -----------------------------------------------------------------------------------

_CHILD = textwrap.dedent("""
    import os, sys, time, json
    from pathlib import Path
    ready = Path(sys.argv[1]); ready.touch()
    while len(list(ready.parent.glob("ready-*"))) < int(sys.argv[2]):
        time.sleep(0.01)
    import torch
    from tests import compile_kernels as K
    from tilefoundry import jit
    c = jit(K.swiglu, target="cpu")
    g = torch.linspace(-3, 3, 2 * K.FFN).reshape(2, K.FFN).bfloat16()
    u = torch.linspace(1, 2, 2 * K.FFN).reshape(2, K.FFN).bfloat16()
    print(json.dumps({"library": str(c.library), "ok": bool(torch.equal(c(g, u), K.swiglu(g, u)))}))
""")


def _child_env(cache: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update(TILEFOUNDRY_CACHE=str(cache), PYTHONPATH=f"{REPO / 'src'}{os.pathsep}{REPO}", **extra)
    env.pop("TILEFOUNDRY_DUMP", None)
    return env


def _run_children(n: int, folder: Path, env: dict[str, str]) -> list[dict]:
    folder.mkdir()
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD, str(folder / f"ready-{i}"), str(n)], cwd=REPO,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(n)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        outs.append(json.loads(out.strip().splitlines()[-1]))
    return outs


def test_two_processes_building_one_key_compile_once(tmp_path: Path) -> None:
    wrapper, count = _logging_compiler(tmp_path)
    cache = tmp_path / "cache"
    outs = _run_children(2, tmp_path / "run", _child_env(cache, TILEFOUNDRY_CXX=str(wrapper)))
    assert all(o["ok"] for o in outs)
    assert outs[0]["library"] == outs[1]["library"]
    assert count.read_text().splitlines() == ["pch", "kernel"]  # the runtime header precompiled once too
    entries = DiskCache(cache).entries()
    assert len(entries) == 1
    meta = json.loads((entries[0] / "entry.json").read_text())
    assert meta["diagnostics"] == ""  # generated code compiles without a warning under -Wall -Wextra
    assert not [p for p in (cache / "kernels").iterdir() if p.name.startswith(".") and p.name != ".locks"]


def test_a_second_process_loads_the_library_with_no_compiler_on_its_path(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    built = _run_children(1, tmp_path / "first", _child_env(cache))
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    env = _child_env(cache, PATH=str(empty))
    assert shutil.which("g++", path=env["PATH"]) is None
    loaded = _run_children(1, tmp_path / "second", env)
    assert loaded[0]["ok"] and loaded[0]["library"] == built[0]["library"]


# -- the precompiled runtime header ---------------------------------------------------------------------


def _logging_compiler(folder: Path, refuse_headers: bool = False) -> tuple[Path, Path]:
    """A g++ wrapper that logs 'pch' for each header precompilation and 'kernel' for each library build (and
    fails the precompilations with ``refuse_headers``)."""
    gxx = shutil.which("g++")
    assert gxx is not None
    log = folder / "compiler-calls"
    wrapper = folder / "logging-g++"
    refuse = 'echo "refusing headers" >&2; exit 1' if refuse_headers else ""
    wrapper.write_text(f'#!/bin/sh\ncase "$*" in *c++-header*) echo pch >> "{log}"; {refuse} ;; '
                       f'*) echo kernel >> "{log}" ;; esac\nexec "{gxx}" "$@"\n')
    wrapper.chmod(0o755)
    return wrapper, log


@pytest.fixture(scope="module")
def pch_cache(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A kernel cache of its own and a logging compiler, shared by the PCH tests (one PCH made for them all)."""
    folder = tmp_path_factory.mktemp("pch")
    wrapper, log = _logging_compiler(folder)
    return folder / "cache", wrapper, log


def _check_values(compiled: object, kernel: object) -> None:
    from tilefoundry.runtime.check import check

    report = check(compiled, kernel, K.inputs_for(kernel, 7), expect=K.expectations(kernel))
    assert report.passed, str(report)


def _pch_of(compiled: object) -> str | None:
    return json.loads((compiled.library.parent / "entry.json").read_text())["pch"]  # type: ignore[attr-defined]


def _pch_build(pch_cache: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch, kernel: object) -> object:
    cache, wrapper, _ = pch_cache
    monkeypatch.setenv("TILEFOUNDRY_CACHE", str(cache))
    monkeypatch.delenv("TILEFOUNDRY_PCH", raising=False)
    jit.cache_clear()
    return jit(kernel, target="cpu", options=CompilerOptions(compiler=str(wrapper)))


def test_the_runtime_pch_is_made_once_and_reused_by_the_next_kernels(
        pch_cache: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    cache, _, log = pch_cache
    first = _pch_build(pch_cache, monkeypatch, K.swiglu)
    calls = log.read_text().splitlines()
    assert calls[-1] == "kernel" and calls.count("pch") == 1  # made once, however the tests ran before
    second = _pch_build(pch_cache, monkeypatch, K.rms_norm)
    assert log.read_text().splitlines() == [*calls, "kernel"]  # the second kernel did not make it again
    used = _pch_of(first)
    assert used is not None and _pch_of(second) == used
    meta = DiskCache.metadata(second.library.parent)  # type: ignore[attr-defined]
    assert meta["command"][1:4] == ["-Winvalid-pch", "-include", used] and meta["diagnostics"] == ""
    record = json.loads((Path(used).parent / "pch.json").read_text())
    # g++ takes a PCH only under the flags that made it: the library's, less -shared, exactly
    assert [f for f in meta["command"] if f.startswith(("-O", "-march", "-D", "-f", "-std"))] == \
        [f for f in record["command"] if f.startswith(("-O", "-march", "-D", "-f", "-std"))]
    assert Path(used).parent.parent == cache / "kernels" / "pch"
    _check_values(first, K.swiglu)
    _check_values(second, K.rms_norm)


@pytest.mark.usefixtures("default_opt_level")
def test_the_pch_key_changes_with_the_flags_the_headers_and_the_compiler(monkeypatch: pytest.MonkeyPatch) -> None:
    from tilefoundry.codegen import pch, toolchain
    from tilefoundry.target import resolve_target

    cpu = resolve_target("cpu")
    base = toolchain.toolchain(cpu, CompilerOptions())
    gxx = base.compiler()
    key = pch.key(base, gxx)
    assert pch.key(toolchain.toolchain(cpu, CompilerOptions()), gxx) == key
    for options in (CompilerOptions(opt_level=2), CompilerOptions(cpu_arch="generic"),
                    CompilerOptions(extra_flags=("-DSOMETHING=1",))):
        assert pch.key(toolchain.toolchain(cpu, options), gxx) != key, options
    monkeypatch.setattr(toolchain, "runtime_headers_digest", lambda: "0" * 16)  # the runtime headers changed
    assert pch.key(toolchain.toolchain(cpu, CompilerOptions()), gxx) != key
    other = Path(shutil.which("gcc") or "/bin/sh").resolve()
    assert pch.key(base, other) != key


def test_a_corrupt_pch_is_dropped_and_the_kernel_still_builds_right(
        pch_cache: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    used = _pch_of(_pch_build(pch_cache, monkeypatch, K.swiglu))
    assert used is not None
    folder = Path(used).parent
    kept = tmp_path / "good"
    shutil.copytree(folder, kept)

    def corrupt(data: bytes) -> None:  # a change the size and mtime check cannot see
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(kept, folder)
        gch = folder / "runtime_pch.h.gch"
        gch.write_bytes(data)
        st = gch.stat()
        record = json.loads((folder / "pch.json").read_text())
        (folder / "pch.json").write_text(json.dumps({**record, "size": st.st_size, "mtime_ns": st.st_mtime_ns}))

    good = (kept / "runtime_pch.h.gch").read_bytes()
    # g++ warns and parses the headers' text (not a PCH); g++ fails reading it (cut short): both build right
    for data, kernel in ((b"not a precompiled header\n", K.softmax), (good[:1 << 20], K.rms_norm_written_out)):
        corrupt(data)
        compiled = _pch_build(pch_cache, monkeypatch, kernel)
        assert _pch_of(compiled) is None and not folder.exists()  # dropped: the next build makes a new one
        assert DiskCache.metadata(compiled.library.parent)["diagnostics"] == ""  # type: ignore[attr-defined]
        _check_values(compiled, kernel)
    shutil.copytree(kept, folder)  # the good one back for the other tests


def test_an_absent_pch_is_made_again(pch_cache: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    cache, _, log = pch_cache
    used = _pch_of(_pch_build(pch_cache, monkeypatch, K.swiglu))
    assert used is not None
    (Path(used).parent / "runtime_pch.h.gch").unlink()
    before = log.read_text().splitlines()
    compiled = _pch_build(pch_cache, monkeypatch, K.softmax_written_out)
    assert log.read_text().splitlines() == [*before, "pch", "kernel"] and _pch_of(compiled) == used
    _check_values(compiled, K.softmax_written_out)


def test_a_kernel_builds_without_a_pch_that_cannot_be_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wrapper, log = _logging_compiler(tmp_path, refuse_headers=True)
    monkeypatch.setenv("TILEFOUNDRY_CACHE", str(tmp_path / "cache"))
    jit.cache_clear()
    options = CompilerOptions(compiler=str(wrapper))
    first = jit(K.swiglu, target="cpu", options=options)
    second = jit(K.rms_norm, target="cpu", options=options)
    assert log.read_text().splitlines() == ["pch", "kernel", "kernel"]  # tried once for this compiler and flags
    assert _pch_of(first) is None and _pch_of(second) is None
    _check_values(first, K.swiglu)
    _check_values(second, K.rms_norm)
    monkeypatch.setenv("TILEFOUNDRY_PCH", "0")  # turned off: not even tried
    jit(K.softmax, target="cpu", options=CompilerOptions(compiler=str(wrapper), opt_level=2))
    assert log.read_text().splitlines() == ["pch", "kernel", "kernel", "kernel"]

"""jit's in-process cache, the disk cache of built libraries, and the `tilefoundry cache` command.

The two-process tests run real Python processes against one cache folder: one loads what another built
with no compiler on its PATH; two building one key at once both succeed while the compiler (a wrapper
script that counts its calls) runs once.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
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


def test_a_long_build_shows_a_progress_line_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import time

    from tilefoundry.codegen import build

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Terminal()
    monkeypatch.setattr("sys.stderr", out)
    monkeypatch.setattr(build, "PROGRESS_AFTER", 0.05)
    with build._Progress("compiling k for cpu (g++)"):
        time.sleep(0.3)
    text = out.getvalue()
    assert "\rtilefoundry: compiling k for cpu (g++) ... 0 s" in text and text.endswith("\r\033[K")
    quiet = io.StringIO()  # not a terminal: nothing
    monkeypatch.setattr("sys.stderr", quiet)
    with build._Progress("compiling k"):
        time.sleep(0.1)
    assert quiet.getvalue() == ""


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


def _counting_compiler(folder: Path) -> tuple[Path, Path]:
    gxx = shutil.which("g++")
    assert gxx is not None
    count = folder / "compiler-calls"
    wrapper = folder / "counting-g++"
    wrapper.write_text(f'#!/bin/sh\necho call >> "{count}"\nexec "{gxx}" "$@"\n')
    wrapper.chmod(0o755)
    return wrapper, count


def test_two_processes_building_one_key_compile_once(tmp_path: Path) -> None:
    wrapper, count = _counting_compiler(tmp_path)
    cache = tmp_path / "cache"
    outs = _run_children(2, tmp_path / "run", _child_env(cache, TILEFOUNDRY_CXX=str(wrapper)))
    assert all(o["ok"] for o in outs)
    assert outs[0]["library"] == outs[1]["library"]
    assert count.read_text().splitlines() == ["call"]
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

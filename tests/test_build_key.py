"""The disk cache keys what decides the binary: the same kernel written in another file, or at other lines, is one
entry (the source-location comments are left out of the key); a constant or a dtype that changes the code is a
new one. One real g++ build (a four-element f32 kernel); the other tests count the build step's calls."""

from __future__ import annotations

import re
import runpy
import subprocess
from pathlib import Path
from typing import Any

import pytest
import torch

from tilefoundry import CompilerOptions, compile, lower  # noqa: A004 - the public verb
from tilefoundry.codegen import DiskCache, LinkableModule, build, generate, link
from tilefoundry.codegen.build import base_key, keyed_source
from tilefoundry.codegen.toolchain import toolchain

KERNEL = '''
from tilefoundry import func
from tilefoundry.dsl import DimVar, Tensor, tf

rows = DimVar("rows", 1, 64)


@func
def scaled(x: Tensor[(rows, 4), "{dtype}"]):
    y = tf.exp(x)
    return y * {constant}
'''


def _kernel(folder: Path, name: str, *, blank_lines: int = 0, constant: str = "2.0", dtype: str = "f32") -> Any:
    """The kernel ``scaled``, written in ``folder/name`` after ``blank_lines`` empty lines and run from there."""
    path = folder / name
    path.write_text("\n" * blank_lines + KERNEL.format(constant=constant, dtype=dtype))
    return runpy.run_path(str(path))["scaled"]


def _linkable(fn: Any) -> LinkableModule:
    return generate(lower(fn, "cpu"))


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The build step's compiler runs, by kernel: each writes a stand-in library instead of running g++."""
    calls: list[str] = []

    def fake_compile(linkable: LinkableModule, tc: object, tmp: Path, cache: object, diagnostics: list[str]) -> dict:
        calls.append(linkable.name)
        (tmp / build.source_name(linkable)).write_text(linkable.source)
        (tmp / build.library_name(linkable)).write_bytes(b"not a library")
        diagnostics.append("")
        return {"name": linkable.name, "command": ["fake"]}

    monkeypatch.setattr(build, "_compile", fake_compile)
    return calls


def test_the_same_kernel_from_another_file_and_line_is_one_cache_entry(tmp_path: Path, counted: list[str]) -> None:
    first = _linkable(_kernel(tmp_path, "readme.py"))
    second = _linkable(_kernel(tmp_path, "readme2.py", blank_lines=7))
    assert "// from @func scaled at readme.py:8" in first.source
    assert "// from @func scaled at readme2.py:15" in second.source and first.source != second.source
    cache = DiskCache(tmp_path / "cache")
    one = link(first, cache=cache)
    two = link(second, cache=cache)
    assert counted == ["scaled"], "the second definition is a cache hit"
    assert len(cache.entries()) == 1 and one.library == two.library
    assert two.source == second.source  # each keeps its own comments


def test_a_constant_or_a_dtype_that_changes_the_code_is_a_new_key(tmp_path: Path, counted: list[str]) -> None:
    tc = toolchain(lower(_kernel(tmp_path, "a.py"), "cpu").target, CompilerOptions())
    keys = {base_key(_linkable(_kernel(tmp_path, "a.py")), tc),
            base_key(_linkable(_kernel(tmp_path, "b.py", constant="3.0")), tc),
            base_key(_linkable(_kernel(tmp_path, "c.py", dtype="bf16")), tc)}
    assert len(keys) == 3
    cache = DiskCache(tmp_path / "cache")
    for name, kw in (("a.py", {}), ("b.py", {"constant": "3.0"}), ("c.py", {"dtype": "bf16"}), ("d.py", {})):
        link(_linkable(_kernel(tmp_path, name, **kw)), cache=cache)
    assert counted == ["scaled"] * 3 and len(cache.entries()) == 3


def test_only_whole_line_comments_leave_the_key() -> None:
    source = ("// from @func k at a.py:3\nint f() {\n  // a.py:4: y = x * 2.0\n  return 2;  // two\n}\n"
              "  // a.py:5: y = x + \\\nint g;\n")
    keyed = keyed_source(source)
    assert keyed.splitlines() == ["", "int f() {", "", "  return 2;  // two", "}", "  // a.py:5: y = x + \\",
                                  "int g;"], "lines kept; a comment continued by a backslash stays"
    assert keyed_source(source.replace("a.py", "b.py").replace("x * 2.0", "z * 2.0")) != keyed  # the continued one
    assert keyed_source(source.replace("a.py:3", "b.py:30").replace("a.py:4", "b.py:40")) == keyed


def test_a_python_line_continued_by_a_backslash_does_not_comment_out_the_next_cxx_line(tmp_path: Path) -> None:
    path = tmp_path / "continued.py"
    text = KERNEL.format(constant="2.0", dtype="f32")
    path.write_text(text.replace("y = tf.exp(x)", "y = tf.exp(x) + \\\n        x"))
    source = _linkable(runpy.run_path(str(path))["scaled"]).source
    comments = [line for line in source.splitlines() if line.lstrip().startswith("//")]
    assert any("continued.py:10: y = tf.exp(x) +" in line for line in comments)
    assert not [line for line in comments if line.rstrip().endswith("\\")]


def test_a_real_build_of_the_same_kernel_from_two_files_runs_the_compiler_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compile_cache: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    real_run = subprocess.run
    runs: list[list[str]] = []

    def run(command: list[str], *args: object, **kwargs: object) -> object:
        if any(str(a).endswith("scaled.cpp") for a in command):
            runs.append(command)
        return real_run(command, *args, **kwargs)

    monkeypatch.setattr(build.subprocess, "run", run)
    first = _kernel(tmp_path, "readme.py", constant="2.5")  # a constant no other test builds: a cold build
    second = _kernel(tmp_path, "readme2.py", blank_lines=3, constant="2.5")
    x = torch.randn(3, 4)
    # The build's line as it starts, whatever the build takes (a warm precompiled header on a fast host builds this
    # kernel in under PROGRESS_AFTER's second: the line then never came); the cache hit given a minute to say nothing.
    monkeypatch.setattr(build, "PROGRESS_AFTER", 0.0)
    a = compile(first, target="cpu")
    built = capsys.readouterr().err
    monkeypatch.setattr(build, "PROGRESS_AFTER", 60.0)
    b = compile(second, target="cpu")
    assert len(runs) == 1, "the second file's kernel is loaded, not compiled"
    assert torch.allclose(b(x), torch.exp(x) * 2.5) and a.library == b.library
    assert "readme2.py" in b.source and "readme2.py" not in a.source
    said = [line for line in built.splitlines() if "compiling scaled" in line]  # stderr is no terminal here:
    assert len(said) == 1 and re.fullmatch(r"tilefoundry: compiling scaled for cpu \(\S*g\+\+\S*\) \.\.\.", said[0]), \
        built  # one line as the build starts, no carriage return
    assert capsys.readouterr().err == ""  # a cache hit says nothing

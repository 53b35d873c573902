"""Every Python block of README.md, and every block of docs/*.md marked ``<!-- runs -->`` (the rest are
fragments), runs as printed, on its own, in a fresh process.

A block is a fenced ```` ```python ```` block. A block that needs what a machine may lack follows, on the line
just before its fence, an HTML comment naming it, ``<!-- needs: cuda -->``; it is skipped where that is missing
(``NEEDS`` says what each name means; an unknown name fails, so a typo never skips a block). Blocks run with the
repository's ``src`` importable, in a temporary folder, with the session's kernel cache (a kernel another test
built is loaded, not built again).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
# What a block may need, and whether this machine has it.
NEEDS: dict[str, Callable[[], bool]] = {"cuda": torch.cuda.is_available}
_FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_MARK = re.compile(r"<!--\s*needs:\s*([\w, ]+?)\s*-->")


@dataclass(frozen=True)
class Block:
    """One Python block: the README line its fence opens on, what it needs, its code."""

    line: int
    needs: tuple[str, ...]
    code: str


def blocks(text: str) -> list[Block]:
    """The Python blocks of a Markdown text, in order."""
    found = []
    for m in _FENCE.finditer(text):
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        mark = _MARK.fullmatch(before.strip())
        needs = tuple(n.strip() for n in mark.group(1).split(",")) if mark else ()
        found.append(Block(text.count("\n", 0, m.start()) + 1, needs, m.group(1)))
    return found


BLOCKS = blocks(README.read_text())


def runnable_doc_blocks() -> list[tuple[str, Block]]:
    """(file, block) of every docs/*.md block whose fence follows ``<!-- runs -->``."""
    found = []
    for doc in sorted((REPO / "docs").glob("*.md")):
        text = doc.read_text()
        for b in blocks(text):
            before = text.split("\n")[: b.line - 1]
            if before and before[-1].strip() == "<!-- runs -->":
                found.append((doc.name, b))
    return found


DOC_BLOCKS = runnable_doc_blocks()


def test_the_readme_has_python_blocks_and_the_first_needs_nothing() -> None:
    assert len(BLOCKS) >= 3
    assert BLOCKS[0].needs == (), "the README's first example runs anywhere"
    compiling = next(b for b in BLOCKS if "jit(" in b.code)
    assert compiling.needs == () and 'target="cpu"' in compiling.code, "the first compile example runs anywhere"
    for b in BLOCKS:
        assert "jit(" not in b.code or re.search(r"jit\([^)]*target=", b.code), f"line {b.line}: pass the target"
    marked = "a\n\n<!-- needs: cuda -->\n```python\nx = 1\n```\n\n```python\ny = 2\n```\n"
    assert blocks(marked) == [Block(4, ("cuda",), "x = 1\n"), Block(8, (), "y = 2\n")]  # the mark: the line before


def test_the_runtime_twin_example_of_the_authoring_guide_is_marked_to_run() -> None:
    assert any(name == "authoring.md" and "@runtime_module" in b.code for name, b in DOC_BLOCKS)


@pytest.mark.parametrize(("doc", "block"), [("README.md", b) for b in BLOCKS] + DOC_BLOCKS,
                         ids=[f"README.md:{b.line}" for b in BLOCKS] + [f"{d}:{b.line}" for d, b in DOC_BLOCKS])
def test_a_readme_block_runs_as_printed(doc: str, block: Block, tmp_path: Path, compile_cache: Path) -> None:
    unknown = [n for n in block.needs if n not in NEEDS]
    assert not unknown, f"README line {block.line}: unknown need {unknown}; known: {', '.join(NEEDS)}"
    missing = [n for n in block.needs if not NEEDS[n]()]
    if missing:
        pytest.skip(f"README line {block.line} needs {', '.join(missing)}")
    script = tmp_path / f"readme_line{block.line}.py"
    script.write_text(block.code)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update(PYTHONPATH=os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")]),
               TILEFOUNDRY_CACHE=str(compile_cache))
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, f"{doc} line {block.line} failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"

"""A new user's first minutes (issue 26, item 9): a quick --help, --version, a torch call inside a @func named
with its tf op, TextSession at the top level, and the IR's slots filled whichever module was imported first."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"})


@pytest.mark.parametrize("argv", [["--help"], ["generate", "--help"], ["chat", "--help"], ["check", "--help"],
                                  ["prepare", "--help"], ["models", "--help"], ["--version"]])
def test_help_and_version_do_not_import_torch(argv: list[str]) -> None:
    out = _python(
        "import sys\n"
        "from tilefoundry.cli.main import main\n"
        "try:\n"
        f"    status = main({argv!r})\n"
        "except SystemExit as e:\n"
        "    status = e.code\n"
        "heavy = sorted(m for m in ('torch', 'transformers', 'numpy') if m in sys.modules)\n"
        "print('STATUS', status, 'HEAVY', heavy)\n")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "STATUS 0 HEAVY []"


def test_version_names_the_installed_package() -> None:
    out = _python("from tilefoundry.cli.main import main\nmain(['--version'])")
    assert out.stdout.strip() == f"tilefoundry {version('tilefoundry')}"


def test_import_tilefoundry_is_light_and_its_names_load_on_use() -> None:
    out = _python("import sys, tilefoundry\n"
                  "print('torch' in sys.modules)\n"
                  "from tilefoundry import TextSession, func, jit, lower\n"
                  "print(TextSession.__module__, callable(func), callable(jit), callable(lower))\n"
                  "import tilefoundry.lower.rows\n"
                  "print(callable(tilefoundry.lower), sorted(tilefoundry.__all__) == sorted(set(dir(tilefoundry)) & "
                  "set(tilefoundry.__all__)))\n")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:3] == ["False", "tilefoundry.models.session True True True", "True True"]


def test_a_function_evaluates_when_only_the_dsl_was_imported() -> None:
    """The evaluator fills the IR's slot on first use, whichever module the user imported first."""
    out = _python("import torch\n"
                  "from tilefoundry.dsl.decorators import func\n"
                  "from tilefoundry.dsl import Tensor, tf\n"
                  "@func\n"
                  "def double(x: Tensor[(3,), 'f32']) -> Tensor[(3,), 'f32']:\n"
                  "    return x + x\n"
                  "print(double(torch.ones(3)).tolist())\n")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[2.0, 2.0, 2.0]"


@pytest.mark.parametrize(("call", "words"), [
    ("torch.relu(x)", "torch.relu was called on a traced tensor inside a @func; use tf.relu"),
    ("torch.nn.functional.silu(x)", "torch.nn.functional.silu was called on a traced tensor inside a @func; use "
                                    "tf.silu"),
    ("torch.erfinv(x)", "torch.erfinv was called on a traced tensor inside a @func; write it with the DSL's ops"),
])
def test_a_torch_function_inside_a_func_names_the_tf_op(call: str, words: str) -> None:
    import torch  # noqa: F401 - the body below calls it

    from tilefoundry import func
    from tilefoundry.dsl import Tensor

    source = f"def body(x: Tensor[(4,), 'f32']) -> Tensor[(4,), 'f32']:\n    return {call}\n"
    namespace = {"Tensor": Tensor, "torch": torch}
    exec(source, namespace)
    with pytest.raises(TypeError) as info:
        func(namespace["body"])
    message = str(info.value).replace(": torch functions run on real tensors, not on the values a @func traces", "")
    assert words in message

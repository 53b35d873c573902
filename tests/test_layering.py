"""The architecture's one-way flow: the IR is the ground floor, and each shared rule has one routine."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import tilefoundry
from tilefoundry import func, module
from tilefoundry.dsl import ConstTensor, DimVar, Tensor
from tilefoundry.ir.core.weights import WeightMismatchError
from tilefoundry.runtime import runtime_func, runtime_module
from tilefoundry.runtime.resource import DictResource

PACKAGE = Path(tilefoundry.__file__).parent
# What the IR must never import: the layers above it and on-disk formats.
ABOVE_THE_IR = ("tilefoundry.evaluator", "tilefoundry.runtime", "tilefoundry.models", "tilefoundry.cli",
                "tilefoundry.dsl", "safetensors", "json")


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in the file, nested ones (inside functions) included."""
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            found.append((node.lineno, name))
            if node.module is None:  # from . import x: x is a module of that package
                found.extend((node.lineno, f"{name}.{alias.name}") for alias in node.names)
    return found


def test_nothing_under_ir_imports_a_layer_above_it_or_a_file_format() -> None:
    files = sorted((PACKAGE / "ir").rglob("*.py"))
    assert len(files) > 20, "the scan sees the IR package"
    offenders = [f"{f.relative_to(PACKAGE)}:{line} imports {name}" for f in files for line, name in _imports(f)
                 if any(name == bad or name.startswith(bad + ".") for bad in ABOVE_THE_IR)]
    assert offenders == []


def test_the_engine_imports_no_model_family_nor_the_command_line() -> None:
    """tilefoundry.models builds on the decode engine, never the reverse."""
    files = sorted((PACKAGE / "engine").rglob("*.py"))
    assert len(files) >= 5, "the scan sees the engine package"
    offenders = [f"{f.relative_to(PACKAGE)}:{line} imports {name}" for f in files for line, name in _imports(f)
                 if name.startswith(("tilefoundry.models", "tilefoundry.cli"))]
    assert offenders == []


def test_the_scan_resolves_relative_imports() -> None:
    names = {name for _, name in _imports(PACKAGE / "evaluator" / "run.py")}
    assert "tilefoundry.ir.core.function" in names and "tilefoundry.evaluator.context" in names


def test_the_ir_alone_imports_none_of_the_layers_above() -> None:
    """Loading the IR modules by file, without the package __init__ (which fills the slots), pulls in no layer
    above the IR: the dependency points one way."""
    code = """
import importlib.util, sys, types
from pathlib import Path
root = Path(sys.argv[1])
pkg = types.ModuleType("tilefoundry"); pkg.__path__ = [str(root)]; sys.modules["tilefoundry"] = pkg
import tilefoundry.ir.core.module, tilefoundry.ir.core.loaded, tilefoundry.ir.core.weights, tilefoundry.ir.ops
above = sorted(m for m in sys.modules if m.split(".")[:2] != ["tilefoundry", "ir"] and m.startswith("tilefoundry.")
               or m.startswith("safetensors"))
print(above)
from tilefoundry.ir.core import backends
try:
    backends.evaluate(None)
except RuntimeError as e:
    print(e)
"""
    done = subprocess.run([sys.executable, "-c", code, str(PACKAGE)], capture_output=True, text=True, check=True)
    lines = done.stdout.splitlines()
    assert lines[0] == "[]", lines[0]
    assert "needs tilefoundry.evaluator, and the slot providers the package root names" in lines[1]


# -- one binding rule for weights and arguments ----------------------------------------------------------------

n = DimVar("n", 1, 64)
m = DimVar("m", 1, 64)


@module(entry="f")
class Derived:
    @func
    def f(x: Tensor[(m,), "f32"], a: ConstTensor[(2 * n,), "f32"], b: ConstTensor[(n,), "f32"],
          c: ConstTensor[(2 * m,), "f32"]):
        return x


@runtime_module(Derived)
class DerivedTwin:
    @runtime_func
    def f(self, x, a, b, c):
        return x


def _weights(a: int, b: int, c: int) -> DictResource:
    return DictResource({"a": torch.zeros(a), "b": torch.zeros(b), "c": torch.zeros(c)})


@pytest.mark.parametrize("reader", ["load", "twin"])
def test_a_dim_expression_weight_is_checked_whatever_the_declaration_order(reader: str) -> None:
    read = Derived.load if reader == "load" else (lambda r: DerivedTwin().load(r))
    with pytest.raises(WeightMismatchError, match=r"weight a: the checkpoint holds torch.float32 \(5,\), declared "
                                                  r"Tensor\[\(2\*n,\), f32\] \(weight a axis 0 is 5, but 2\*n = 6 "
                                                  r"from the other weights\).*@f.converter\('a'\)"):
        read(_weights(5, 3, 8))
    read(_weights(6, 3, 8))


def test_an_expression_only_activations_bind_is_checked_at_the_call() -> None:
    loaded = Derived.load(_weights(6, 3, 7))  # c = 2*m: m is bound by the activation x only
    with pytest.raises(ValueError, match=r"f: argument c axis 0 is 7, but 2\*m = 6 from the other arguments"):
        loaded(torch.ones(3))
    ok = Derived.load(_weights(6, 3, 8))
    assert torch.equal(ok(torch.ones(4)), torch.ones(4))

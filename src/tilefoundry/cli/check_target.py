"""What ``tilefoundry check`` compares: a ``FILE.py:Name[.child...][.member]`` selection, resolved.

``FILE.py`` is a Python file by path, or ``MODULE`` a module importable by its dotted name
(``tilefoundry.examples.check_twin``). ``Name`` is a global of it: a ``@runtime_module`` class (or instance), a
``@module`` Module, or a bare ``@func`` Function. The dotted rest walks the semantic child tree; the last part
may instead name a function or an orchestration method of the node reached. Nothing is run here.
"""

from __future__ import annotations

import copy
import hashlib
import importlib
import importlib.util
import sys
import types as pytypes
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..ir.core.function import Function
from ..ir.core.module import Module
from ..runtime.module import RuntimeModule
from .refusal import Refusal

__all__ = ["Selection", "UserCodeError", "exception_text", "import_file", "import_module", "resolve", "twin_child"]


class UserCodeError(Exception):
    """Code of the file under check raised while it was imported or built: that step fails (exit 1), the
    command goes on to print its report. Any exception counts, ``SystemExit`` included; only
    ``KeyboardInterrupt`` stops the command.

    Attributes:
        label: what failed, as the report names it (``import net.py``, ``NetTwin()``).
        side: whose code it was (``model file``, ``twin``).
        error: the exception, one line (``SystemExit: 0``).
    """

    def __init__(self, label: str, side: str, error: BaseException) -> None:
        super().__init__(f"{label}: the {side} raised {exception_text(error)}")
        self.label = label
        self.side = side
        self.error = exception_text(error)
        self.kind = type(error).__name__


def exception_text(error: BaseException) -> str:
    """``"SystemExit: 0"``, ``"RuntimeError: boom"``: an exception as one line."""
    message = " ".join(str(error).split())
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


@dataclass(frozen=True)
class Selection:
    """A resolved selection.

    Attributes:
        text: the selection as given.
        namespace: the imported file's globals.
        root: the object ``Name`` named.
        twin: the root twin instance (None for a Module or Function selection: no candidate twin).
        sem_root: the root semantic Module (a bare Function is wrapped in a one-function Module).
        path: child names from the root to the selected node.
        member: a function or method name of the node, or None for the node's step.
        member_kind: ``"function"``, ``"method"`` or None.
    """

    text: str
    namespace: dict[str, Any]
    root: Any
    twin: RuntimeModule | None
    sem_root: Module
    path: tuple[str, ...]
    member: str | None
    member_kind: str | None

    @property
    def node(self) -> Module:
        """The semantic Module of the selected node."""
        node = self.sem_root
        for name in self.path:
            node = node._child(name)
        return node

    @property
    def twin_node(self) -> RuntimeModule | None:
        """The twin of the selected node (None without a twin)."""
        if self.twin is None:
            return None
        node = self.twin
        for name in self.path:
            node = twin_child(node, name)
        return node

    @property
    def label(self) -> str:
        """How the selected callable is named in reports: ``forward``, ``layer1.forward``, ``layer1.ffn.mlp``."""
        return ".".join((*self.path, self.member or "forward"))


def import_file(file: str) -> pytypes.ModuleType:
    """Import a Python file by path (its folder is importable while it runs), refusing a missing file."""
    path = Path(file)
    if path.is_dir():
        raise Refusal(f"{file} is a folder; the target is a Python file and a name in it, FILE.py:Name, e.g. "
                      "model.py:ModelTwin")
    if not path.is_file():
        raise Refusal(f"{file}: no such file; the target is FILE.py:Name, e.g. model.py:ModelTwin")
    resolved = path.resolve()
    name = "_tilefoundry_check_" + hashlib.sha1(str(resolved).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise Refusal(f"{file}: cannot be imported as Python source")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    folder = str(resolved.parent)
    sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # noqa: BLE001 - SystemExit too: the file under check failed, not the command
        sys.modules.pop(name, None)
        raise UserCodeError(f"import {file}", "model file", error) from None
    finally:
        if folder in sys.path:
            sys.path.remove(folder)
    return module


def import_module(name: str) -> pytypes.ModuleType:
    """Import the module ``name`` (dotted, as ``import`` takes it), refusing one that does not exist."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        missing = error.name or ""
        if missing and (name == missing or name.startswith(missing + ".")):
            raise Refusal(f"{name}: no such file, and no module of that name to import; the target is FILE.py:Name "
                          "(a file by path) or MODULE:Name (a module by its dotted name), e.g. model.py:ModelTwin "
                          "or tilefoundry.examples.check_twin:ModelTwin") from None
        raise UserCodeError(f"import {name}", "model module", error) from None
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # noqa: BLE001 - SystemExit too: the module under check failed, not the command
        sys.modules.pop(name, None)
        raise UserCodeError(f"import {name}", "model module", error) from None


def _is_module_name(text: str) -> bool:
    """A dotted Python name that names no existing path: a module to import by name."""
    return (not text.endswith(".py") and all(p.isidentifier() for p in text.split("."))
            and not Path(text).exists())


def resolve(text: str) -> Selection:
    """Import the file (or module) of ``FILE.py:Name[.child...][.member]`` and resolve the selection."""
    file, sep, dotted = text.rpartition(":")
    if not sep or not file or not dotted:
        raise Refusal(f"target {text!r} is not FILE.py:Name[.child...][.member], e.g. model.py:ModelTwin.layer0")
    parts = dotted.split(".")
    if not all(p.isidentifier() for p in parts):
        raise Refusal(f"target {text!r}: {dotted!r} is not a dotted path of Python names")
    namespace = vars(import_module(file) if _is_module_name(file) else import_file(file))
    head, rest = parts[0], parts[1:]
    if head not in namespace:
        candidates = sorted(n for n, v in namespace.items() if _selectable(v))
        raise Refusal(f"{file} defines no {head!r}; selectable there: {', '.join(candidates) or 'nothing'}")
    root = namespace[head]
    twin, sem_root = _root(head, root)
    node = sem_root
    path: list[str] = []
    member = member_kind = None
    for i, part in enumerate(rest):
        last = i == len(rest) - 1
        child = next((m for m in node.modules if m.name == part), None)
        if child is not None:
            node = child
            path.append(part)
            continue
        if last and part in node.functions:
            member, member_kind = part, "function"
        elif last and part in node.methods:
            member, member_kind = part, "method"
        else:
            where = ".".join((head, *path))
            raise Refusal(f"{where} has no child{', function or method' if last else ''} {part!r}; it has "
                          f"{node._member_list()}")
    selection = Selection(text, namespace, root, twin, sem_root, tuple(path), member, member_kind)
    _refuse_unauthored(selection)
    return selection


def _selectable(value: Any) -> bool:
    return isinstance(value, (Module, Function, RuntimeModule)) or (
        isinstance(value, type) and issubclass(value, RuntimeModule) and value is not RuntimeModule)


def _root(name: str, root: Any) -> tuple[RuntimeModule | None, Module]:
    if isinstance(root, type) and issubclass(root, RuntimeModule):
        try:
            twin = root()
        except TypeError as error:  # a class that cannot be built without arguments is refused
            raise Refusal(
                f"{name} is a RuntimeModule subclass that cannot be constructed without arguments "
                f"({type(error).__name__}: {error}); select a @runtime_module class, or a module-level instance"
            ) from error
        except KeyboardInterrupt:
            raise
        except BaseException as error:  # noqa: BLE001 - its own code failed while building the twin
            raise UserCodeError(f"{name}()", "twin", error) from None
        return twin, _authored(name, twin)
    if isinstance(root, RuntimeModule):
        return root, _authored(name, root)
    if isinstance(root, Module):
        return None, root
    if isinstance(root, Function):
        # A bare @func becomes a one-function Module whose entry it is (on a copy: the function is untouched).
        fn = copy.copy(root)
        return None, Module(fn.name, {fn.name: fn}, entry=fn.name)
    raise Refusal(
        f"{name} is a {type(root).__name__}; select a @runtime_module class (checked against its Module), a @module "
        "Module or a @func Function (evaluated alone)"
    )


def _authored(name: str, twin: RuntimeModule) -> Module:
    module = twin.module
    if module is None:
        raise Refusal(
            f"{name} ({type(twin).__name__}) stands for no authored Module (its module is None), so there is "
            "nothing to judge it against; generate it with @runtime_module(sem), or select the semantic Module to "
            "evaluate it alone"
        )
    return module


def _refuse_unauthored(selection: Selection) -> None:
    """Every twin node on the way to (and under) the selection must know the Module it stands for."""
    twin = selection.twin
    if twin is None:
        return
    node = twin
    for name in selection.path:
        node = twin_child(node, name)
        if node.module is None:
            raise Refusal(
                f"twin node {node._tree_path()} ({type(node).__name__}) stands for no authored Module (its "
                "module is None), so it cannot be judged against one; select a node above it or check it by hand"
            )


def twin_child(node: RuntimeModule, name: str) -> RuntimeModule:
    """The child twin called ``name`` (refused when the twin's tree differs from its Module's)."""
    for child in node.modules:
        if child.name == name:
            return child
    raise Refusal(
        f"twin node {node._tree_path() or node.name} ({type(node).__name__}) has no child {name!r} although "
        f"its Module does; its children: {', '.join(c.name for c in node.modules) or 'none'}"
    )

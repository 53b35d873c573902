"""LoadedModule: one reading of a Module's weights, callable with activations alone (spec 1.1.2)."""

from __future__ import annotations

import types as pytypes
from collections.abc import Mapping
from typing import Any

import torch
from tqdm import tqdm

from . import backends
from .errors import MissingWeightError
from .function import Function
from .module import Module, variant_only_weights
from .weights import read_node_weights


class LoadedModule:
    """A Module together with the constants one ``load`` read for it and its children.

    ``loaded.<function>`` takes activations alone (weights filled by name from ``constants``),
    ``loaded.<child>`` is the child's LoadedModule and ``loaded.<method>`` is bound to this reading.
    """

    def __init__(self, module: Module, constants: Mapping[str, torch.Tensor],
                 modules: tuple[LoadedModule, ...]) -> None:
        self.module = module
        self.constants: Mapping[str, torch.Tensor] = pytypes.MappingProxyType(dict(constants))
        self.modules = modules

    @property
    def name(self) -> str:
        """The Module's name."""
        return self.module.name

    def _child_reading(self, name: str) -> LoadedModule:
        """The reading of child ``name``."""
        for m in self.modules:
            if m.name == name:
                return m
        raise KeyError(f"LoadedModule {self.name!r} has no reading of its child {name!r}; it holds readings of "
                       f"{', '.join(m.name for m in self.modules) or 'no children'}")

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") or attr in ("module", "constants", "modules"):
            raise AttributeError(attr)
        mod = self.module
        if attr in mod.functions:
            return BoundFunction(self, mod.functions[attr])
        for m in self.modules:
            if m.name == attr:
                return m
        if attr in mod.methods:
            return pytypes.MethodType(mod.methods[attr], self)
        raise AttributeError(f"LoadedModule {mod.name!r} has no function, child or method {attr!r}; "
                             f"it has {mod._member_list()}")

    def forward(self, *acts: Any) -> Any:
        """Run the step on activations alone: the forward method, else the entry function."""
        mod = self.module
        if "forward" in mod.methods:
            return mod.methods["forward"](self, *acts)
        if mod.entry is not None:
            return BoundFunction(self, mod.functions[mod.entry])(*acts)
        raise TypeError(
            f"LoadedModule {mod.name!r} has neither a forward method nor an entry function, so it has no "
            f"step to run; call one of its members instead ({mod._member_list()})"
        )

    def __call__(self, *acts: Any) -> Any:
        return self.forward(*acts)

    def lookup(self, name: str) -> Any:
        """A member of this reading by its dotted path (``"layer0.attend"``): a function bound to this reading, a
        child's reading or a bound method, as attribute access resolves it; also a member a reserved accessor
        hides (a function named ``module``: ``loaded.lookup("module")``, while ``loaded.module`` is the Module)."""
        node: LoadedModule = self
        parts = name.split(".")
        for i, part in enumerate(parts):
            mod = node.module
            last = i == len(parts) - 1
            if last and part in mod.functions:
                return BoundFunction(node, mod.functions[part])
            if last and part in mod.methods:
                return pytypes.MethodType(mod.methods[part], node)
            child = next((m for m in node.modules if m.name == part), None)
            if child is None:
                raise KeyError(f"{name!r}: {'.'.join(parts[:i]) or mod.name} has no member {part!r}; "
                               f"it has {mod._member_list()}")
            node = child
        return node

    def entry_function(self) -> BoundFunction | None:
        """The entry ``@func`` bound to this reading, or None for a Module without one."""
        mod = self.module
        return BoundFunction(self, mod.functions[mod.entry]) if mod.entry is not None else None

    def __repr__(self) -> str:
        return f"<LoadedModule {self.name}: {len(self.constants)} constants, {len(self.modules)} children>"


class BoundFunction:
    """A function of one reading: call it with activations alone."""

    def __init__(self, reading: LoadedModule, function: Function) -> None:
        self.reading = reading
        self.function = function

    def __call__(self, *acts: Any) -> Any:
        fn = self.function.select(acts)  # the variant serving these activations, or the function itself
        args = fn.fill_weights(f"LoadedModule {self.reading.name!r}.{self.function.name}", acts,
                               self.reading.constants)
        device = self._agree_placement(fn, acts)
        return backends.run_reading(fn, args, device, self.reading)

    def _agree_placement(self, fn: Function, acts: tuple[Any, ...]) -> torch.device:
        """This reading's constants ``fn`` reaches, its children's, and the tensor activations share one device.

        That device is where the run happens; a disagreement is refused naming what sits where. Constants
        of variants a nested call may select are checked when that call selects one.
        """
        placed: list[tuple[str, torch.device]] = []
        for p, a in zip(fn.activations, acts):
            if isinstance(a, torch.Tensor):
                placed.append((f"activation {p.name}", a.device))
        name = self.reading.name
        # Every constant of this reading, less the weights of variants other than the one selected.
        others = variant_only_weights(self.reading.module) - {p.name for p in fn.weights}
        seen = {f"{name}.{k}" for k in self.reading.constants if k not in others}
        placed.extend((f"constant {name}.{k}", t.device) for k, t in self.reading.constants.items() if k not in others)
        for key, t in reached_constants(fn, self.reading, name):
            if key not in seen:
                seen.add(key)
                placed.append((f"constant {key}", t.device))
        devices = {d for _, d in placed}
        if len(devices) > 1:
            where = ", ".join(f"{what} on {d}" for what, d in placed)
            raise ValueError(
                f"{name}.{self.function.name}: inputs disagree on placement ({where}); nothing was "
                "moved. Build the activations on the device the resource loaded the weights onto"
            )
        return devices.pop() if devices else torch.device("cpu")

    def __repr__(self) -> str:
        return f"<bound {self.reading.name}.{self.function.signature()}>"


def reached_constants(fn: Function, reading: LoadedModule, path: str) -> list[tuple[str, torch.Tensor]]:
    """Constants a call of ``fn`` under ``reading`` reads: its weights, its callees' and its children's.

    A callee with variants contributes its own declared weights only: which variant runs is known when it
    is called. A weight the reading lacks is refused naming the module path and the weight.
    """
    out = [(f"{path}.{p.name}", reading_constant(reading, path, p.name, fn.name)) for p in fn.weights]
    if fn.variants:
        return out
    for node in fn.graph.nodes:
        if node.op == "call":
            out.extend(reached_constants(node.callee, reading, path))
        elif node.op == "call_module":
            child = child_reading(reading, path, node.attrs["child"])
            out.extend(reached_constants(node.callee, child, f"{path}.{child.name}"))
    return out


def reading_constant(reading: Any, path: str, weight: str, user: str) -> torch.Tensor:
    """``reading.constants[weight]``, refused naming the module path and the weight when the reading lacks it."""
    constants = reading.constants
    if weight not in constants:
        held = ", ".join(sorted(constants)) or "none"
        raise MissingWeightError(
            f"{path}.{weight}: the reading of {path} holds no constant {weight!r}, which {user} needs (it holds: "
            f"{held}); read the Module with load(resource), or add {weight!r} to that reading's constants"
        )
    return constants[weight]


def child_reading(reading: Any, path: str, child: str) -> Any:
    """The reading of ``child`` under ``reading``, refused naming the module path when it has none."""
    try:
        return reading._child_reading(child)
    except KeyError:
        raise MissingWeightError(f"{path}.{child}: the reading of {path} holds no reading of its child {child!r}; "
                                 "read the Module with load(resource), which reads every child") from None


def load_module(mod: Module, resource: Any) -> LoadedModule:
    """Read ``mod``'s weights (and recursively its children's) from ``resource``, strictly validated.

    A progress bar counts the weights read when standard error is a terminal.
    """
    total = sum(len(node.weights) for _, node in mod._walk())
    with tqdm(total=total, desc=f"load {mod.name}", unit="weight", disable=None, leave=False) as bar:
        return _load_node(mod, resource, "", bar)


def _load_node(mod: Module, resource: Any, path: str, bar: tqdm) -> LoadedModule:
    constants = read_node_weights(mod, resource, path, bar.update)
    children = tuple(
        _load_node(child, resource.subtree(child.name), f"{path}.{child.name}" if path else child.name, bar)
        for child in mod.modules
    )
    return LoadedModule(mod, constants, children)

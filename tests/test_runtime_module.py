"""The RuntimeModule base class (spec 1.1): structure, module accessor, forward / __call__, recursive load."""

from __future__ import annotations

import pytest
import torch

from tilefoundry.runtime import RuntimeModule
from tilefoundry.runtime.resource import DictResource


class Recording:
    """A resource that records the scopes it is asked for (and can read nothing)."""

    def __init__(self, log: list[str], prefix: str = "") -> None:
        self.log = log
        self.prefix = prefix

    def load(self, name: str) -> torch.Tensor:
        raise AssertionError(f"the base class resolves nothing, yet load({name!r}) was called")

    def load_group(self, name: str) -> None:
        raise AssertionError("the base class resolves nothing")

    def subtree(self, seg: str) -> Recording:
        path = f"{self.prefix}.{seg}" if self.prefix else seg
        self.log.append(path)
        return Recording(self.log, path)


class Leaf(RuntimeModule):
    """A hand-written leaf: reads one tensor in its own load."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.w: torch.Tensor | None = None

    def load(self, resource):
        self.w = resource.load("w")
        return super().load(resource)

    def forward(self, x):
        return x * self.w


class Pair(RuntimeModule):
    """A hand-written composition of two leaves."""

    def __init__(self) -> None:
        super().__init__("pair", entry=None, modules=(Leaf("left"), Leaf("right")))

    def forward(self, x):
        return self.left(x) + self.right(x)


def test_structure_and_children_by_name() -> None:
    pair = Pair()
    assert pair.name == "pair" and pair.entry is None
    assert [c.name for c in pair.modules] == ["left", "right"]
    assert isinstance(pair.modules, tuple)
    assert pair.left is pair.modules[0] and pair.right is pair.modules[1]
    assert [p for p, _ in pair._walk()] == ["", "left", "right"]
    with pytest.raises(AttributeError, match=r"no attribute or child 'middle'; children: left, right"):
        _ = pair.middle


def test_a_hand_written_subclass_reports_no_authored_module() -> None:
    pair = Pair()
    assert pair.module is None
    assert RuntimeModule("bare").module is None
    with pytest.raises(AttributeError):
        pair.module = object()  # type: ignore[misc]  # nothing can be chosen for it


def test_load_recurses_with_subtree_and_base_holds_no_weights() -> None:
    log: list[str] = []
    bare = RuntimeModule("root", modules=(RuntimeModule("a", modules=(RuntimeModule("b"),)), RuntimeModule("c")))
    assert bare.load(Recording(log)) is bare
    assert log == ["a", "a.b", "c"]
    assert not any(isinstance(v, torch.Tensor) for _, node in bare._walk() for v in vars(node).values())
    assert not any(k in vars(bare) for k in ("resource", "weights", "constants"))


def test_load_then_call_hand_written_composition() -> None:
    pair = Pair()
    data = {"left.w": torch.tensor([2.0]), "right.w": torch.tensor([3.0])}
    pair.load(DictResource(data))
    x = torch.tensor([1.0, 2.0])
    assert torch.equal(pair(x), x * 5)
    assert torch.equal(pair.forward(x), pair(x)), "__call__ delegates to forward"


def test_a_leaf_without_children_loads_nothing() -> None:
    leaf = RuntimeModule("compiled", entry="compiled")
    assert leaf.load(object()) is leaf, "no children: the inherited load is a no-op"


def test_base_forward_names_the_subclass_to_write() -> None:
    class NoForward(RuntimeModule):
        pass

    with pytest.raises(NotImplementedError, match=r"NoForward \('x'\) defines no forward; write forward"):
        NoForward("x")(torch.zeros(1))


def test_load_refuses_a_non_resource_when_there_are_children() -> None:
    with pytest.raises(TypeError, match=r"pair.load takes a RuntimeResource .*got dict"):
        Pair().load({"left.w": torch.zeros(1)})


def test_constructor_refusals() -> None:
    with pytest.raises(TypeError, match="non-empty str"):
        RuntimeModule("")
    with pytest.raises(TypeError, match="entry must be a function name"):
        RuntimeModule("m", entry=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"holds the class Leaf; construct it and pass the instance"):
        RuntimeModule("m", modules=(Leaf,))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="holds a str, not a RuntimeModule instance"):
        RuntimeModule("m", modules=("leaf",))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="two children are named 'x'"):
        RuntimeModule("m", modules=(RuntimeModule("x"), RuntimeModule("x")))
    shared = RuntimeModule("x")
    RuntimeModule("first", modules=(shared,))
    with pytest.raises(ValueError, match=r"child 'x' already belongs to 'first'.*one instance per owner"):
        RuntimeModule("second", modules=(shared,))

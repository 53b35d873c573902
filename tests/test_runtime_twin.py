"""Generated twins at run time: children built with ir=, weights filled by name, load, methods, forward."""

from __future__ import annotations

import pytest
import torch

import tilefoundry.evaluator as evaluator_pkg
import tilefoundry.evaluator.run as evaluator_run
from tilefoundry import func, module
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, tf
from tilefoundry.ir.core.weights import WeightMismatchError
from tilefoundry.runtime import (
    NotLoadedError,
    RuntimeFunction,
    RuntimeModule,
    entry_abi_of,
    runtime_func,
    runtime_module,
)
from tilefoundry.runtime.resource import DictResource

n = DimVar("n", 1, 16)
CALLS: list[str] = []


@module(entry="proj")
class Proj:
    @func
    def proj(x: Tensor[(n, 4), "f32"], w: ConstTensor[(4, 4), "f32"], b: ConstTensor[(4,), "f32"]):
        return tf.matmul(x, w) + b

    @func
    def gate(x: Tensor[(n, 4), "f32"]):
        return tf.sigmoid(x)


@module
class Block:
    inner = Proj
    outer = Proj

    @func
    def norm(x: Tensor[(n, 4), "f32"], g: ConstTensor[(4,), "f32"]):
        return tf.rms_norm(x, g, 1e-6)

    def forward(self, x):
        return self.outer(self.inner(self.norm(x)))

    def gated(self, x):
        return self.inner.gate(x) * self.norm(x)

    def names(self):
        return [m.name for m in self.modules]

    def init_state(self, x, *, device):
        return self.inner.gate(x).to(device), tuple(m.name for m in self.modules)


@runtime_module(Proj)
class ProjTwin:
    @runtime_func
    def proj(self, x, w, b):
        CALLS.append(f"{self.name}.proj")
        return torch.addmm(b, x, w)

    @runtime_func
    def gate(self, x):
        CALLS.append(f"{self.name}.gate")
        return torch.sigmoid(x)


@runtime_module(Block)
class BlockTwin:
    inner = ProjTwin
    outer = ProjTwin

    @runtime_func
    def norm(self, x, g):
        CALLS.append("norm")
        return torch.nn.functional.rms_norm(x, (4,), g, 1e-6)


def _weights(seed: int = 0) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return {
        "g": torch.rand(4, generator=gen) + 0.5,
        "inner.w": torch.randn(4, 4, generator=gen),
        "inner.b": torch.randn(4, generator=gen),
        "outer.w": torch.randn(4, 4, generator=gen),
        "outer.b": torch.randn(4, generator=gen),
    }


def test_children_are_built_with_ir_and_report_their_authored_module() -> None:
    twin = BlockTwin()
    assert twin.module is Block and twin.name == "Block" and twin.entry is None
    assert [c.name for c in twin.modules] == ["inner", "outer"]
    assert twin.inner.module is Block._child("inner"), "the child stands for the Module it was built with (ir=)"
    assert twin.inner.name == "inner" and twin.inner.entry == "proj"
    assert twin.inner is not twin.outer and type(twin.inner) is ProjTwin
    renamed = ProjTwin(ir=Proj.renamed("head"))
    assert renamed.name == "head" and renamed.module.name == "head"


def test_ir_of_another_shape_or_kind_is_refused() -> None:
    @module(entry="proj")
    class Narrow:
        @func
        def proj(x: Tensor[(n, 4), "f32"], w: ConstTensor[(4, 4), "f32"], b: ConstTensor[(4,), "f32"]):
            return tf.matmul(x, w) + b

    with pytest.raises(ValueError, match=r"ProjTwin was generated for Proj and cannot stand for Module 'Narrow': "
                                          r"functions"):
        ProjTwin(ir=Narrow)
    with pytest.raises(TypeError, match=r"ProjTwin\(ir=...\) takes the semantic Module"):
        ProjTwin(ir="Proj")  # type: ignore[arg-type]


def test_weights_are_filled_by_name_and_callers_pass_activations_alone() -> None:
    seen: list[tuple[torch.Tensor, ...]] = []

    @runtime_module(Proj)
    class Spy:
        @runtime_func
        def proj(self, x, w, b):
            seen.append((x, w, b))
            return x @ w + b

        @runtime_func
        def gate(self, x):
            return x

    data = {"w": torch.randn(4, 4), "b": torch.randn(4)}
    twin = Spy().load(DictResource(data))
    x = torch.randn(3, 4)
    out = twin.proj(x)
    ((got_x, got_w, got_b),) = seen
    assert got_x is x and got_w is data["w"] and got_b is data["b"], "the bound tensors themselves, by name"
    assert torch.equal(out, x @ data["w"] + data["b"])
    with pytest.raises(TypeError, match=r"takes activations alone \(x\); you passed every declared parameter.*"
                                        r"weights \(w, b\) are filled from what load read"):
        twin.proj(x, data["w"], data["b"])
    with pytest.raises(TypeError, match=r"Proj.proj takes 1 activations \(x\), got 2"):
        twin.proj(x, x)


def test_a_kernel_with_weights_before_load_is_refused_one_without_runs() -> None:
    twin = BlockTwin()
    x = torch.randn(2, 4)
    with pytest.raises(NotLoadedError, match=r"BlockTwin Block.norm needs the weights g.*call load\(resource\)"):
        twin.norm(x)
    with pytest.raises(NotLoadedError, match=r"ProjTwin inner.proj needs the weights w, b"):
        twin.inner.proj(x)
    assert torch.equal(twin.inner.gate(x), torch.sigmoid(x))


def test_load_reads_each_node_under_its_path_and_matches_the_evaluator() -> None:
    data = _weights()
    resource = DictResource(data)
    twin = BlockTwin().load(resource)
    loaded = Block.load(resource)
    x = torch.randn(5, 4)
    CALLS.clear()
    assert torch.allclose(twin(x), loaded(x), rtol=1e-5, atol=1e-6)
    assert CALLS == ["norm", "inner.proj", "outer.proj"], "forward reached the twin's own kernels and children"
    assert torch.allclose(twin.outer.proj(x), x @ data["outer.w"] + data["outer.b"], atol=1e-6)


def test_load_validates_against_the_declarations() -> None:
    data = _weights()
    data["inner.w"] = torch.randn(4, 5)
    with pytest.raises(WeightMismatchError, match=r"weight inner.w: the checkpoint holds torch.float32 \(4, 5\), "
                                                  r"declared Tensor\[\(4, 4\), f32\].*@proj.converter\('w'\)"):
        BlockTwin().load(DictResource(data))
    data = _weights()
    data["g"] = data["g"].double()
    with pytest.raises(WeightMismatchError, match=r"weight g: the checkpoint holds torch.float64"):
        BlockTwin().load(DictResource(data))
    data = _weights()
    del data["outer.b"]
    with pytest.raises(KeyError, match="outer.b"):
        BlockTwin().load(DictResource(data))
    with pytest.raises(TypeError, match=r"BlockTwin.load takes a RuntimeResource .*got dict"):
        BlockTwin().load(_weights())


def test_a_failed_load_keeps_the_weights_bound_before() -> None:
    twin = BlockTwin().load(DictResource(_weights(0)))
    x = torch.randn(2, 4)
    before = twin(x)
    broken = _weights(1)
    broken["outer.w"] = torch.randn(3, 3)  # read last: everything before it was valid
    with pytest.raises(WeightMismatchError, match="outer.w"):
        twin.load(DictResource(broken))
    assert torch.equal(twin(x), before), "nothing of the failed reading was bound"
    fresh = BlockTwin()
    with pytest.raises(WeightMismatchError):
        fresh.load(DictResource(broken))
    with pytest.raises(NotLoadedError):
        fresh.norm(x)
    twin.load(DictResource(_weights(1) | {"outer.w": _weights(0)["outer.w"]}))
    assert not torch.equal(twin(x), before), "a successful load rebinds"


def test_orchestration_methods_are_reused_verbatim() -> None:
    assert BlockTwin.forward is Block.methods["forward"]
    assert BlockTwin.gated is Block.methods["gated"]
    twin = BlockTwin().load(DictResource(_weights()))
    loaded = Block.load(DictResource(_weights()))
    x = torch.randn(3, 4)
    CALLS.clear()
    assert torch.allclose(twin.gated(x), loaded.gated(x), rtol=1e-5, atol=1e-6)
    assert CALLS == ["inner.gate", "norm"]
    assert twin.names() == ["inner", "outer"], "self.modules works as on Module / LoadedModule"
    state, names = twin.init_state(x, device="cpu")
    assert torch.equal(state, torch.sigmoid(x)) and names == ("inner", "outer"), "keyword-only arguments pass"


def test_forward_prefers_an_own_forward() -> None:
    @runtime_module(Block)
    class Own:
        inner = ProjTwin
        outer = ProjTwin
        norm = BlockTwin.norm.impl

        def forward(self, x):
            return self.inner(x)

    twin = Own().load(DictResource(_weights()))
    x = torch.randn(2, 4)
    assert Own.forward is not Block.methods["forward"]
    assert torch.equal(twin(x), twin.inner.proj(x))


def test_forward_without_a_method_calls_the_entry_kernel() -> None:
    twin = ProjTwin().load(DictResource({"w": torch.eye(4), "b": torch.ones(4)}))
    x = torch.randn(2, 4)
    CALLS.clear()
    assert torch.equal(twin(x), x + 1) and torch.equal(twin.forward(x), x + 1)
    assert CALLS == ["Proj.proj", "Proj.proj"]


def test_forward_with_neither_is_refused_when_called_naming_what_to_call() -> None:
    @module
    class Loose:
        @func
        def a(x: Tensor[(4,), "f32"]):
            return x

        @func
        def b(x: Tensor[(4,), "f32"]):
            return -x

    @runtime_module(Loose)
    class LooseTwin:
        a = runtime_func(lambda self, x: x)
        b = runtime_func(lambda self, x: -x)

    twin = LooseTwin()  # constructing is fine: only the step is missing
    with pytest.raises(TypeError, match=r"twin 'Loose' has no step to run: Loose has neither a forward method nor "
                                        r"an entry function.*kernels Loose.a\(...\), Loose.b\(...\)"):
        twin(torch.zeros(4))
    assert torch.equal(twin.b(torch.ones(4)), -torch.ones(4))


def test_a_runtime_function_kernel_gets_every_param_in_declared_order() -> None:
    got: list[tuple[str, ...]] = []

    class Body(RuntimeFunction):
        def __call__(self, x, w, b):
            got.append(tuple(t.shape for t in (x, w, b)))
            return torch.nn.functional.linear(x, w.t(), b)

    @runtime_module(Proj)
    class WithBody:
        proj = Body(entry_abi_of(Proj.functions["proj"]))
        gate = ProjTwin.gate.impl

    data = {"w": torch.randn(4, 4), "b": torch.randn(4)}
    twin = WithBody().load(DictResource(data))
    x = torch.randn(2, 4)
    assert torch.allclose(twin(x), x @ data["w"] + data["b"], atol=1e-6)
    assert got == [(torch.Size([2, 4]), torch.Size([4, 4]), torch.Size([4]))]


def test_one_child_class_for_two_owners_gives_independent_weights() -> None:
    data = _weights()
    twin = BlockTwin().load(DictResource(data))
    x = torch.randn(2, 4)
    assert torch.allclose(twin.inner.proj(x), x @ data["inner.w"] + data["inner.b"], atol=1e-6)
    assert torch.allclose(twin.outer.proj(x), x @ data["outer.w"] + data["outer.b"], atol=1e-6)


def test_a_twin_never_runs_the_evaluator(monkeypatch: pytest.MonkeyPatch) -> None:
    twin = BlockTwin().load(DictResource(_weights()))
    loaded = Block.load(DictResource(_weights()))

    def forbidden(*args, **kwargs):
        raise AssertionError("the HIR evaluator ran")

    for target in (evaluator_run, evaluator_pkg):
        monkeypatch.setattr(target, "run_function", forbidden)
        monkeypatch.setattr(target, "evaluate", forbidden)
    x = torch.randn(2, 4)
    assert twin(x).shape == (2, 4)
    assert twin.gated(x).shape == (2, 4)
    with pytest.raises(AssertionError, match="the HIR evaluator ran"):
        loaded(x)  # the patch is effective: the semantic side does go through it


def test_generated_and_hand_written_nodes_mix() -> None:
    class Identity(RuntimeModule):
        def __init__(self, *, ir) -> None:
            super().__init__(ir.name, ir.entry)

        def forward(self, x):
            return x

    @runtime_module(Block)
    class Partly:
        inner = Identity
        outer = ProjTwin
        norm = BlockTwin.norm.impl

    twin = Partly().load(DictResource(_weights()))
    assert twin.inner.module is None, "a hand-written child stands for no authored Module"
    assert twin.outer.module is Block._child("outer")
    x = torch.randn(2, 4)
    assert torch.equal(twin(x), twin.outer(twin.norm(x)))

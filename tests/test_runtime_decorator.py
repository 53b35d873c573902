"""@runtime_module / @runtime_func: decoration-time validation, strictly one to one (spec 1.1)."""

from __future__ import annotations

import pytest
import torch

from tilefoundry import func, module
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, tf
from tilefoundry.ir.core import Module
from tilefoundry.runtime import (
    RuntimeFunction,
    RuntimeModule,
    TwinDefinitionError,
    entry_abi_of,
    runtime_func,
    runtime_module,
)
from tilefoundry.runtime.resource import DictResource

n = DimVar("n", 1, 16)


@module(entry="proj")
class Proj:
    @func
    def proj(x: Tensor[(n, 4), "f32"], w: ConstTensor[(4, 4), "f32"]):
        return tf.matmul(x, w)

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


@runtime_module(Proj)
class ProjTwin:
    @runtime_func
    def proj(self, x, w):
        return x @ w

    @runtime_func
    def gate(self, x):
        return torch.sigmoid(x)


def test_a_valid_twin_is_a_runtime_module_subclass_named_like_the_class() -> None:
    assert issubclass(ProjTwin, RuntimeModule)
    assert ProjTwin.__name__ == "ProjTwin"
    twin = ProjTwin()
    assert twin.name == "Proj" and twin.entry == "proj" and twin.modules == ()
    assert twin.module is Proj


def test_missing_and_extra_kernels_are_both_named() -> None:
    with pytest.raises(TwinDefinitionError, match=r"kernels must match the functions of Proj one to one "
                                                   r"\(proj, gate\): missing gate; extra gat"):

        @runtime_module(Proj)
        class Typo:
            @runtime_func
            def proj(self, x, w):
                return x @ w

            @runtime_func
            def gat(self, x):
                return x


def test_missing_and_extra_children_are_both_named() -> None:
    with pytest.raises(TwinDefinitionError) as info:

        @runtime_module(Block)
        class Wrong:
            inner = ProjTwin
            other = ProjTwin

            @runtime_func
            def norm(self, x, g):
                return x

    message = str(info.value)
    assert "child attributes must match the children of Block one to one (inner, outer)" in message
    assert "missing outer; extra other" in message


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(TwinDefinitionError) as info:

        @runtime_module(Block)
        class Empty:
            pass

    message = str(info.value)
    assert "missing norm" in message and "missing inner, outer" in message


@pytest.mark.parametrize("kind", ["function", "child", "method"])
def test_a_semantic_module_naming_a_member_module_is_refused(kind: str) -> None:
    @func
    def module(x: Tensor[(4,), "f32"]):  # noqa: F811 - the very name under test
        return x

    functions = {"module": module} if kind == "function" else {}
    children = (Proj.renamed("module"),) if kind == "child" else ()
    methods = {"module": lambda self: None} if kind == "method" else {}
    # An authored Module may name a member `module` (spec 1.1); @runtime_module must refuse to build its twin,
    # whose `module` is the accessor of the Module it stands for.
    bad = Module("Bad", functions, children, methods)
    what = "child" if kind == "child" else kind
    with pytest.raises(TwinDefinitionError, match=rf"@runtime_module\(Bad\): Bad has a {what} named 'module', which "
                                                  r"would shadow the reserved accessor twin.module"):
        runtime_module(bad)


def test_a_twin_class_defining_module_is_refused() -> None:
    with pytest.raises(TwinDefinitionError, match=r"it defines 'module', the reserved accessor"):

        @runtime_module(Proj)
        class Shadow:
            module = None
            proj = ProjTwin.proj.impl
            gate = ProjTwin.gate.impl

    class Mixin:
        def module(self):
            return "something else"

    with pytest.raises(TwinDefinitionError, match=r"its base Mixin defines 'module'"):

        @runtime_module(Proj)
        class Inherits(Mixin):
            proj = ProjTwin.proj.impl
            gate = ProjTwin.gate.impl


def test_a_child_instance_is_refused_in_favour_of_the_class() -> None:
    with pytest.raises(TwinDefinitionError, match=r"inner = .* is a RuntimeModule instance; assign the class "
                                                   r"\(ProjTwin\)"):

        @runtime_module(Block)
        class Instances:
            inner = ProjTwin()
            outer = ProjTwin

            @runtime_func
            def norm(self, x, g):
                return x


def test_a_child_that_is_not_a_runtime_module_class_is_refused() -> None:
    with pytest.raises(TwinDefinitionError, match=r"inner stands for the child inner of Block but is a function"):

        @runtime_module(Block)
        class Functions:
            outer = ProjTwin

            def inner(self, x):
                return x

            @runtime_func
            def norm(self, x, g):
                return x


def test_a_child_class_must_accept_the_ir_keyword() -> None:
    class HandWritten(RuntimeModule):
        def __init__(self) -> None:
            super().__init__("inner")

    with pytest.raises(TwinDefinitionError, match=r"child inner = .*HandWritten does not accept the ir= "
                                                   r"constructor keyword"):

        @runtime_module(Block)
        class NoIr:
            inner = HandWritten
            outer = ProjTwin

            @runtime_func
            def norm(self, x, g):
                return x


def test_a_child_twin_of_another_shape_is_refused() -> None:
    @module
    class Other:
        @func
        def proj(x: Tensor[(n, 4), "f32"]):
            return x

    @runtime_module(Other)
    class OtherTwin:
        @runtime_func
        def proj(self, x):
            return x

    with pytest.raises(TwinDefinitionError, match=r"child outer = .*OtherTwin is the twin of Other, which differs "
                                                   r"from the child outer: functions"):

        @runtime_module(Block)
        class Mixed:
            inner = ProjTwin
            outer = OtherTwin

            @runtime_func
            def norm(self, x, g):
                return x


def test_a_kernel_must_take_the_func_parameters_in_order() -> None:
    with pytest.raises(TwinDefinitionError, match=r"@runtime_func proj\(self, x\) must take the @func's parameters "
                                                   r"in order after self: proj\(self, x, w\)"):

        @runtime_module(Proj)
        class Activations:
            @runtime_func
            def proj(self, x):
                return x

            gate = ProjTwin.gate.impl

    with pytest.raises(TwinDefinitionError, match=r"proj\(self, w, x\) must take"):

        @runtime_module(Proj)
        class Swapped:
            @runtime_func
            def proj(self, w, x):
                return x @ w

            gate = ProjTwin.gate.impl

    with pytest.raises(TwinDefinitionError, match=r"proj\(self, x, \*rest\) must take"):

        @runtime_module(Proj)
        class HalfVariadic:
            @runtime_func
            def proj(self, x, *rest):
                return x

            gate = ProjTwin.gate.impl


def test_a_kernel_written_self_star_args_receives_the_parameters_in_order() -> None:
    @runtime_module(Proj)
    class Variadic:
        @runtime_func
        def proj(self, *args):
            x, w = args
            return x @ w

        @runtime_func
        def gate(self, *args):
            return torch.sigmoid(args[0])

    w = torch.randn(4, 4)
    twin = Variadic(Proj).load(DictResource({"w": w}))  # ir given positionally
    x = torch.randn(3, 4)
    assert torch.equal(twin.proj(x), x @ w)
    assert torch.equal(twin(x), x @ w)
    assert twin.module is Proj


def test_a_plain_method_named_like_a_function_must_be_tagged() -> None:
    with pytest.raises(TwinDefinitionError, match=r"gate stands for the @func gate of Proj but is a function; tag "
                                                   r"a method with @runtime_func"):

        @runtime_module(Proj)
        class Untagged:
            proj = ProjTwin.proj.impl

            def gate(self, x):
                return x


def test_a_runtime_function_instance_stands_for_a_kernel_with_the_exact_abi() -> None:
    class MatmulBody(RuntimeFunction):
        def __call__(self, x, w):
            return torch.mm(x, w)

    @runtime_module(Proj)
    class WithBody:
        proj = MatmulBody(entry_abi_of(Proj.functions["proj"]))
        gate = ProjTwin.gate.impl

    assert isinstance(WithBody.proj.impl, MatmulBody)
    with pytest.raises(TwinDefinitionError, match=r"proj = MatmulBody\(...\) has type gate\(x: .*\), but the @func "
                                                   r"proj of Proj is proj\(x: .*w: .*\); build it with entry_abi_of"):

        @runtime_module(Proj)
        class WrongAbi:
            proj = MatmulBody(entry_abi_of(Proj.functions["gate"]))
            gate = ProjTwin.gate.impl


def test_orchestration_methods_may_not_be_rewritten_but_forward_may() -> None:
    with pytest.raises(TwinDefinitionError, match=r"helper rewrites the orchestration method Sem.helper, which the "
                                                   r"twin reuses verbatim"):

        @module
        class Sem:
            @func
            def f(x: Tensor[(4,), "f32"]):
                return x

            def helper(self, x):
                return self.f(x)

        @runtime_module(Sem)
        class Rewrites:
            @runtime_func
            def f(self, x):
                return x

            def helper(self, x):
                return x


@pytest.mark.parametrize("name", ["__init__", "load", "name", "entry", "modules", "__call__"])
def test_members_the_generated_class_provides_are_refused(name: str) -> None:
    body = {"proj": ProjTwin.proj.impl, "gate": ProjTwin.gate.impl, name: lambda self, *a: None}
    with pytest.raises(TwinDefinitionError, match=rf"it defines '{name}', which the generated class provides"):
        runtime_module(Proj)(type("Provides", (), body))


def test_decorator_argument_errors() -> None:
    with pytest.raises(TwinDefinitionError, match=r"takes the semantic Module instance.*in parentheses"):

        @runtime_module  # type: ignore[arg-type]
        class Bare:
            pass

    with pytest.raises(TwinDefinitionError, match="takes the semantic Module instance"):
        runtime_module("Proj")  # type: ignore[arg-type]
    with pytest.raises(TwinDefinitionError, match="decorates a class"):
        runtime_module(Proj)(lambda: None)  # type: ignore[arg-type]
    with pytest.raises(TwinDefinitionError, match="drop the staticmethod decorator"):
        runtime_func(staticmethod(lambda x: x))  # type: ignore[arg-type]


def test_helpers_and_data_attributes_are_kept() -> None:
    @runtime_module(Proj)
    class WithHelpers:
        SCALE = 2.0
        ALIAS = {"w": "weight"}

        def _twice(self, x):
            return x * self.SCALE

        @runtime_func
        def proj(self, x, w):
            return self._twice(x @ w)

        gate = ProjTwin.gate.impl

    twin = WithHelpers()
    assert WithHelpers.ALIAS == {"w": "weight"} and twin.SCALE == 2.0
    assert torch.equal(twin._twice(torch.ones(1)), torch.full((1,), 2.0))


def test_tuple_children_cover_the_unnamed_children_in_order() -> None:
    @module
    class Stack:
        layers = tuple(Proj.renamed(f"layer{i}") for i in range(3))

        def forward(self, x):
            for layer in self.modules:
                x = layer(x)
            return x

    @runtime_module(Stack)
    class StackTwin:
        layers = (ProjTwin,) * 3

    twin = StackTwin()
    assert [c.name for c in twin.modules] == ["layer0", "layer1", "layer2"]
    assert all(type(c) is ProjTwin for c in twin.modules)

    @runtime_module(Stack)
    class Mixed:
        layer1 = ProjTwin
        rest = (ProjTwin, ProjTwin)

    assert [c.name for c in Mixed().modules] == ["layer0", "layer1", "layer2"]

    with pytest.raises(TwinDefinitionError, match=r"missing layer2"):

        @runtime_module(Stack)
        class Short:
            layers = (ProjTwin,) * 2

    with pytest.raises(TwinDefinitionError, match=r"extra layers\[3\] \(ProjTwin\)"):

        @runtime_module(Stack)
        class Long:
            layers = (ProjTwin,) * 4

    with pytest.raises(TwinDefinitionError, match=r"layers\[1\] is a RuntimeModule instance"):

        @runtime_module(Stack)
        class InstanceInTuple:
            layers = (ProjTwin, ProjTwin(), ProjTwin)

    with pytest.raises(TwinDefinitionError, match=r"layers\[2\] is a int; a tuple of children holds RuntimeModule"):

        @runtime_module(Stack)
        class Junk:
            layers = (ProjTwin, ProjTwin, 3)


# -- members inherited from base classes (collected over the MRO, the class's own winning) ---------------


def test_an_inherited_extra_kernel_is_refused_naming_it_and_its_base() -> None:
    class Base:
        @runtime_func
        def extra(self, x):
            return x

    with pytest.raises(TwinDefinitionError, match=r"kernels must match.*: extra extra \(from Base\)"):

        @runtime_module(Proj)
        class T(Base):
            proj = ProjTwin.proj.impl

            @runtime_func
            def gate(self, x):
                return x

    class Deeper(Base):
        pass

    with pytest.raises(TwinDefinitionError, match=r"extra extra \(from Base\)"):
        runtime_module(Proj)(type("T2", (Deeper,), {"proj": ProjTwin.proj.impl, "gate": ProjTwin.gate.impl}))


def test_an_inherited_matching_kernel_counts_and_is_used() -> None:
    class Kernels:
        @runtime_func
        def gate(self, x):
            return x + 100.0

        @runtime_func
        def proj(self, x, w):
            raise AssertionError("overridden by the class's own proj")

    @runtime_module(Proj)
    class T(Kernels):
        @runtime_func
        def proj(self, x, w):
            return x @ w

    twin = T()
    twin.load(DictResource({"w": torch.eye(4)}))
    x = torch.ones(2, 4)
    assert torch.equal(twin.gate(x), x + 100.0)
    assert torch.equal(twin.proj(x), x)
    assert torch.equal(twin(x), x)  # the entry kernel: the class's own proj wins over the base's


def test_an_inherited_signature_mismatch_and_wrong_body_type_are_checked() -> None:
    class Base:
        @runtime_func
        def gate(self, y):
            return y

    with pytest.raises(TwinDefinitionError, match=r"@runtime_func gate\(self, y\) must take"):
        runtime_module(Proj)(type("T", (Base,), {"proj": ProjTwin.proj.impl}))


def test_a_base_defining_module_or_a_provided_member_is_still_refused() -> None:
    class Grand:
        module = "shadow"

    class Parent(Grand):
        pass

    body = {"proj": ProjTwin.proj.impl, "gate": ProjTwin.gate.impl}
    with pytest.raises(TwinDefinitionError, match=r"its base Grand defines 'module', the reserved accessor"):
        runtime_module(Proj)(type("T", (Parent,), body))

    class WithInit:
        def __init__(self):
            pass

    with pytest.raises(TwinDefinitionError, match=r"its base WithInit defines '__init__', which the generated"):
        runtime_module(Proj)(type("T", (WithInit,), body))

    @module
    class WithMethod:
        @func
        def norm(x: Tensor[(n, 4), "f32"]):
            return x

        def step(self, x):
            return self.norm(x)

    class StepBase:
        def step(self, x):
            return x

    with pytest.raises(TwinDefinitionError, match=r"step \(in base StepBase\) rewrites the orchestration method"):
        runtime_module(WithMethod)(type("T", (StepBase,), {"norm": runtime_func(lambda self, x: x)}))


def test_an_inherited_forward_is_the_twins_own() -> None:
    class Fwd:
        def forward(self, x):
            return self.gate(x) * 0.0

    @runtime_module(Proj)
    class T(Fwd):
        proj = ProjTwin.proj.impl
        gate = ProjTwin.gate.impl

    twin = T()
    twin.load(DictResource({"w": torch.eye(4)}))
    assert torch.equal(twin(torch.ones(1, 4)), torch.zeros(1, 4))


def test_inherited_children_count() -> None:
    class Children:
        inner = ProjTwin
        outer = ProjTwin

    @runtime_module(Block)
    class T(Children):
        @runtime_func
        def norm(self, x, g):
            return x

    twin = T()
    assert [c.name for c in twin.modules] == ["inner", "outer"]
    # The base's class attribute does not shadow the child: twin.inner is the built child instance.
    assert twin.inner is twin.modules[0] and twin.outer is twin.modules[1]

    class Layers:
        layers = (ProjTwin, ProjTwin)

    stack = runtime_module(Block)(type("T3", (Layers,), {"norm": T._tf_kernels["norm"].impl}))()
    assert stack.inner is stack.modules[0]
    with pytest.raises(AttributeError, match="no attribute or child 'layers'"):
        _ = stack.layers

    class ExtraChild:
        other = ProjTwin

    with pytest.raises(TwinDefinitionError, match=r"extra other"):
        runtime_module(Block)(type("T2", (Children, ExtraChild), {"norm": T._tf_kernels["norm"].impl}))


def test_a_runtime_module_subclass_base_is_refused_but_runtime_module_itself_is_accepted() -> None:
    body = {"proj": ProjTwin.proj.impl, "gate": ProjTwin.gate.impl}
    with pytest.raises(TwinDefinitionError, match=r"its base ProjTwin is a RuntimeModule subclass"):
        runtime_module(Proj)(type("T", (ProjTwin,), body))
    twin_cls = runtime_module(Proj)(type("T", (RuntimeModule,), body))
    assert twin_cls.__bases__ == (RuntimeModule,)

"""check(candidate, reference, inputs, *, expect): nested inputs and outputs, every refusal of spec 1.6."""

from __future__ import annotations

import functools
import inspect

import pytest
import torch

from tilefoundry.runtime.check import (
    CheckError,
    Report,
    allclose,
    check,
    cosine,
    equal,
    max_abs,
    nan_inf,
    rel_l2,
    ulp,
)


def x() -> torch.Tensor:
    return torch.arange(12, dtype=torch.float32).reshape(3, 4) / 7


def double(a: torch.Tensor) -> torch.Tensor:
    return a * 2


# -- running ----------------------------------------------------------------------------------------------


def test_bare_tensor_in_and_out_has_path_output() -> None:
    report = check(double, lambda a: a + a, (x(),), expect={"output": [equal()]})
    assert isinstance(report, Report)
    assert [o.path for o in report.outputs] == ["output"]
    out = report.outputs[0]
    assert out.shape == (3, 4) and out.dtype == "f32"
    assert out.ref_norm == pytest.approx(float(torch.linalg.vector_norm(x().double() * 2)))
    assert report.passed and out.passed


def test_a_bare_tensor_stands_for_a_single_argument() -> None:
    report = check(double, double, x(), expect={"output": [equal()]})
    assert report.passed


def test_nested_tuple_inputs_and_outputs() -> None:
    def reference(
        pair: tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]], w: torch.Tensor
    ) -> tuple[tuple[torch.Tensor, tuple[torch.Tensor]], torch.Tensor]:
        a, (b, c) = pair
        return (a + b, (c * w,)), (a * w).argmax(-1)

    def candidate(
        pair: tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]], w: torch.Tensor
    ) -> tuple[tuple[torch.Tensor, tuple[torch.Tensor]], torch.Tensor]:
        a, (b, c) = pair
        return (b + a, (w * c + 1e-3,)), (w * a).argmax(-1)

    inputs = ((x(), (x() + 1, x() - 1)), torch.full((4,), 0.5))
    report = check(
        candidate,
        reference,
        inputs,
        expect={
            "output[0][0]": [equal()],
            "output[0][1][0]": [max_abs(max=1e-2), rel_l2(max=1e-1)],
            "output[1]": [equal()],
        },
    )
    assert [o.path for o in report.outputs] == ["output[0][0]", "output[0][1][0]", "output[1]"]
    assert [o.dtype for o in report.outputs] == ["f32", "f32", "i64"]
    assert report.outputs[2].shape == (3,)
    assert report["output[0][1][0]"].results[0].values["max_abs"] == pytest.approx(1e-3, rel=1e-3)
    assert report.passed


def test_verdicts_follow_the_parts_and_show_where_it_failed() -> None:
    def wrong(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return a * 2, a.sum(-1) + 1

    def right(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return a * 2, a.sum(-1)

    expect = {"output[0]": [equal(), nan_inf()], "output[1]": [nan_inf(), max_abs(max=1e-3)]}
    report = check(wrong, right, (x(),), expect=expect)
    assert not report.passed
    assert report["output[0]"].passed
    failed = report["output[1]"]
    assert not failed.passed
    assert [r.passed for r in failed.results] == [True, False]
    assert failed.results[1].values == {"max_abs": pytest.approx(1.0, abs=1e-5)}
    assert [o.path for o in report.failed] == ["output[1]"]
    assert check(right, right, (x(),), expect=expect).passed


def test_each_callable_runs_once_on_its_own_copy_of_the_inputs() -> None:
    calls: list[str] = []

    def mutating(a: torch.Tensor, cache: torch.Tensor) -> torch.Tensor:
        calls.append("candidate")
        cache.add_(100.0)  # an in-place write the reference must not see
        return a + 1

    def reference(a: torch.Tensor, cache: torch.Tensor) -> torch.Tensor:
        calls.append("reference")
        assert float(cache.sum()) == 0.0
        return a + 1

    a, cache = x(), torch.zeros(2)
    report = check(mutating, reference, (a, cache), expect={"output": [equal()]})
    assert report.passed
    assert calls == ["candidate", "reference"]
    assert float(cache.sum()) == 0.0 and torch.equal(a, x())


def test_any_callable_works() -> None:
    class Twin:
        def __init__(self, scale: float) -> None:
            self.scale = scale

        def forward(self, a: torch.Tensor) -> torch.Tensor:
            return a * self.scale

    linear = torch.nn.Linear(4, 4)
    expect = {"output": [rel_l2(max=1e-6), cosine(min=0.999999)]}
    assert check(Twin(2.0).forward, double, (x(),), expect=expect).passed  # bound method
    assert check(torch.sigmoid, lambda a: 1 / (1 + torch.exp(-a)), (x(),), expect=expect).passed  # builtin
    assert check(linear, lambda a: a @ linear.weight.T + linear.bias, (x(),), expect=expect).passed  # module
    assert check(functools.partial(torch.mul, other=2.0), double, (x(),), expect=expect).passed  # partial


def test_neither_reference_nor_expect_has_a_default() -> None:
    parameters = inspect.signature(check).parameters
    assert parameters["reference"].default is inspect.Parameter.empty
    assert parameters["expect"].default is inspect.Parameter.empty
    assert parameters["expect"].kind is inspect.Parameter.KEYWORD_ONLY
    with pytest.raises(TypeError, match="expect"):
        check(double, double, (x(),))  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="reference"):
        check(double, inputs=(x(),), expect={"output": [equal()]})  # type: ignore[call-arg]


# -- without a reference ----------------------------------------------------------------------------------


def test_reference_none_admits_only_one_sided_predicates() -> None:
    report = check(lambda a: (a, a.log()), None, (x(),), expect={"output[0]": [nan_inf()], "output[1]": [nan_inf()]})
    assert [o.ref_norm for o in report.outputs] == [None, None]
    assert report["output[0]"].passed
    assert not report["output[1]"].passed  # log(0) = -inf
    assert report["output[1]"].results[0].values == {"nan": 0.0, "inf": 1.0}


def test_reference_none_refuses_predicates_that_need_one() -> None:
    ran: list[bool] = []

    def candidate(a: torch.Tensor) -> torch.Tensor:
        ran.append(True)
        return a

    with pytest.raises(
        CheckError, match=r"expect\['output'\] asks for rel_l2, which compares against a reference"
    ) as info:
        check(candidate, None, (x(),), expect={"output": [nan_inf(), rel_l2(max=1e-2)]})
    assert "reference is None" in str(info.value) and "nan_inf" in str(info.value)
    assert ran == []  # refused before running anything
    assert isinstance(info.value, ValueError)


# -- refusals: inputs and kinds ---------------------------------------------------------------------------


def test_every_input_leaf_must_be_a_tensor() -> None:
    with pytest.raises(TypeError, match=r"inputs\[1\] is a value of type int; every leaf must be a torch.Tensor"):
        check(double, double, (x(), 3), expect={"output": [equal()]})
    with pytest.raises(TypeError, match=r"inputs\[0\]\[1\]\[0\] is a value of type NoneType"):
        check(double, double, ((x(), (None,)),), expect={"output": [equal()]})
    with pytest.raises(TypeError, match=r"inputs\[0\]\[1\] is a value of type list.*use a tuple, not a list"):
        check(double, double, ((x(), [x()]),), expect={"output": [equal()]})


def test_inputs_must_be_a_tuple_or_a_tensor() -> None:
    with pytest.raises(TypeError, match="inputs must be a tuple of arguments"):
        check(double, double, [x()], expect={"output": [equal()]})


def test_callables_must_be_callable() -> None:
    with pytest.raises(TypeError, match="candidate must be callable"):
        check(x(), double, (x(),), expect={"output": [equal()]})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="reference must be callable or None"):
        check(double, "reference", (x(),), expect={"output": [equal()]})  # type: ignore[arg-type]


def test_expect_must_map_paths_to_sequences_of_predicate_instances() -> None:
    with pytest.raises(TypeError, match="expect must map each output path"):
        check(double, double, (x(),), expect=[("output", [equal()])])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"expect\['output'\] is a single predicate; wrap it in a list"):
        check(double, double, (x(),), expect={"output": equal()})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match=r"lists the class rel_l2; pass an instance.*rel_l2\(max=\.\.\.\)"):
        check(double, double, (x(),), expect={"output": [rel_l2]})  # type: ignore[list-item]
    with pytest.raises(TypeError, match="parse_predicate"):
        check(double, double, (x(),), expect={"output": ["rel_l2:max=1"]})  # type: ignore[list-item]
    with pytest.raises(TypeError, match="parse_predicate"):
        check(double, double, (x(),), expect={"output": "equal"})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="output paths"):
        check(double, double, (x(),), expect={0: [equal()]})  # type: ignore[dict-item]


def test_result_leaves_must_be_tensors() -> None:
    with pytest.raises(TypeError, match=r"candidate result: output\[1\] is a value of type NoneType"):
        check(lambda a: (a, None), lambda a: (a, a), (x(),), expect={"output[0]": [equal()]})
    with pytest.raises(TypeError, match=r"reference result: output is a value of type list.*use a tuple"):
        check(lambda a: (a,), lambda a: [a], (x(),), expect={"output[0]": [equal()]})


# -- refusals: structure, shape, dtype --------------------------------------------------------------------


def test_structure_must_agree() -> None:
    with pytest.raises(CheckError, match=r"output: .*candidate returns a tensor, reference returns a tuple of 1"):
        check(double, lambda a: (a * 2,), (x(),), expect={"output": [equal()]})
    with pytest.raises(
        CheckError, match=r"output\[1\]: .*candidate returns a tuple of 2, reference returns a tuple of 1"
    ):
        check(lambda a: (a, (a, a)), lambda a: (a, (a,)), (x(),), expect={"output[0]": [equal()]})
    # an empty tuple flattens to nothing, yet it is a different structure
    with pytest.raises(CheckError, match=r"output: .*candidate returns a tuple of 2, reference returns a tuple of 1"):
        check(lambda a: (a, ()), lambda a: (a,), (x(),), expect={"output[0]": [equal()]})


def test_shape_must_agree() -> None:
    with pytest.raises(CheckError, match=r"output\[1\]: shape differs: candidate \(3, 1\), reference \(3,\)"):
        check(
            lambda a: (a, a.sum(-1, keepdim=True)),
            lambda a: (a, a.sum(-1)),
            (x(),),
            expect={"output[0]": [equal()], "output[1]": [equal()]},
        )


def test_dtype_must_agree() -> None:
    with pytest.raises(CheckError, match=r"output: dtype differs: candidate bf16, reference f32"):
        check(lambda a: a.bfloat16(), lambda a: a, (x(),), expect={"output": [rel_l2(max=1e-2)]})


# -- refusals: expect against what was produced ----------------------------------------------------------


def test_every_output_needs_predicates() -> None:
    with pytest.raises(CheckError, match=r"output\[1\] has no predicates.*expect\['output\[1\]'\] = \["):
        check(lambda a: (a, a), lambda a: (a, a), (x(),), expect={"output[0]": [equal()]})


def test_an_empty_predicate_list_is_refused() -> None:
    with pytest.raises(CheckError, match=r"expect\['output'\] is empty; every output needs at least one"):
        check(double, double, (x(),), expect={"output": []})


def test_a_path_that_was_not_produced_is_refused() -> None:
    with pytest.raises(CheckError, match=r"expect names 'output\[2\]', which the result did not produce") as info:
        check(
            lambda a: (a, a),
            lambda a: (a, a),
            (x(),),
            expect={"output[0]": [equal()], "output[1]": [equal()], "output[2]": [equal()]},
        )
    assert "produced: output[0], output[1]" in str(info.value)
    with pytest.raises(CheckError, match="expect names 'output'"):
        check(lambda a: (a,), lambda a: (a,), (x(),), expect={"output": [equal()], "output[0]": [equal()]})


def test_a_result_that_flattens_to_nothing_is_an_error() -> None:
    with pytest.raises(CheckError, match="the candidate result holds no tensor"):
        check(lambda a: (), lambda a: (), (x(),), expect={})
    with pytest.raises(CheckError, match="the candidate result holds no tensor"):
        check(lambda a: ((), ((),)), None, (x(),), expect={"output": [nan_inf()]})


# -- refusals: discrete outputs ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool])
def test_continuous_predicates_are_refused_on_discrete_outputs(dtype: torch.dtype) -> None:
    def f(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return a, (a > 0.5).to(dtype)

    for predicate in (rel_l2(max=1e-2), allclose(atol=0.0, rtol=0.0), ulp(max=0), cosine(min=0.9)):
        with pytest.raises(CheckError, match=rf"output\[1\] \({'bool' if dtype == torch.bool else 'i'}") as info:
            check(f, f, (x(),), expect={"output[0]": [equal()], "output[1]": [predicate]})
        assert f"{predicate.name} measures a continuous distance" in str(info.value)
        assert "compare it exactly with equal() instead" in str(info.value)
    report = check(f, f, (x(),), expect={"output[0]": [ulp(max=0)], "output[1]": [equal(), nan_inf()]})
    assert report.passed and report["output[1]"].results[0].values == {"mismatches": 0.0}


def test_complex_outputs_refuse_continuous_predicates() -> None:
    def f(a: torch.Tensor) -> torch.Tensor:
        return torch.complex(a, a)

    with pytest.raises(CheckError, match="view_as_real"):
        check(f, f, (x(),), expect={"output": [rel_l2(max=1e-2)]})
    assert check(f, f, (x(),), expect={"output": [equal(), nan_inf()]}).passed


# -- notes through check ----------------------------------------------------------------------------------


def test_zero_reference_notes_reach_the_report() -> None:
    report = check(
        lambda a: a * 0 + 1e-9,
        lambda a: a * 0,
        (x(),),
        expect={"output": [rel_l2(max=1e-6), cosine(min=0.9)]},
    )
    out = report.outputs[0]
    assert out.ref_norm == 0.0
    rel, cos = out.results
    assert "abs_l2" in rel.values and rel.passed and rel.note and "reference is all zeros" in rel.note
    assert cos.values["ref_l2"] == 0.0 and not cos.passed and cos.note
    assert not report.passed


def test_ref_norm_ignores_non_finite_reference_elements() -> None:
    ref = torch.tensor([3.0, float("inf"), 4.0, float("nan")])
    report = check(lambda: ref.clone(), lambda: ref.clone(), (), expect={"output": [equal(equal_nan=True)]})
    assert report.outputs[0].ref_norm == 5.0
    assert report.passed  # NaN == NaN in place under equal_nan, inf == inf


def test_input_copies_keep_namedtuples_and_aliasing() -> None:
    from typing import NamedTuple

    class Pair(NamedTuple):
        left: torch.Tensor
        right: torch.Tensor

    seen: list[bool] = []

    def f(pair: Pair, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        seen.append(isinstance(pair, Pair) and a is b and a is not shared)
        return pair.left - pair.right + a

    shared = x()
    report = check(f, f, (Pair(x(), x() * 2), shared, shared), expect={"output": [equal()]})
    assert report.passed
    assert seen == [True, True]

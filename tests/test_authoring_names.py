"""Names model sources import, where they import them (issue 11), and ReduceKind's one canonical HIR."""

from __future__ import annotations

import pytest
import torch

import tilefoundry
from tilefoundry import func
from tilefoundry.dsl import DimVar, Tensor, tf
from tilefoundry.ir.core.errors import IRTypeError


def test_runtime_exports_resources_check_and_predicates() -> None:
    from tilefoundry.runtime import (
        PREDICATES,
        Absolute,
        DictResource,
        Preprocessed,
        RuntimeResource,
        SafetensorsResource,
        check,
    )
    from tilefoundry.runtime import check as check_fn
    from tilefoundry.runtime.check import check as inner_check
    from tilefoundry.runtime.resource import Absolute as A2
    from tilefoundry.runtime.resource import Preprocessed as P2

    assert check is check_fn is inner_check and callable(check)
    assert Absolute is A2 and Preprocessed is P2
    assert set(PREDICATES) == {"allclose", "rel_l2", "cosine", "equal", "ulp", "max_abs", "max_rel", "nan_inf"}
    assert isinstance(DictResource({}), RuntimeResource)
    assert SafetensorsResource.__name__ == "SafetensorsResource"


@pytest.mark.parametrize("camel,name", [("AllClose", "allclose"), ("RelL2", "rel_l2"), ("Cosine", "cosine"),
                                        ("Equal", "equal"), ("Ulp", "ulp"), ("MaxAbs", "max_abs"),
                                        ("MaxRel", "max_rel"), ("NanInf", "nan_inf")])
def test_camel_case_predicates_are_the_predicate_classes(camel: str, name: str) -> None:
    import importlib

    import tilefoundry.runtime as runtime

    # The package, not the attribute: ``tilefoundry.runtime.check`` is the check function itself.
    check_pkg = importlib.import_module("tilefoundry.runtime.check")
    cls = getattr(runtime, camel)
    assert cls is getattr(check_pkg, camel) is runtime.PREDICATES[name]
    assert cls.name == name


def test_camel_case_predicates_judge_like_the_table_entries() -> None:
    from tilefoundry.runtime import AllClose, MaxAbs, check

    x = torch.tensor([1.0, 2.0])
    report = check(lambda t: t + 1e-3, lambda t: t, (x,), expect={"output": [MaxAbs(max=1e-2), AllClose(atol=0.0,
                                                                                                       rtol=1e-4)]})
    assert [r.passed for r in report.outputs[0].results] == [True, False]


def test_dtype_from_name_and_to_torch_dtype() -> None:
    from tilefoundry import DType
    from tilefoundry.evaluator.value import to_torch_dtype
    from tilefoundry.ir.types import DType as IrDType
    from tilefoundry.ir.types import bf16

    assert DType is IrDType is tilefoundry.ir.types.dtype.DType
    assert DType.from_name("bf16") is bf16 and DType.from_name("bfloat16") is bf16
    assert to_torch_dtype(DType.from_name("bf16")) is torch.bfloat16
    assert to_torch_dtype("f32") is torch.float32 and to_torch_dtype(torch.int64) is torch.int64
    assert [to_torch_dtype(DType.from_name(n)) for n in ("i8", "i32", "i64", "bool", "fp8e4m3")] == [
        torch.int8, torch.int32, torch.int64, torch.bool, torch.float8_e4m3fn]
    with pytest.raises(TypeError, match=r"unknown dtype name 'bf17'; valid names: f32, f16, bf16"):
        DType.from_name("bf17")
    with pytest.raises(TypeError, match=r"DType.from_name takes a dtype name \(str\), got dtype"):
        DType.from_name(torch.bfloat16)
    with pytest.raises(TypeError, match=r"unknown dtype name"):
        to_torch_dtype("float128")


def test_dsl_exports_reduce_kind_and_dim_var_range_pat() -> None:
    from tilefoundry.dsl import DimVarRangePat, ReduceKind
    from tilefoundry.ir.core.dispatch import DimVarRangePat as IrPat

    assert DimVarRangePat is IrPat
    assert [k.name for k in ReduceKind] == ["sum", "mean", "max", "min", "abs_max"]
    assert ReduceKind.abs_max.value == "abs_max" and str(ReduceKind.max) == "max"


SEQ = DimVar("seq", 1, 16)


def _reduce_fn(kind):  # noqa: ANN001, ANN202
    @func
    def f(x: Tensor[(SEQ, 6), "f32"]):
        return tf.reduce(x, axes=(-1,), keepdim=False, kind=kind)

    return f


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "abs_max"])
def test_reduce_kind_member_and_name_trace_to_the_same_hir(name: str) -> None:
    from tilefoundry.dsl import ReduceKind

    by_member, by_name = _reduce_fn(ReduceKind[name]), _reduce_fn(name)
    assert str(by_member.graph) == str(by_name.graph)
    (node,) = by_member.graph.nodes
    assert node.attrs["kind"] == name and type(node.attrs["kind"]) is str
    x = torch.randn(5, 6)
    assert torch.equal(by_member(x), by_name(x))


def test_an_unknown_reduce_kind_is_refused_naming_the_valid_ones() -> None:
    with pytest.raises(IRTypeError, match=r"unknown reduce kind 'median'; valid: sum, mean, max, min, abs_max"):
        _reduce_fn("median")


def test_star_import_gives_the_new_ops() -> None:
    namespace: dict[str, object] = {}
    exec("from tilefoundry.dsl.tf import *", namespace)
    for op in ("softplus", "exp2", "log2", "ceil", "floor", "round", "floor_div", "mod", "minimum", "maximum",
               "logical_and", "logical_or", "logical_not", "index_add", "index_copy", "max", "min", "abs", "pow"):
        assert callable(namespace[op]), op

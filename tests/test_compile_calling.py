"""The calling convention of a CompiledModule (spec 1.2) and the argument checks of its C++ entry.

The refusals are made by calling the tvm-ffi function itself (``compiled.fn``), with every argument
given, so that they can only come from the checks compiled into the library.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests import compile_kernels as K
from tests.dlpack_fake import KDL_BFLOAT, KDL_CPU, KDL_CUDA, fake_tensor
from tilefoundry import func, jit, module
from tilefoundry.dsl import ConstTensor, Tensor, tf
from tilefoundry.runtime import CompiledModule, RuntimeModule

pytestmark = pytest.mark.usefixtures("compile_cache")


@pytest.fixture(scope="module")
def rms() -> CompiledModule:
    return jit(K.rms_norm, target="cpu")


@pytest.fixture(scope="module")
def red() -> CompiledModule:
    return jit(K.reductions, target="cpu")


def _x(rows: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(rows, K.HIDDEN).bfloat16(), torch.randn(K.HIDDEN).bfloat16()


def test_a_compiled_module_is_a_runtime_module_with_the_entry_abi(rms: CompiledModule) -> None:
    assert isinstance(rms, RuntimeModule) and rms.module is None and rms.modules == ()
    abi = rms.type
    assert abi.name == "rms_norm" and abi.output_count == 1 and abi.input_count == 2
    assert [p.name for p in abi.params] == ["x", "weight", "out"]
    out = abi.output_params[0].type
    assert out.shape == (K.ROWS, K.HIDDEN) and out.dtype.name == "bf16"
    assert rms.load(object()) is rms  # nothing to load: weights are ordinary arguments


def test_auto_alloc_takes_shape_dtype_and_device_from_the_abi(rms: CompiledModule, red: CompiledModule) -> None:
    x, w = _x(7)
    y = rms(x, w)
    assert isinstance(y, torch.Tensor) and y.shape == (7, K.HIDDEN) and y.dtype == torch.bfloat16
    assert y.device == x.device
    total, largest, mean = red(torch.randn(4, 9))  # DimVar output extents come from the inputs
    assert total.shape == (4,) and largest.shape == (4, 1) and mean.shape == (4,)
    assert torch.equal(y, rms.forward(x, w))


def test_pre_alloc_writes_and_returns_the_callers_outputs(rms: CompiledModule, red: CompiledModule) -> None:
    x, w = _x(3)
    out = torch.empty(3, K.HIDDEN, dtype=torch.bfloat16)
    assert rms(x, w, out) is out
    assert torch.equal(out, rms(x, w))
    outs = (torch.empty(2), torch.empty(2, 1), torch.empty(2))
    got = red(torch.randn(2, 5), *outs)
    assert isinstance(got, tuple) and all(a is b for a, b in zip(got, outs))


def test_pre_alloc_takes_any_dlpack_tensor(rms: CompiledModule) -> None:
    x = np.random.default_rng(0).standard_normal((4, 33)).astype(np.float32)
    outs = (np.empty(4, np.float32), np.empty((4, 1), np.float32), np.empty(4, np.float32))
    jit(K.reductions, target="cpu")(x, *outs)
    np.testing.assert_allclose(outs[0], x.sum(-1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(outs[1][:, 0], x.max(-1))


def test_a_partial_set_of_outputs_is_a_type_error(red: CompiledModule) -> None:
    with pytest.raises(TypeError, match=r"1 of 3 outputs given \(out0\).*out1, out2 missing"):
        red(torch.randn(2, 5), torch.empty(2))
    with pytest.raises(TypeError, match=r"2 of 3 outputs"):
        red(torch.randn(2, 5), torch.empty(2), torch.empty(2, 1))


def test_a_wrong_argument_count_is_a_type_error(rms: CompiledModule) -> None:
    with pytest.raises(TypeError, match=r"takes its 2 inputs \(x, weight\).*got 1"):
        rms(torch.randn(2, K.HIDDEN).bfloat16())
    with pytest.raises(TypeError, match="got 4"):
        rms(*_x(), torch.empty(0), torch.empty(0))


def test_auto_alloc_is_torch_only(rms: CompiledModule) -> None:
    x, w = _x()
    with pytest.raises(TypeError, match=r"input x is a ndarray.*torch-only.*pass the outputs too \(out\)"):
        rms(x.float().numpy(), w)


def test_none_for_an_input_or_an_output_is_a_type_error_naming_it(rms: CompiledModule,
                                                                   red: CompiledModule) -> None:
    x, w = _x()
    with pytest.raises(TypeError, match=r"rms_norm: output out is None; pass a tensor for every output, or none"):
        rms(x, w, None)
    with pytest.raises(TypeError, match=r"rms_norm: input weight is None; pass a tensor"):
        rms(x, None)
    with pytest.raises(TypeError, match=r"reductions: output out1 is None.*\(out0, out1, out2\)"):
        red(torch.randn(2, 5), torch.empty(2), None, torch.empty(2))


@pytest.mark.parametrize("value", [3, 2.5, [[1.0, 2.0]], "x"])
def test_a_value_that_is_no_tensor_is_a_type_error_naming_the_parameter(rms: CompiledModule, value) -> None:
    x, w = _x()
    out = torch.full_like(x, float("nan"))
    kind = type(value).__name__
    with pytest.raises(TypeError, match=rf"rms_norm: input x is not a tensor but {kind} .*declared Tensor\[.*pass a "
                                        r"tensor \(a torch.Tensor, or any DLPack tensor\)"):
        rms(value, w, out)
    with pytest.raises(TypeError, match=rf"rms_norm: output out is not a tensor but {kind} "):
        rms(x, w, value)
    assert out.isnan().all()  # nothing ran



def test_arguments_may_be_passed_by_their_parameters_names(rms: CompiledModule, red: CompiledModule) -> None:
    """As torch users call a module: after the positional arguments, by name, outputs too."""
    x, w = _x(4)
    want = rms(x, w)
    assert torch.equal(rms(x, weight=w), want) and torch.equal(rms(x=x, weight=w), want)
    out = torch.empty_like(want)
    assert rms(x=x, weight=w, out=out) is out and torch.equal(out, want)
    outs = (torch.empty(2), torch.empty(2, 1), torch.empty(2))
    got = red(torch.randn(2, 5), out0=outs[0], out1=outs[1], out2=outs[2])
    assert all(a is b for a, b in zip(got, outs))


def test_a_name_unknown_given_twice_or_after_a_gap_is_a_type_error_naming_it(rms: CompiledModule,
                                                                             red: CompiledModule) -> None:
    x, w = _x()
    out = torch.full_like(x, float("nan"))
    with pytest.raises(TypeError, match=r"rms_norm has no parameter 'bias'; its inputs: x, weight, its outputs: out"):
        rms(x, w, bias=w)
    with pytest.raises(TypeError, match=r"rms_norm: x is given twice, by position and by name"):
        rms(x, x=x)
    with pytest.raises(TypeError, match=r"rms_norm: out given by name while weight is not"):
        rms(x, out=out)
    with pytest.raises(TypeError, match=r"1 of 3 outputs given \(out0\)"):
        red(torch.randn(2, 5), out0=torch.empty(2))
    assert out.isnan().all()  # nothing ran


def test_a_meta_or_sparse_tensor_is_refused_naming_the_parameter(rms: CompiledModule) -> None:
    x, w = _x()
    with pytest.raises(ValueError, match=r"rms_norm: input x is a tensor on the meta device \(it holds no data\)"):
        rms(torch.empty(5, K.HIDDEN, dtype=torch.bfloat16, device="meta"), w)
    with pytest.raises(ValueError, match=r"rms_norm: input weight is a tensor of layout torch.sparse_coo"):
        rms(x, w.float().to_sparse())


@module(entry="scaled_norm", target="cpu")
class TwoKernels:
    @func
    def scale(x: Tensor[(K.ROWS, 8), "f32"]):
        return x * 2.0

    @func
    def scaled_norm(x: Tensor[(K.ROWS, 8), "f32"], w: ConstTensor[(8,), "f32"]):
        return tf.rms_norm(scale(x), w, 1e-6)  # noqa: F821 - a sibling @func, resolved by tracing


def test_every_function_of_a_module_is_callable_by_name() -> None:
    compiled = jit(TwoKernels, target="cpu")
    assert set(compiled.functions) == {"scale", "scaled_norm"} and compiled.functions["scaled_norm"] is compiled
    x, w = torch.randn(3, 8), torch.rand(8) + 0.5
    torch.testing.assert_close(compiled.scale(x), x * 2.0, rtol=0, atol=0)
    out = torch.full((3, 8), float("nan"))
    assert compiled.scale(x, out) is out and torch.equal(out, x * 2.0)
    torch.testing.assert_close(compiled(x, w), torch.nn.functional.rms_norm(x * 2.0, (8,), w, 1e-6),
                               rtol=1e-5, atol=1e-6)
    assert compiled.scale.functions["scaled_norm"] is compiled  # each reaches the others
    with pytest.raises(AttributeError, match=r"no attribute or function 'nope'; its functions: scale, scaled_norm"):
        compiled.nope  # noqa: B018


# -- checks in the C++ entry, called directly --------------------------------------------------------------

def _call(c: CompiledModule, *args: object) -> None:
    c.fn(*args)


def test_entry_refuses_a_wrong_dtype_naming_the_parameter(rms: CompiledModule) -> None:
    x, w = _x()
    out = torch.empty(5, K.HIDDEN, dtype=torch.bfloat16)
    declared = r"declared Tensor\[\(rows, 96\), bf16\]"
    with pytest.raises(TypeError, match=r"rms_norm: argument x has dtype float32, " + declared):
        _call(rms, x.float(), w, out)
    with pytest.raises(TypeError, match="argument out has dtype float16"):
        _call(rms, x, w, out.half())


def test_entry_refuses_a_wrong_rank_and_a_wrong_extent(rms: CompiledModule) -> None:
    x, w = _x()
    out = torch.empty(5, K.HIDDEN, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match=r"argument weight has rank 2 \(shape \(1, 96\)\), declared"):
        _call(rms, x, w[None], out)
    with pytest.raises(ValueError, match=r"argument weight has shape \(95,\), declared .*axis 0: 95 != 96"):
        _call(rms, x, w[:95].contiguous(), out)
    with pytest.raises(ValueError, match=r"argument x has shape \(5, 97\)"):
        _call(rms, torch.zeros(5, 97, dtype=torch.bfloat16), w, out)


def test_entry_refuses_a_dimvar_out_of_range_or_disagreeing(rms: CompiledModule, red: CompiledModule) -> None:
    with pytest.raises(ValueError, match=r"argument x .*DimVar cols = 5000 is outside its range \[0, 4096\)"):
        _call(red, torch.zeros(2, 5000), torch.empty(2), torch.empty(2, 1), torch.empty(2))
    x, w = _x(5)
    with pytest.raises(ValueError, match=r"argument out .* axis 0 is 4, but rows = 5 from argument x"):
        _call(rms, x, w, torch.empty(4, K.HIDDEN, dtype=torch.bfloat16))


def test_entry_refuses_a_non_contiguous_tensor(rms: CompiledModule) -> None:
    x = torch.randn(K.HIDDEN, 5).bfloat16().t()
    w = torch.randn(K.HIDDEN).bfloat16()
    with pytest.raises(ValueError, match=r"argument x is not contiguous .*strides \(1, 5\).*\.contiguous\(\)"):
        _call(rms, x, w, torch.empty(5, K.HIDDEN, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="argument weight is not contiguous"):
        _call(rms, x.contiguous(), torch.randn(2 * K.HIDDEN).bfloat16()[::2], torch.empty(5, K.HIDDEN,
                                                                                          dtype=torch.bfloat16))


def test_entry_refuses_a_tensor_on_another_device_or_device_index() -> None:
    swiglu = jit(K.swiglu, target="cpu")
    g = torch.randn(2, K.FFN).bfloat16()
    on_gpu = fake_tensor((2, K.FFN), KDL_BFLOAT, 16, KDL_CUDA, 0)
    with pytest.raises(ValueError, match=r"swiglu: argument gate is on cuda:0, but this entry was compiled for the "
                                         r"cpu; move it there"):
        _call(swiglu, on_gpu, g, torch.empty_like(g))
    other_cpu = fake_tensor((2, K.FFN), KDL_BFLOAT, 16, KDL_CPU, 1)
    with pytest.raises(ValueError, match=r"argument up is on cpu:1 but gate is on cpu; put every tensor on one "
                                         r"device"):
        _call(swiglu, g, other_cpu, torch.empty_like(g))


def test_entry_refuses_an_output_sharing_memory_with_an_input(rms: CompiledModule) -> None:
    x, w = _x()
    with pytest.raises(ValueError, match="output out shares memory with input x"):
        _call(rms, x, w, x)
    with pytest.raises(ValueError, match="output out shares memory with input x"):
        rms(x, w, x)


def test_forward_surfaces_the_entrys_refusals(rms: CompiledModule) -> None:
    x, w = _x()
    with pytest.raises(TypeError, match="argument x has dtype float32"):
        rms(x.float(), w)  # auto-alloc: the outputs are made, then the entry refuses the input
    with pytest.raises(TypeError, match="argument x has rank 3"):
        rms(x[None], w)

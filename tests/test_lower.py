"""lower(): HIR to printable TIR with its schedule, refusals naming the op, function and line; the generated
C++ (one include, named buffers, one call per op with its source line, literals in the operand's type);
what jit / compile / build accept. Nothing here runs a compiler except where a library is loaded."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import tilefoundry
from tests import compile_kernels as K
from tilefoundry import CompilerOptions, build, func, jit, lower, module
from tilefoundry.codegen import generate
from tilefoundry.codegen.toolchain import toolchain
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, Topology, tf
from tilefoundry.lower import LoweringError
from tilefoundry.runtime import CompiledModule
from tilefoundry.target import CpuTarget, CudaTarget
from tilefoundry.tir import OpCall, PrimFunc, RowLoop

ROWS = DimVar("rows", 1, 1 << 16)


def _calls(fn: PrimFunc) -> list[OpCall]:
    out = []

    def walk(body: list) -> None:
        for s in body:
            if isinstance(s, OpCall):
                out.append(s)
            elif hasattr(s, "body"):
                walk(s.body)

    walk(fn.body)
    return out


def test_public_surface() -> None:
    for name in ("func", "module", "jit", "build", "compile", "lower", "CompilerOptions"):
        assert name in tilefoundry.__all__ and callable(getattr(tilefoundry, name))
    assert tilefoundry.runtime.CompiledModule is CompiledModule
    assert callable(jit.cache_clear) and callable(jit.cache_info)


def test_lowering_prints_one_prim_function_with_its_schedule() -> None:
    tir = lower(K.rms_norm, "cpu")
    assert list(tir.functions) == ["rms_norm"] and tir.entry == "rms_norm" and tir.target == CpuTarget()
    fn = tir.functions["rms_norm"]
    assert [p.name for p in fn.params] == ["x", "weight", "out"] and fn.output_count == 1
    s = fn.schedule
    assert (s.placement, s.threads_per_cta, s.vector_width) == ("rows", 1, 1)
    assert s.rows == K.ROWS and s.rows_per_cta == 64  # the most rows a CPU CTA takes to amortise its loop
    text = str(tir)
    assert "prim_func rms_norm(x: Tensor[(rows, 96), bf16], weight: Tensor[(96,), bf16]) -> (out:" in text
    assert "dimvar rows in [0, 1048576) from x.shape[0]" in text
    assert "schedule placement=rows grid=(rows + 63)//(64) threads_per_cta=1" in text
    assert "for row in rows of this cta:" in text
    assert "reduce<mean_op, axes=(0, 1, 2)>(rms_norm_square)  # rms_norm/reduce @ compile_kernels.py:" in text
    families = [c.family for c in _calls(fn)]
    assert families.count("reduce") == 1 and "unary" in families and "binary" in families


def test_the_weight_cast_is_hoisted_out_of_the_row_loop() -> None:
    @func
    def scaled(x: Tensor[(ROWS, 8), "f32"], weight: ConstTensor[(8,), "bf16"]):
        return x * tf.cast(weight, "f32")

    fn = lower(scaled, "cpu").functions["scaled"]
    (scope,) = fn.body
    before_loop = [s for s in scope.body if isinstance(s, OpCall)]
    assert [c.operands[0].name for c in before_loop] == ["weight"]
    assert any(isinstance(s, RowLoop) for s in scope.body)


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_softmax_divides_once_per_row_and_multiplies_each_element(target: str) -> None:
    softmax = K.row_kernels(2048)[2]
    calls = _calls(lower(softmax, target).functions[softmax.name])
    divs = [c for c in calls if c.tag is not None and c.tag.name == "div_op"]
    assert len(divs) == 1 and divs[0].out.shape == (1,)  # the reciprocal of the row's sum: one element a row
    (scale,) = [c for c in calls if divs[0].out in c.operands]
    assert scale.tag.name == "mul_op" and scale.out.name == "softmax_probs" and scale.out.shape == (2048,)


def test_a_cuda_schedule_spreads_a_row_over_threads_in_vectors() -> None:
    fn = lower(K.rms_norm, CudaTarget()).functions["rms_norm"]
    s = fn.schedule
    assert s.vector_width == 8 and s.threads_per_cta * s.vector_width <= K.HIDDEN
    assert K.HIDDEN % (s.threads_per_cta * s.vector_width) == 0 and s.rows_per_cta == 1


def _refused_kernel(which: str) -> object:
    @func
    def kernel(x: Tensor[(4, 16), "f32"]):
        y = tf.cast(x, "f8e8m0") if which == "cast" else None
        return y

    return kernel


@pytest.mark.parametrize("op, why", [
    ("cast", r"dtype f8e8m0 is not compiled yet \(compiled: bf16, bool, f16, f32, fp8e4m3, fp8e5m2, i32, i64, i8\)"),
])
def test_an_op_that_cannot_be_compiled_is_refused_naming_it(op: str, why: str) -> None:
    kernel = _refused_kernel(op)
    with pytest.raises(LoweringError, match=rf"^cannot compile {op} in kernel: .*{why}") as info:
        lower(kernel, "cpu")
    assert info.value.op == op and info.value.function == "kernel"
    assert info.value.loc.text.startswith(f"y = tf.{op}(")
    assert f"test_lower.py:{info.value.loc.lineno}: `y = tf.{op}(" in str(info.value)
    assert isinstance(info.value, NotImplementedError)
    with pytest.raises(LoweringError):
        jit(kernel, target="cpu")


def test_integer_division_and_a_dimvar_only_in_an_expression_are_refused() -> None:
    @func
    def idiv(x: Tensor[(4, 16), "i32"]):
        return x / 3

    with pytest.raises(LoweringError, match="div on i32 is not compiled"):
        lower(idiv, "cpu")

    n = DimVar("n", 1, 64)

    @func
    def doubled(x: Tensor[(2 * n,), "f32"]):
        return x + 1.0

    with pytest.raises(LoweringError, match="DimVar n .* is not the whole extent of any input axis"):
        lower(doubled, "cpu")


def test_calls_of_sibling_functions_are_inlined_and_child_modules_refused() -> None:
    @module(entry="outer")
    class Helpers:
        @func
        def square_plus(x: Tensor[(ROWS, 8), "f32"]):
            return x * x + 1.0

        @func
        def outer(x: Tensor[(ROWS, 8), "f32"]):
            return square_plus(x) * 2.0  # noqa: F821 - a sibling @func

    fn = lower(Helpers, "cpu").functions["outer"]
    assert [c.tag.name for c in _calls(fn)] == ["mul_op", "add_op", "mul_op"]

    @module(entry="k")
    class Inner:
        @func
        def k(x: Tensor[(4, 8), "f32"], w: ConstTensor[(8,), "f32"]):
            return x * w

    @module(entry="top")
    class Outer:
        inner = Inner

        @func
        def top(x: Tensor[(4, 8), "f32"]):
            return inner(x)  # noqa: F821 - the child's entry

    with pytest.raises(LoweringError, match="calls child Module 'inner'.*jit the child's function itself"):
        lower(Outer, "cpu")


def test_a_thread_topology_above_one_is_refused_on_the_cpu() -> None:
    @func(topologies=(Topology("thread", 128),))
    def wide(x: Tensor[(ROWS, 256), "f32"]):
        return tf.exp(x)

    with pytest.raises(LoweringError, match=r"Topology\('thread', 128\).*one host thread"):
        lower(wide, "cpu")
    assert lower(wide, "cuda").functions["wide"].schedule.threads_per_cta == 128


def test_jit_takes_ir_only_and_the_target_a_module_declares() -> None:
    def plain(x):  # noqa: ANN001, ANN202
        return x

    with pytest.raises(TypeError, match="plain is a plain Python callable: decorate it with @func first"):
        jit(plain, target="cpu")
    with pytest.raises(TypeError, match="takes a @func Function or a @module Module, got int"):
        jit(3, target="cpu")

    @func(target="cuda")
    def on_gpu(x: Tensor[(4,), "f32"]):
        return x + 1.0

    with pytest.raises(ValueError, match=r"Module 'on_gpu' declares target cuda:nvidia.h200_sxm:sm_90a \(cuda\), but "
                                         r"target cpu \(cpu\) was asked"):
        jit(on_gpu, target="cpu")
    with pytest.raises(ValueError, match="unknown target 'tpu'"):
        jit(K.swiglu, target="tpu")
    with pytest.raises(TypeError, match="options must be a CompilerOptions"):
        jit(K.swiglu, target="cpu", options={"opt_level": 2})


def test_build_wants_an_entry() -> None:
    @module
    class NoEntry:
        @func
        def f(x: Tensor[(4,), "f32"]):
            return x

    with pytest.raises(ValueError, match="has no entry function"):
        build(NoEntry, target="cpu")


# -- the generated source ------------------------------------------------------------------------------------

def test_the_translation_unit_includes_only_the_runtime_header() -> None:
    src = generate(lower(K.rms_norm, "cpu")).source
    assert re.findall(r"^#include .*$", src, re.M) == ["#include <tilefoundry/runtime.h>"]
    assert "TILEFOUNDRY_STATIC_PROGRAM_SHAPE(thread, 1);" in src
    assert "TVM_FFI_DLL_EXPORT_TYPED_FUNC(rms_norm, rms_norm_entry);" in src
    assert "cpu::launch(static_cast<int>(grid), [&] { rms_norm_kernel(" in src


def test_the_source_reads_like_code_a_person_writes() -> None:
    src = generate(lower(K.softmax_written_out, "cpu")).source
    kernel = src[src.index("void softmax_written_out_kernel"):src.index("void softmax_written_out_entry")]
    statements = [line.strip() for line in kernel.splitlines() if line.strip().startswith("ops::")]
    # a runtime call per HIR op (cast, max, sub, exp, sum, div, cast), a unary op reading only the float result of
    # the elementwise call before it, and a reduction of that result, run inside that call on the CPU
    # (codegen/cpu/chains.py): three passes over the row
    assert statements == [
        "ops::unary(ops::cast_op{}, x, xf, ops::fold<ops::max_op, cute::seq<0, 1, 2>>(reduce));",
        "ops::binary(ops::then(ops::sub_op{}, ops::exp_op{}), xf, reduce, e, "
        "ops::fold<ops::sum_op, cute::seq<0, 1, 2>>(reduce_1));",
        "ops::binary(ops::then(ops::div_op{}, ops::cast_op{}), e, reduce_1, out);"]
    cuda = generate(lower(K.softmax_written_out, "cuda:sm_90a")).source
    assert sum(line.strip().startswith("ops::") for line in cuda.splitlines()) == 7  # on CUDA one call an op
    assert "// compile_kernels.py:62: e = tf.exp(xf - tf.reduce(xf, axes=(-1,), kind=\"max\"))" in kernel
    # named after the source; on the CPU a result written over an operand no later op reads views its storage
    assert "auto e = tilefoundry::make_tensor(xf.data(), rmem_layout);" in kernel


def test_on_the_cpu_a_result_reuses_a_dying_operands_registers_and_on_cuda_does_not() -> None:
    """The row's working set: a softmax of 4096 floats keeps one row buffer on the CPU (16 KiB, in L1), not four."""
    for target, allocated in (("cpu", ["xf", "reduce", "reduce_1"]), ("cuda", ["xf", "reduce", "sub", "e", "reduce_1",
                                                                             "p"])):
        fn = lower(K.softmax_written_out, target).functions["softmax_written_out"]
        allocs = _register_allocations(fn.body)
        assert allocs == allocated, (target, allocs)


def _register_allocations(body: list) -> list[str]:
    out = []
    for s in body:
        if type(s).__name__ == "Alloc" and s.buffer.storage.name == "rmem":
            out.append(s.buffer.name)
        out += _register_allocations(getattr(s, "body", []))
    return out


def test_literals_take_the_operands_type() -> None:
    @func
    def scaled(x: Tensor[(ROWS, 8), "f32"], y: Tensor[(ROWS, 8), "bf16"], n: Tensor[(ROWS, 8), "i32"]):
        return x * 0.1, y * 3.0, n + 7, tf.clamp(y, -2.5, None)

    src = generate(lower(scaled, "cpu")).source
    assert "ops::binary(ops::mul_op{}, x, 0.1f, out0);" in src
    assert "ops::binary(ops::mul_op{}, y, cute::bfloat16_t(3.0f), out1);" in src
    assert "ops::binary(ops::add_op{}, n, int32_t(7), out2);" in src
    assert "ops::clamp_op<float>{-2.5f, INFINITY}" in src
    kernel = src[src.index("void scaled_kernel"):src.index("void scaled_entry")]
    kernel = "\n".join(line for line in kernel.splitlines() if not line.strip().startswith("//"))
    assert not re.search(r"(?<![\w.])\d+\.\d+(?:e[+-]?\d+)?(?![\w.])", kernel)  # no double literal anywhere


def test_a_bf16_literal_is_the_bf16_number_torch_makes() -> None:
    @func
    def third(x: Tensor[(ROWS, 8), "bf16"]):
        return x * 0.3333333333

    src = generate(lower(third, "cpu")).source
    (text,) = re.findall(r"cute::bfloat16_t\(([-0-9.e]+)f\)", src)
    assert float(np.float32(text)) == torch.tensor(0.3333333333, dtype=torch.bfloat16).item() == 0.333984375


@pytest.mark.usefixtures("default_opt_level")
def test_compiler_options_are_checked() -> None:
    with pytest.raises(ValueError, match="opt_level must be 0, 1, 2 or 3"):
        CompilerOptions(opt_level=5)
    with pytest.raises(TypeError, match="extra_flags must be a tuple of strings"):
        CompilerOptions(extra_flags="-g")
    assert "opt_level=3" in CompilerOptions().canonical_text()


def test_the_default_level_comes_from_the_environment_and_reaches_both_compilers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """$TILEFOUNDRY_OPT_LEVEL is the level of options that name none (make test builds at 2); a level named wins;
    on CUDA the level is nvcc's host compiler's and ptxas' both."""
    monkeypatch.setenv("TILEFOUNDRY_OPT_LEVEL", "1")
    assert CompilerOptions().opt_level == 1 and CompilerOptions(opt_level=3).opt_level == 3
    assert CompilerOptions() != CompilerOptions(opt_level=3)  # another key: a library of one level is not the other's
    flags = toolchain(CudaTarget(), CompilerOptions()).flags
    assert "-O1" in flags and "-Xptxas=-O1" in flags
    assert "-O1" in toolchain(CpuTarget(), CompilerOptions()).flags
    for bad in ("4", "fast", "-O2"):
        monkeypatch.setenv("TILEFOUNDRY_OPT_LEVEL", bad)
        with pytest.raises(ValueError, match=r"\$TILEFOUNDRY_OPT_LEVEL must be 0, 1, 2 or 3, got '.*'; unset it"):
            CompilerOptions()
    monkeypatch.setenv("TILEFOUNDRY_OPT_LEVEL", "")
    assert CompilerOptions().opt_level == 3


def test_a_dispatching_function_compiles_to_one_entry_and_each_variant_alone_too(compile_cache: object) -> None:
    from tilefoundry.ir.core.dispatch import DimVarRangePat

    seq = DimVar("seq", 1, 64)

    @func
    def attend(x: Tensor[(seq, 8), "f32"]):
        pass

    @attend.specialize(DimVarRangePat(seq, 1, 2))
    def decode(x):  # noqa: ANN001, ANN202
        return x * 2.0

    @attend.specialize(DimVarRangePat(seq, 2, 64))
    def prefill(x):  # noqa: ANN001, ANN202
        return x * 3.0

    from tilefoundry.lower import lower_function
    from tilefoundry.lower.schedule import Declared

    with pytest.raises(LoweringError, match=r"cannot compile dispatch in attend: it dispatches to its variants decode "
                                            r"\(seq in \[1, 2\)\), prefill \(seq in \[2, 64\)\) by the extent of a "
                                            r"DimVar: lower_function lowers one body; lower\(\) and jit\(\)"):
        lower_function(attend, CpuTarget(), Declared())
    from tilefoundry.runtime.jit import jit_key

    assert jit_key(attend, target="cpu") != jit_key(attend.variants[1], target="cpu")
    x = torch.randn(5, 8)
    assert torch.equal(jit(attend.variants[1], target="cpu")(x), x * 3.0)
    both = jit(attend, target="cpu")
    assert torch.equal(both(x), x * 3.0) and torch.equal(both(x[:1]), x[:1] * 2.0)

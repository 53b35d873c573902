"""The compile path's CUDA target on the GPU: every acceptance kernel and bench row kernel, jitted for CUDA,
against the evaluator with ``check``; the host entry's device refusals; the caller's stream honoured.

The kernels are those of tests/generated/cuda_acceptance.cu (tests/cuda_unit.py), and the first test checks
that the sources jit built here make exactly that unit (its recorded digest). Their nvcc builds run in
parallel into the disk cache first (``$TILEFOUNDRY_CACHE``, which run.sh points at its build folder, so that
bench/kernels.py reuses them); every ``jit`` call after that loads. It must be the compiled code that
answers: outputs are handed in filled with NaN (or -7) and must all be overwritten, and every evaluator
handler raises while the compiled call runs. Row counts are DimVars: one build serves none, one, counts that
are multiples of nothing and thousands of rows; ``reductions`` and ``softmax_any_width`` also take their
row length at launch, empty rows included.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root, for tests.*

from tests import compile_kernels as K  # noqa: E402
from tests import cuda_unit  # noqa: E402
from tests.compile_kernels import (  # noqa: E402
    compiled_only,
    evaluator_refuses,
    expectations,
    inputs_for,
    poisoned_like,
)

from tilefoundry import jit  # noqa: E402
from tilefoundry.runtime import CompiledModule  # noqa: E402
from tilefoundry.runtime.check import allclose, check, equal  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

KERNELS = (*cuda_unit.kernels(), K.placed_rows)
ROW_COUNTS = (0, 1, 7, 13, 130)
BIG_ROW_COUNTS = (1, 13, 4096)


@pytest.fixture(scope="module")
def compiled() -> dict[str, CompiledModule]:
    """Every kernel jitted for CUDA; the nvcc builds first run side by side into the disk cache."""
    from tilefoundry.codegen import generate, link
    from tilefoundry.lower import lower
    from tilefoundry.target import CudaTarget

    linkables = [generate(lower(k, CudaTarget())) for k in KERNELS]
    with ThreadPoolExecutor(max_workers=max(1, min(len(linkables), os.cpu_count() or 1))) as pool:
        list(pool.map(link, linkables))
    return {k.name: jit(k) for k in KERNELS}


def test_the_kernels_built_here_make_the_unit_the_cpu_suite_compiles(compiled: dict[str, CompiledModule]) -> None:
    text = cuda_unit.unit_text([(k.name, compiled[k.name].source) for k in cuda_unit.kernels()])
    assert cuda_unit.digest(text) == cuda_unit.recorded_digest(), "the CUDA jit builds here is not the recorded unit"
    assert all(isinstance(c, CompiledModule) and c.library.is_file() for c in compiled.values())


def _rows(kernel: Any) -> tuple[int, ...]:
    return BIG_ROW_COUNTS if kernel.name[-1].isdigit() else ROW_COUNTS


@pytest.mark.parametrize("kernel", [k for k in KERNELS if k is not K.placed_rows], ids=lambda k: k.name)
def test_a_compiled_kernel_matches_the_evaluator_at_every_row_count(compiled: dict[str, CompiledModule],
                                                                    kernel: Any) -> None:
    c = compiled[kernel.name]
    assert jit(kernel) is c  # one build serves every row count
    for rows in _rows(kernel):
        inputs = inputs_for(kernel, rows, "cuda")
        report = check(compiled_only(c), kernel, inputs, expect=expectations(kernel))
        assert report.passed, f"{kernel.name} at {rows} rows:\n{report}"


@pytest.mark.parametrize("cols", [0, 1, 33, 4000])
def test_a_row_length_known_only_at_launch_from_one_build(compiled: dict[str, CompiledModule], cols: int) -> None:
    """A row whose length is a DimVar is padded over a CTA of threads (its length the layouts' bound), each
    folding its part in order before the threads combine: a sum of ``cols`` f32 terms of magnitude about 1 is
    good to at most about ``cols`` ulps of its partial sums, so the bounds grow with the row (sums: 1e-6
    absolute per term; softmax's probabilities: 6e-8 relative per term)."""
    for kernel in (K.reductions, K.softmax_any_width):
        inputs = inputs_for(kernel, 7, "cuda", cols=cols)
        expect = expectations(kernel)
        if cols == 0:  # an empty reduction: each kind's identity (the mean of nothing is NaN, as torch's)
            expect = {path: [equal(equal_nan=True)] for path in expect}
        elif kernel is K.reductions:
            expect = {path: [allclose(atol=max(1e-6, 1e-6 * cols), rtol=1e-5)] for path in expect}
        else:
            expect = {path: [allclose(atol=1e-7, rtol=max(1e-5, 6e-8 * cols))] for path in expect}
        report = check(compiled[kernel.name], kernel, inputs, expect=expect)
        assert report.passed, f"{kernel.name} at {cols} columns:\n{report}"


def test_an_empty_reduction_gives_each_kind_its_identity(compiled: dict[str, CompiledModule]) -> None:
    x = torch.empty(5, 0, device="cuda")
    with evaluator_refuses():
        total, largest, mean = compiled["reductions"](x)
    assert torch.equal(total, torch.zeros(5, device="cuda"))
    assert torch.equal(largest, torch.full((5, 1), float("-inf"), device="cuda"))
    assert torch.isnan(mean).all()


def test_a_placed_kernel_with_shared_memory_and_a_cross_warp_reduction(compiled: dict[str, CompiledModule]) -> None:
    kernel = K.placed_rows
    report = check(compiled_only(compiled[kernel.name]), kernel, inputs_for(kernel, 8, "cuda"),
                   expect=expectations(kernel))
    assert report.passed, str(report)


# -- the host entry: devices, alignment ----------------------------------------------------------------------

def _rms(compiled: dict[str, CompiledModule], rows: int = 4, device: str = "cuda") -> tuple[Any, ...]:
    kernel = K.row_kernels(2048)[0]
    x, w = inputs_for(kernel, rows, device)
    return compiled[kernel.name], kernel, x, w


def test_a_tensor_on_another_device_is_refused_naming_it(compiled: dict[str, CompiledModule]) -> None:
    c, _, x, w = _rms(compiled)
    with pytest.raises(ValueError, match=r"rms_norm_2048: argument weight is on cpu, but this entry was compiled "
                                         r"for the cuda"):
        c(x, w.cpu())
    with pytest.raises(ValueError, match=r"argument out is on cpu"):
        c(x, w, torch.empty(tuple(x.shape), dtype=x.dtype))
    if torch.cuda.device_count() > 1:
        with pytest.raises(ValueError, match=r"argument weight is on cuda:1 but x is on cuda:0; put every tensor on "
                                             r"one device"):
            c(x, w.to("cuda:1"))


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_tensors_on_the_second_device_run_there(compiled: dict[str, CompiledModule]) -> None:
    c, kernel, x, w = _rms(compiled, 64, "cuda:1")
    out = poisoned_like(x)
    with torch.cuda.device(0):  # the caller's current device is another one
        c(x, w, out)
        assert torch.cuda.current_device() == 0
    torch.cuda.synchronize(1)
    assert check(lambda *a: out, kernel, (x, w), expect=expectations(kernel)).passed


def test_a_misaligned_tensor_is_refused_naming_it(compiled: dict[str, CompiledModule]) -> None:
    c, _, x, w = _rms(compiled)
    shifted = torch.empty(x.numel() + 1, dtype=x.dtype, device="cuda")[1:].view(x.shape)
    shifted.copy_(x)
    with pytest.raises(ValueError, match=r"argument x starts at an address that is not a multiple of 16 bytes"):
        c(shifted, w)


# -- streams ---------------------------------------------------------------------------------------------------

SLEEP_CYCLES = 200_000_000  # about 0.1 s of spinning on the stream it is queued on


def _warm(c: CompiledModule, x: torch.Tensor, w: torch.Tensor) -> None:
    """One call outside the measured order: a kernel's first launch may load its module, which may wait."""
    c(x, w)
    torch.cuda.synchronize()


def test_the_kernel_runs_on_the_callers_current_stream(compiled: dict[str, CompiledModule]) -> None:
    """Queued on a side stream behind a long op that writes its input, and read on that stream after it: it
    sees the input and its result is there, although the host went on at once; on any other stream (the null
    stream included, which does not wait for a non-blocking stream) it would have read the NaN input."""
    c, kernel, x, w = _rms(compiled, 4096)
    _warm(c, x, w)
    side = torch.cuda.Stream()
    staged = torch.full_like(x, float("nan"))
    out = torch.full_like(x, float("nan"))
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        start = torch.cuda.Event(enable_timing=True)
        queued = torch.cuda.Event(enable_timing=True)
        after = torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(SLEEP_CYCLES)
        staged.copy_(x)  # the input exists only once the sleep is over
        queued.record()
        c(staged, w, out)
        got = out.clone()  # read on the same stream, after the kernel
        after.record()
    assert not after.query(), "the side stream finished before the host got here: the sleep was too short"
    assert torch.cuda.current_stream() == torch.cuda.default_stream()
    after.synchronize()
    assert start.elapsed_time(queued) > 10.0 and queued.elapsed_time(after) >= 0.0  # ordered on one stream
    assert not got.isnan().any(), "the kernel ran before the op that wrote its input: not on the caller's stream"
    assert check(lambda *a: got, kernel, (x, w), expect=expectations(kernel)).passed


def test_on_the_default_stream_the_kernel_stays_ordered_with_the_callers_work(
        compiled: dict[str, CompiledModule]) -> None:
    """The caller's stream is torch's default (the legacy null stream): the kernel, launched on the per-thread
    default stream instead, still runs after the work queued before it and before the work queued after it."""
    c, kernel, x, w = _rms(compiled, 4096)
    _warm(c, x, w)
    staged = torch.full_like(x, float("nan"))
    out = torch.full_like(x, float("nan"))
    torch.cuda.synchronize()
    torch.cuda._sleep(SLEEP_CYCLES)
    staged.copy_(x)
    c(staged, w, out)
    got = out.clone()
    torch.cuda.synchronize()
    assert not got.isnan().any()
    assert check(lambda *a: got, kernel, (x, w), expect=expectations(kernel)).passed


def test_a_cuda_graph_captures_the_kernel_and_replays_it_with_new_inputs(compiled: dict[str, CompiledModule]) -> None:
    """Captured on torch's capture stream (global capture mode: a launch on the null stream would be an error,
    one on any other stream would be missing from the graph), replayed after the inputs change."""
    c, kernel, x, w = _rms(compiled, 256)
    static_x, out = x.clone(), torch.full_like(x, float("nan"))
    _warm(c, static_x, w)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        c(static_x, w, out)
    fresh = inputs_for(kernel, 256, "cuda")[0] * 3
    static_x.copy_(fresh)
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert check(lambda *a: out, kernel, (fresh, w), expect=expectations(kernel)).passed


def test_an_elementwise_output_passed_as_its_input_is_updated_in_place_on_cuda() -> None:
    """tests/test_compile_in_place.py's functions on the GPU, each output passed as the input it is computed from
    element by element (greedy decoding's next step inputs; 37 rows of 1000 floats spread over a CTA's threads with
    a tail): the input then holds what the evaluator computes."""
    from tests.test_compile_in_place import bump, scaled

    step = torch.tensor([[7, 0, 0, 0], [41, 0, 0, 0], [42, 0, 0, 0]], dtype=torch.int32, device="cuda")
    keep = torch.tensor([[0, 0, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0]], dtype=torch.int32, device="cuda")
    put = torch.tensor([[1, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]], dtype=torch.int32, device="cuda")
    token = torch.tensor([1234], device="cuda")
    want = bump(step.clone(), keep, put, token)
    assert jit(bump, target="cuda")(step, keep, put, token, step) is step
    assert torch.equal(step, want) and step[:, 0].tolist() == [1234, 42, 43]

    x = torch.randn(37, 1000, device="cuda")
    gain = torch.rand(1000, device="cuda") + 0.5
    want = scaled(x.clone(), gain)
    assert jit(scaled, target="cuda")(x, gain, x) is x
    torch.testing.assert_close(x, want, rtol=0, atol=0)

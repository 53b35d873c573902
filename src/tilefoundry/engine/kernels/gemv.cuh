// Batch-1 GEMV entries: out[m, n] = sum_k x[m, k] * W[n, k] for M <= 16 tokens against a bf16
// weight in nn.Linear layout [N, K], with a fused RMSNorm prologue and residual / SwiGLU / argmax /
// greedy epilogues (gemv_common.cuh). An entry checks its tensors and launches one of two kernels:
// the streamed kernel (gemv_stream.cuh) for one or two tokens where the weight's size lies in its
// range (set_gemv_stream; by default 32 to 128 MiB, where it measured faster) and its plan fits,
// the tiled kernel (gemv_tiled.cuh) otherwise.
#pragma once

#include "common.cuh"
#include "args.cuh"
#include "launch.cuh"
#include "gemv_common.cuh"
#include "gemv_stream.cuh"
#include "gemv_tiled.cuh"

#include <algorithm>

namespace tilefoundry {
namespace engine {
namespace gemv {

template <Prologue P, Epilogue E>
void launch_tiled(Params const& p, int device, char const* entry, dim3 grid) {
  auto go = [&](auto kernel) { launch(entry, device, kernel, grid, dim3(kThreads), 0, p); };
  if (p.m == 1) {
    go(gemv_tiled_kernel<1, P, E>);
  } else if (p.m == 2) {
    go(gemv_tiled_kernel<2, P, E>);
  } else if (p.m <= 4) {
    go(gemv_tiled_kernel<4, P, E>);
  } else if (p.m <= 8) {
    go(gemv_tiled_kernel<8, P, E>);
  } else {
    go(gemv_tiled_kernel<16, P, E>);
  }
}

/// Launches one streamed kernel, letting it take its ring's dynamic shared memory first (once per
/// size and device: the flags are this instantiation's own).
template <int MT, int WPL, Prologue P, Epilogue E>
void launch_stream_as(Params const& p, StreamPlan const& s, int device, char const* entry,
                      dim3 grid) {
  constexpr int kDevices = 64;
  static std::atomic<int> allowed[kDevices] = {};
  auto const kernel = gemv_stream_kernel<MT, WPL, P, E>;
  int const smem = s.ring * s.stage_bytes;
  bool const known = device >= 0 && device < kDevices;
  if (!known || allowed[device].load(std::memory_order_relaxed) < smem) {
    tvm::ffi::CUDADeviceGuard guard(device);
    cudaError_t const err =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (err != cudaSuccess) {
      TVM_FFI_THROW(RuntimeError) << entry << ": reserving " << smem
                                  << " bytes of shared memory failed: " << cudaGetErrorName(err)
                                  << " (" << cudaGetErrorString(err) << ")";
    }
    if (known) allowed[device].store(smem, std::memory_order_relaxed);
  }
  launch(entry, device, kernel, grid, dim3(kThreads), smem, p, s);
}

template <Prologue P, Epilogue E>
void launch_stream(Params const& p, StreamPlan const& s, int device, char const* entry, dim3 grid) {
  if (p.m == 1 && s.words_per_lane <= 4) {
    launch_stream_as<1, 4, P, E>(p, s, device, entry, grid);
  } else if (p.m == 1) {
    launch_stream_as<1, 8, P, E>(p, s, device, entry, grid);
  } else {
    launch_stream_as<2, 4, P, E>(p, s, device, entry, grid);
  }
}

/// The tensors one entry received; those its prologue or epilogue does not use are null.
struct Tensors {
  TensorView const& x;
  TensorView const* norm;
  TensorView const& weight;
  TensorView const* residual;
  TensorView const& out;
  TensorView const* token;  // argmax: (M,) int64; greedy: the result, (2,) int64
  TensorView const* workspace;
  TensorView const* step;  // greedy: the next step's (token, position, context), (3, W) int32
};

/// Checks the tensors of one entry and launches: the streamed kernel when split is 0 and its
/// plan fits, else the tiled kernel with K split over `split` warps (0: chosen).
template <Prologue P, Epilogue E>
void run(char const* entry, Tensors const& t, double eps, int64_t split) {
  Args const a(entry);
  a.rank(t.x, "x", 2, "(tokens M, hidden K)");
  a.bf16(t.x, "x");
  a.rank(t.weight, "weight", 2, "(out features N, in features K), nn.Linear's layout");
  a.bf16(t.weight, "weight");
  int64_t const m = t.x.size(0), k = t.x.size(1), n = t.weight.size(0);
  a.range(m, "the token count M (x's axis 0)", 1, kMaxTokens);
  a.range(k, "the hidden size K (x's axis 1)", kPerWord, 1 << 24);
  a.multiple(k, "the hidden size K (x's axis 1)", kPerWord, "weights are read 8 bf16 at a time");
  a.range(n, "the out features N (weight's axis 0)", 1, 1 << 26);
  a.extent(t.weight, "weight", 1, k, "in features = x's hidden size K");
  a.contiguous(t.x, "x");
  a.aligned(t.x, "x");
  a.contiguous(t.weight, "weight");
  a.aligned(t.weight, "weight");
  if (t.norm) {
    a.rank(*t.norm, "norm_weight", 1, "(K,)");
    a.bf16(*t.norm, "norm_weight");
    a.extent(*t.norm, "norm_weight", 0, k, "x's hidden size K");
    a.contiguous(*t.norm, "norm_weight");
    a.aligned(*t.norm, "norm_weight");
    if (!(eps >= 0.0 && eps < 1.0)) {
      TVM_FFI_THROW(ValueError) << entry << ": eps is " << eps << ", which must lie in [0, 1)";
    }
  }
  int64_t const out_n = E == Epilogue::swiglu ? n / 2 : n;
  if (E == Epilogue::swiglu) {
    a.multiple(n, "the out features N (weight's axis 0)", 2,
               "rows 2j and 2j + 1 hold gate_j and up_j");
  }
  char const* out_name = E == Epilogue::argmax ? "logits" : "out";
  a.rank(t.out, out_name, 2, "(tokens M, out features)");
  a.bf16(t.out, out_name);
  a.extent(t.out, out_name, 0, m, "x's token count M");
  a.extent(t.out, out_name, 1, out_n,
           E == Epilogue::swiglu ? "half of weight's N: one value per gate/up row pair"
                                 : "weight's out features N");
  a.contiguous(t.out, out_name);
  if (t.residual) {
    a.rank(*t.residual, "residual", 2, "(tokens M, out features N)");
    a.bf16(*t.residual, "residual");
    a.extent(*t.residual, "residual", 0, m, "x's token count M");
    a.extent(*t.residual, "residual", 1, n, "weight's out features N");
    a.contiguous(*t.residual, "residual");
    a.same_or_disjoint(t.out, out_name, *t.residual, "residual");
  }
  if (E == Epilogue::argmax) {
    a.rank(*t.token, "token", 1, "(tokens M,)");
    a.dtype(*t.token, "token", kDLInt, 64, "int64");
    a.extent(*t.token, "token", 0, m, "x's token count M");
    a.contiguous(*t.token, "token");
  }
  if (E == Epilogue::greedy) {
    a.range(m, "the token count M (x's axis 0)", 1, 1);
    a.rank(*t.token, "result", 1, "(2,): the token and whether every logit was finite");
    a.dtype(*t.token, "result", kDLInt, 64, "int64");
    a.extent(*t.token, "result", 0, 2, "the token, then 1 if every logit was finite else 0");
    a.contiguous(*t.token, "result");
    a.rank(*t.step, "step", 2, "(3, W): column 0 holds the next step's token, position, context");
    a.dtype(*t.step, "step", kDLInt, 32, "int32");
    a.extent(*t.step, "step", 0, 3, "the next step's token, position and context");
    a.contiguous(*t.step, "step");
    a.disjoint(*t.step, "step", *t.token, "result");
    a.disjoint(*t.step, "step", *t.workspace, "workspace");
    a.disjoint(*t.step, "step", t.out, out_name);
    a.disjoint(*t.token, "result", t.out, out_name);
  }
  if (t.token) {
    a.rank(*t.workspace, "workspace", 1, "(M + 2,), zero-filled once");
    a.dtype(*t.workspace, "workspace", kDLInt, 64, "int64");
    if (E == Epilogue::greedy) {
      a.min_numel(*t.workspace, "workspace", m + 2,
                  "a ticket, one key per token and a not-finite flag");
    } else {
      a.min_numel(*t.workspace, "workspace", m + 1, "a ticket and one key per token");
    }
    a.contiguous(*t.workspace, "workspace");
    a.disjoint(*t.token, E == Epilogue::greedy ? "result" : "token", *t.workspace, "workspace");
    a.disjoint(*t.workspace, "workspace", t.out, out_name);
  }
  if (split != 0 && split != 1 && split != 2 && split != 4 && split != 8) {
    TVM_FFI_THROW(ValueError) << entry << ": split_k is " << split
                              << "; use 1, 2, 4 or 8 warps per row pair, or 0 to choose";
  }
  a.disjoint(t.out, out_name, t.x, "x");
  a.disjoint(t.out, out_name, t.weight, "weight");
  if (t.norm) a.disjoint(t.out, out_name, *t.norm, "norm_weight");
  int const device = t.norm ? a.cuda(arg(t.x, "x"), arg(*t.norm, "norm_weight"),
                                     arg(t.weight, "weight"), arg(t.out, out_name))
                            : a.cuda(arg(t.x, "x"), arg(t.weight, "weight"), arg(t.out, out_name));
  if (t.residual) a.cuda(arg(t.x, "x"), arg(*t.residual, "residual"));
  if (t.token) {
    a.cuda(arg(t.x, "x"), arg(*t.token, E == Epilogue::greedy ? "result" : "token"),
           arg(*t.workspace, "workspace"));
  }
  if (t.step) a.cuda(arg(t.x, "x"), arg(*t.step, "step"));

  Params p = {};
  p.x = data<__nv_bfloat16 const>(t.x);
  p.w = data<Word const>(t.weight);
  p.norm = t.norm ? data<__nv_bfloat16 const>(*t.norm) : nullptr;
  p.residual = t.residual ? data<__nv_bfloat16 const>(*t.residual) : nullptr;
  p.out = data<__nv_bfloat16>(t.out);
  p.token = t.token ? data<long long>(*t.token) : nullptr;
  p.workspace = t.workspace ? data<unsigned long long>(*t.workspace) : nullptr;
  p.step = t.step ? data<int>(*t.step) : nullptr;
  p.step_stride = t.step ? static_cast<int>(t.step->size(1)) : 0;
  p.eps = static_cast<float>(eps);
  p.m = static_cast<int>(m);
  p.n = static_cast<int>(n);
  p.k = static_cast<int>(k);
  int const sms = sm_count(device);
  Tuning const& tune = tuning();
  StreamPlan plan = {};
  int64_t const weight_bytes = n * k * 2;
  bool const streamed_size =
      weight_bytes >= tune.stream_min_bytes.load(std::memory_order_relaxed) &&
      weight_bytes <= tune.stream_max_bytes.load(std::memory_order_relaxed);
  if (split == 0 && streamed_size &&
      stream_plan(p.m, p.k, tune.stream_stage_bytes.load(std::memory_order_relaxed),
                  tune.stream_ring_bytes.load(std::memory_order_relaxed), plan)) {
    int const per_sm = std::max(1, tune.stream_ctas_per_sm.load(std::memory_order_relaxed));
    int const grid = static_cast<int>(std::min<int64_t>(per_sm * sms, (n + 1) / 2));
    launch_stream<P, E>(p, plan, device, entry, dim3(grid));
    return;
  }
  p.split = split ? static_cast<int>(split) : auto_split(p.n, p.k / kPerWord, sms);
  int const blocks = ceil_div(p.n, kWarps / p.split * kRows);
  int const per_sm = tune.ctas_per_sm.load(std::memory_order_relaxed);
  int grid = per_sm > 0 ? std::min(blocks, per_sm * sms) : blocks;
  if (picks_tokens(E)) grid = std::min(grid, 4 * sms);
  p.prefetch_bytes = tune.prefetch_bytes.load(std::memory_order_relaxed);
  launch_tiled<P, E>(p, device, entry, dim3(grid));
}

}  // namespace gemv
}  // namespace engine
}  // namespace tilefoundry

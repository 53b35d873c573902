// RMSNorm of each row, optionally fused with the residual add before it:
//   rmsnorm:      out = bf16(bf16(x * rsqrt(mean(x^2) + eps)) * w), the product in f32
//   add_rmsnorm:  residual = bf16(residual + x) (in place), out = rmsnorm(residual)
// as tf.rms_norm and Hugging Face compute it (the normalised row rounded to the weight's dtype
// before the weight multiplies it).
//
// Work split: one CTA of 256 threads per row, 16-byte words (8 bf16) per thread at a stride of the
// CTA; the sum of squares is reduced by shuffles and one shared-memory step (one barrier); the
// second pass re-reads the row (its own writes, from L1/L2) to scale it.
#pragma once

#include "common.cuh"
#include "args.cuh"
#include "launch.cuh"

namespace tilefoundry {
namespace engine {
namespace rmsnorm {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarp;

struct Params {
  Word const* x;   // [m, k]
  Word* residual;  // [m, k] (add)
  Word const* w;   // [k]
  Word* out;       // [m, k]
  float eps;
  int k;
};

template <bool Add>
__global__ void __launch_bounds__(kThreads) rmsnorm_kernel(Params const p) {
  __shared__ float partial[kWarps];
  int const kv = p.k / kPerWord;
  size_t const row = static_cast<size_t>(blockIdx.x) * kv;
  wait_for_inputs();
  release_dependents();

  float ss = 0.0f;
  for (int v = threadIdx.x; v < kv; v += kThreads) {
    float f[kPerWord];
    unpack(load_input(p.x + row + v), f);
    if constexpr (Add) {
      float r[kPerWord];
      unpack(p.residual[row + v], r);
      CUTE_UNROLL
      for (int i = 0; i < kPerWord; ++i) f[i] = round_bf16(f[i] + r[i]);
      p.residual[row + v] = pack(f);
    }
    CUTE_UNROLL
    for (int i = 0; i < kPerWord; ++i) ss = fmaf(f[i], f[i], ss);
  }
  ss = group_sum(ss);
  if (threadIdx.x % kWarp == 0) partial[threadIdx.x / kWarp] = ss;
  __syncthreads();
  ss = 0.0f;
  CUTE_UNROLL
  for (int w = 0; w < kWarps; ++w) ss += partial[w];
  float const r = ops::detail::rsqrt_(ss / static_cast<float>(p.k) + p.eps);

  for (int v = threadIdx.x; v < kv; v += kThreads) {
    float f[kPerWord], g[kPerWord];
    unpack(Add ? p.residual[row + v] : load_input(p.x + row + v), f);
    unpack(load_input(p.w + v), g);
    CUTE_UNROLL
    for (int i = 0; i < kPerWord; ++i) f[i] = __fmul_rn(round_bf16(__fmul_rn(f[i], r)), g[i]);
    p.out[row + v] = pack(f);
  }
}

/// `residual` null: rmsnorm; else add_rmsnorm.
inline void run(char const* entry, TensorView const& x, TensorView const* residual,
                TensorView const& weight, TensorView const& out, double eps) {
  Args const a(entry);
  a.rank(x, "x", 2, "(rows, hidden K)");
  a.bf16(x, "x");
  int64_t const m = x.size(0), k = x.size(1);
  a.range(m, "the row count (x's axis 0)", 1, INT32_MAX);
  a.range(k, "the hidden size K (x's axis 1)", kPerWord, 1 << 24);
  a.multiple(k, "the hidden size K (x's axis 1)", kPerWord, "rows are read 8 bf16 at a time");
  a.rank(weight, "weight", 1, "(K,)");
  a.bf16(weight, "weight");
  a.extent(weight, "weight", 0, k, "x's hidden size K");
  a.rank(out, "out", 2, "(rows, hidden K)");
  a.bf16(out, "out");
  a.extent(out, "out", 0, m, "x's rows");
  a.extent(out, "out", 1, k, "x's hidden size K");
  if (residual) {
    a.rank(*residual, "residual", 2, "(rows, hidden K)");
    a.bf16(*residual, "residual");
    a.extent(*residual, "residual", 0, m, "x's rows");
    a.extent(*residual, "residual", 1, k, "x's hidden size K");
  }
  for (auto [t, name] : {arg(x, "x"), arg(weight, "weight"), arg(out, "out")}) {
    a.contiguous(*t, name);
    a.aligned(*t, name);
  }
  if (residual) {
    a.contiguous(*residual, "residual");
    a.aligned(*residual, "residual");
    a.disjoint(*residual, "residual", x, "x");
    a.disjoint(out, "out", *residual, "residual");
  }
  if (!(eps >= 0.0 && eps < 1.0)) {
    TVM_FFI_THROW(ValueError) << entry << ": eps is " << eps << ", which must lie in [0, 1)";
  }
  a.disjoint(out, "out", x, "x");
  a.disjoint(out, "out", weight, "weight");
  int const device = a.cuda(arg(x, "x"), arg(weight, "weight"), arg(out, "out"));
  if (residual) a.cuda(arg(x, "x"), arg(*residual, "residual"));

  Params p = {};
  p.x = data<Word const>(x);
  p.residual = residual ? data<Word>(*residual) : nullptr;
  p.w = data<Word const>(weight);
  p.out = data<Word>(out);
  p.eps = static_cast<float>(eps);
  p.k = int(k);
  if (residual)
    launch(entry, device, rmsnorm_kernel<true>, dim3(unsigned(m)), dim3(kThreads), 0, p);
  else
    launch(entry, device, rmsnorm_kernel<false>, dim3(unsigned(m)), dim3(kThreads), 0, p);
}

}  // namespace rmsnorm
}  // namespace engine
}  // namespace tilefoundry

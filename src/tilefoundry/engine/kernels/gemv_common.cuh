// What the batch-1 GEMV's two kernels share (gemv_tiled.cuh, gemv_stream.cuh): the parameters one
// launch takes, the fused prologue and epilogues, their process-wide tuning, and the argmax across
// CTAs with the greedy step's bookkeeping.
//
// out[m, n] = sum_k x[m, k] * W[n, k] for M <= 16 tokens against a bf16 weight in nn.Linear layout
// [N, K], f32 accumulation.
//
// Prologue (P): none, or RMSNorm of x by its norm weight g: since the norm scales a whole row of
// x by one number r = rsqrt(mean(x^2) + eps), sum_k W[n,k] * (x[k] * r * g[k]) is computed as
// r * sum_k W[n,k] * (x[k] * g[k]), the sum of squares riding along in the same loop. (torch
// rounds the normed x to bf16 before the product; this does not: the results differ by bf16
// rounding noise.)
// Epilogue (E), on y = bf16(acc) as torch's bf16 linear returns it: store; residual
// (out = bf16(y + residual), out may be residual itself); swiglu (rows 2j and 2j+1 hold gate_j
// and up_j, interleaved by the engine's packing: out[m, j] = bf16(bf16(silu(gate_j)) * up_j));
// argmax (store the logits, and token[m] = the first index of the largest logit of row m);
// greedy (one token: argmax, plus the greedy decode step's bookkeeping, below).
//
// Argmax across CTAs: each CTA folds its rows into one 64-bit key per token (the logit's bits
// mapped to an order-preserving unsigned integer above the complement of the index, so that the
// larger logit and then the smaller index win; NaN is largest, as in torch.argmax), atomicMax'es
// it into the workspace and takes a ticket. The CTA drawing the last ticket reads the keys,
// writes the tokens and zeroes the workspace again, so a CUDA graph can replay the kernel.
// Greedy: the CTAs also OR into the workspace whether any logit was not finite, and the last CTA
// writes result = (token, 1 if every logit was finite else 0) and feeds the next step: the chosen
// token into step[0, 0], and one more into step[1, 0] (the position) and step[2, 0] (the context).
//
// PDL: a GEMV may start while the kernel before it in the stream runs (common.cuh) and reads its
// weight before that kernel is done: the weight must not be an output of the kernel launched just
// before it (weights are constant through a decode step; set_pdl(False) lifts the rule).
#pragma once

#include "common.cuh"

#include <atomic>

namespace tilefoundry {
namespace engine {
namespace gemv {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarp;
constexpr int kMaxTokens = 16;

enum class Prologue { none, rmsnorm };
enum class Epilogue { store, residual, swiglu, argmax, greedy };

__host__ __device__ constexpr bool picks_tokens(Epilogue e) {
  return e == Epilogue::argmax || e == Epilogue::greedy;
}

struct Params {
  __nv_bfloat16 const* x;         // [m, k]
  Word const* w;                  // [n, k]
  __nv_bfloat16 const* norm;      // [k]     (rmsnorm)
  __nv_bfloat16 const* residual;  // [m, n]  (residual; may be out)
  __nv_bfloat16* out;             // [m, n]; [m, n / 2] (swiglu)
  long long* token;               // [m]     (argmax); [2] (greedy: token, finite)
  unsigned long long* workspace;  // [2 + m] (argmax, greedy): ticket, one key per token, not-finite
  int* step;                      // (greedy) the next step's inputs: token, position, context
  int step_stride;                // elements between the rows of step
  float eps;
  int m, n, k;
  int split;           // (tiled) warps sharing one row pair, each over a slice of k
  int prefetch_bytes;  // (tiled) weight bytes per CTA asked of L2 before the PDL wait
};

/// Tuning of the two kernels, process-wide, read at each launch (set_gemv_tuning and
/// set_gemv_stream). Tiled kernel: CTAs per SM (0: one per row block) and its L2 prefetch before
/// the PDL wait, bytes per CTA (0: each warp's first words). Streamed kernel: CTAs per SM, the
/// bytes of shared memory its weight ring holds per CTA (0: never stream), the target size of a
/// stage, and the weight sizes it takes (bytes, min to max; the others take the tiled kernel).
///
/// The streamed kernel's defaults are what measured fastest on an H200 (a Qwen3-1.7B decode step
/// at context 1024, the engine's kernels as one CUDA graph, each setting captured and replayed
/// side by side): two CTAs per SM with 48 KiB rings of 16 KiB stages, for weights of 32 to 128 MiB,
/// which there is the gate/up projection (48 MiB): 1540 us a step against 1642 us with every GEMV
/// tiled. Streaming q/k/v (16 MiB), o_proj (8) and down (24) too made the step 1814 us; the lm_head
/// (594 MiB) too, 1573; one CTA per SM with a 96 KiB ring, 1912; three with 48 KiB, 1719.
struct Tuning {
  std::atomic<int> ctas_per_sm{2};
  std::atomic<int> prefetch_bytes{32 << 10};
  std::atomic<int> stream_ctas_per_sm{2};
  std::atomic<int> stream_ring_bytes{48 << 10};
  std::atomic<int> stream_stage_bytes{16 << 10};
  std::atomic<long long> stream_min_bytes{32LL << 20};   // smaller weights take the tiled kernel
  std::atomic<long long> stream_max_bytes{128LL << 20};  // and larger ones
};

inline Tuning& tuning() {
  static Tuning t;
  return t;
}

/// The argmax key of logit v at index i (see the top).
__device__ __forceinline__ unsigned long long argmax_key(float v, int i) {
  uint32_t u = __float_as_uint(v);
  u = (v != v) ? 0xffffffffu : ((u & 0x80000000u) ? ~u : (u | 0x80000000u));
  return (static_cast<unsigned long long>(u) << 32) | (0xffffffffu - static_cast<uint32_t>(i));
}

__device__ __forceinline__ long long argmax_index(unsigned long long key) {
  return static_cast<long long>(0xffffffffu - static_cast<uint32_t>(key & 0xffffffffu));
}

/// The epilogue of one output row r of token m, on y = bf16(acc) (store / residual; swiglu and
/// the argmax keys are the kernels' own, since they pair rows or fold across them).
template <Epilogue E>
__device__ __forceinline__ void store_row(Params const& p, int m, int r, float y) {
  size_t const o = static_cast<size_t>(m) * p.n + r;
  if constexpr (E == Epilogue::residual) {
    p.out[o] = __float2bfloat16_rn(y + bf16_at(p.residual + o));
  } else if constexpr (E != Epilogue::swiglu) {
    p.out[o] = __float2bfloat16_rn(y);
  }
}

/// out[m, j] of the SwiGLU epilogue from the gate and up rows' values.
__device__ __forceinline__ void store_swiglu(Params const& p, int m, int j, float gate, float up) {
  p.out[static_cast<size_t>(m) * (p.n / 2) + j] = __float2bfloat16_rn(silu_bf16(gate) * up);
}

/// Every CTA's end of an argmax / greedy launch (see the top): best[m] is this CTA's key of token
/// m (0: none), not_finite whether it saw a logit that is not finite (the same in every thread).
/// Called by every thread, after a barrier that completes best[].
template <Epilogue E>
__device__ __forceinline__ void finish_argmax(Params const& p, unsigned long long const* best,
                                              bool not_finite) {
  __shared__ int last_cta;
  if (threadIdx.x < p.m && best[threadIdx.x])
    atomicMax(&p.workspace[1 + threadIdx.x], best[threadIdx.x]);
  if (E == Epilogue::greedy && not_finite && threadIdx.x == 0)
    atomicOr(&p.workspace[1 + p.m], 1ull);
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last_cta = atomicAdd(&p.workspace[0], 1ull) == gridDim.x - 1;
  __syncthreads();
  if (!last_cta) return;
  __threadfence();
  if (threadIdx.x < p.m) {
    long long const token = argmax_index(atomicExch(&p.workspace[1 + threadIdx.x], 0ull));
    if constexpr (E == Epilogue::greedy) {  // one token (checked by the entry)
      bool const finite = atomicExch(&p.workspace[1 + p.m], 0ull) == 0;
      p.token[0] = token;
      p.token[1] = finite ? 1 : 0;
      p.step[0] = static_cast<int>(token);
      p.step[p.step_stride] += 1;
      p.step[2 * p.step_stride] += 1;
    } else {
      p.token[threadIdx.x] = token;
    }
  }
  if (threadIdx.x == 0) atomicExch(&p.workspace[0], 0ull);
}

}  // namespace gemv
}  // namespace engine
}  // namespace tilefoundry

// Batch-1 GEMV: out[m, n] = sum_k x[m, k] * W[n, k] for M <= 16 tokens against a bf16 weight in
// nn.Linear layout [N, K], f32 accumulation, with a fused prologue and epilogue.
//
// Work split. A CTA of 8 warps; a warp owns 2 consecutive rows of W (so x is loaded once for both)
// and one of `split` slices of K; the CTA's warps form 8 / split row groups, so a CTA covers
// 16 / split rows. Each lane streams 16-byte words (8 bf16) of both rows, U words a row in flight
// before the first is used (U = 4 for M <= 4, else 2), reads the matching x words (and norm
// weight words) through L1, and accumulates in f32. The warp sums its lanes with shuffles, the
// CTA sums the K slices through shared memory, and one thread per (row pair, token) runs the
// epilogue. The host picks `split` (1, 2, 4 or 8) so that the grid has about three CTAs per SM
// (N = 2048 -> 4, 4096 -> 2, 12288 and the lm_head -> 1), keeping every slice at least one word
// per lane; a caller may force it.
//
// Prologue (P): none, or RMSNorm of x by its norm weight g: since the norm scales a whole row of
// x by one number r = rsqrt(mean(x^2) + eps), sum_k W[n,k] * (x[k] * r * g[k]) is computed as
// r * sum_k W[n,k] * (x[k] * g[k]), the sum of squares riding along in the same loop. (torch
// rounds the normed x to bf16 before the product; this does not: the results differ by bf16
// rounding noise.)
// Epilogue (E), on y = bf16(acc) as torch's bf16 linear returns it: store; residual
// (out = bf16(y + residual), out may be residual itself); swiglu (rows 2j and 2j+1 hold gate_j
// and up_j, interleaved by the engine's packing: out[m, j] = bf16(bf16(silu(gate_j)) * up_j));
// argmax (store the logits, and token[m] = the first index of the largest logit of row m).
//
// Argmax across CTAs: each CTA folds its rows into one 64-bit key per token (the logit's bits
// mapped to an order-preserving unsigned integer above the complement of the index, so that the
// larger logit and then the smaller index win; NaN is largest, as in torch.argmax), atomicMax'es
// it into the workspace and takes a ticket. The CTA drawing the last ticket reads the keys,
// writes the tokens and zeroes the workspace again, so a CUDA graph can replay the kernel.
//
// Grid. Two CTAs per SM (or one per row block when there are fewer), each stepping over row blocks
// i, i + grid, ...; the argmax's global atomics are then one pair per CTA however long the
// vocabulary is (one pair per 16 rows cost the lm_head ~90 us on an H200). Before waiting for the
// kernel before it (PDL), a CTA asks L2 for its row blocks' weight lines, up to 32 KiB, so the
// weights' DRAM latency overlaps the kernel before it (8 MiB in flight over 264 CTAs: more was
// slower on the H200). set_gemv_tuning changes both for tuning runs: measured on an H200, a
// Qwen3-1.7B step at context 1024 took 1787 us with one CTA per row block and only each warp's
// first words prefetched, 2048 us with one CTA per SM, 1677 us with two and 64 KiB, 1781 us with
// two and 256 KiB, 1909 us with three and 128 KiB; a later run, 1726 us with two and 64 KiB,
// 1697 us with two and 32 KiB, 1777 us with two and 96 or 128 KiB.
#pragma once

#include "common.cuh"
#include "args.cuh"
#include "launch.cuh"

#include <algorithm>
#include <atomic>

namespace tilefoundry {
namespace engine {
namespace gemv {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarp;
constexpr int kRows = 2;  // rows of W per warp
constexpr int kMaxTokens = 16;

enum class Prologue { none, rmsnorm };
enum class Epilogue { store, residual, swiglu, argmax };

struct Params {
  __nv_bfloat16 const* x;         // [m, k]
  Word const* w;                  // [n, k]
  __nv_bfloat16 const* norm;      // [k]     (rmsnorm)
  __nv_bfloat16 const* residual;  // [m, n]  (residual; may be out)
  __nv_bfloat16* out;             // [m, n]; [m, n / 2] (swiglu)
  long long* token;               // [m]     (argmax)
  unsigned long long* workspace;  // [1 + m] (argmax): the ticket, then one key per token
  float eps;
  int m, n, k;
  int split;           // warps sharing one row pair, each over a slice of k
  int prefetch_bytes;  // weight bytes per CTA asked of L2 before the PDL wait (0: the first words)
};

/// Tuning of the grid and the early prefetch (see the top): CTAs per SM (0: one per row block)
/// and the prefetch budget per CTA in bytes (0: each warp's first words). Process-wide, read at
/// each launch.
struct Tuning {
  std::atomic<int> ctas_per_sm{2};
  std::atomic<int> prefetch_bytes{32 << 10};
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

template <int MT, Prologue P, Epilogue E>
__global__ void __launch_bounds__(kThreads, 2) gemv_kernel(Params const p) {
  constexpr int U = MT <= 4 ? 4 : 2;
  constexpr bool kNorm = P == Prologue::rmsnorm;
  constexpr int kSums = kRows + (kNorm ? 1 : 0);
  __shared__ float partial[kWarps][MT][kSums];
  __shared__ unsigned long long best[MT];
  __shared__ int last_cta;

  int const warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  int const groups = kWarps / p.split;
  int const group = warp / p.split, slice = warp % p.split;
  int const kv = p.k / kPerWord;
  int const per_slice = ceil_div(ceil_div(kv, p.split), kWarp) * kWarp;
  int const kb = min(slice * per_slice, kv), ke = min(kb + per_slice, kv);
  int const blocks = ceil_div(p.n, groups * kRows);  // row blocks; CTA i takes i, i + grid, ...
  if constexpr (E == Epilogue::argmax) {
    if (threadIdx.x < MT) best[threadIdx.x] = 0;
  }

  // Before the previous kernel is done: only ask L2 for weights (no register is written).
  if (p.prefetch_bytes == 0) {  // this warp's first words
    int const row0 = (blockIdx.x * groups + group) * kRows;
    CUTE_UNROLL
    for (int u = 0; u < U; ++u) {
      int const v = kb + u * kWarp + lane;
      CUTE_UNROLL
      for (int r = 0; r < kRows; ++r)
        if (v < ke && row0 + r < p.n) prefetch_l2(p.w + static_cast<size_t>(row0 + r) * kv + v);
    }
  } else {  // this CTA's row blocks, one prefetch per 128-byte line, up to the budget
    int const lines = p.prefetch_bytes / 128 / kWarps;  // per warp
    int issued = 0;
    for (int block = blockIdx.x; block < blocks && issued < lines; block += gridDim.x) {
      int const row0 = (block * groups + group) * kRows;
      CUTE_UNROLL
      for (int r = 0; r < kRows; ++r) {
        if (row0 + r >= p.n) break;
        Word const* row = p.w + static_cast<size_t>(row0 + r) * kv;
        for (int v = kb + lane * 8; v < ke; v += kWarp * 8) prefetch_l2(row + v);
        issued += ceil_div(ke - kb, 8);
      }
    }
  }
  wait_for_inputs();
  release_dependents();

  Word const* x = reinterpret_cast<Word const*>(p.x);
  Word const* g = reinterpret_cast<Word const*>(p.norm);
  for (int block = blockIdx.x; block < blocks; block += gridDim.x) {
    int const row0 = (block * groups + group) * kRows;
    bool have[kRows];
    Word const* wrow[kRows];
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      have[r] = row0 + r < p.n;
      wrow[r] = p.w + static_cast<size_t>(have[r] ? row0 + r : 0) * kv;
    }
    float acc[MT][kRows];
    float ss[MT];
    CUTE_UNROLL
    for (int m = 0; m < MT; ++m) {
      ss[m] = 0.0f;
      CUTE_UNROLL
      for (int r = 0; r < kRows; ++r) acc[m][r] = 0.0f;
    }

    for (int base = kb; base < ke; base += kWarp * U) {
      Word wv[U][kRows];
      CUTE_UNROLL
      for (int u = 0; u < U; ++u) {
        int const v = base + u * kWarp + lane;
        CUTE_UNROLL
        for (int r = 0; r < kRows; ++r) {
          wv[u][r] = make_uint4(0u, 0u, 0u, 0u);
          if (v < ke && have[r]) wv[u][r] = load_weight(wrow[r] + v);
        }
      }
      CUTE_UNROLL
      for (int u = 0; u < U; ++u) {
        int const v = base + u * kWarp + lane;
        if (v >= ke) break;
        float gf[kPerWord];
        if constexpr (kNorm) unpack(load_input(g + v), gf);
        float wf[kRows][kPerWord];
        CUTE_UNROLL
        for (int r = 0; r < kRows; ++r) unpack(wv[u][r], wf[r]);
        CUTE_UNROLL
        for (int m = 0; m < MT; ++m) {
          if (m >= p.m) break;
          float xf[kPerWord];
          unpack(load_input(x + static_cast<size_t>(m) * kv + v), xf);
          if constexpr (kNorm) {
            CUTE_UNROLL
            for (int i = 0; i < kPerWord; ++i) {
              ss[m] = fmaf(xf[i], xf[i], ss[m]);
              xf[i] *= gf[i];
            }
          }
          CUTE_UNROLL
          for (int r = 0; r < kRows; ++r) {
            CUTE_UNROLL
            for (int i = 0; i < kPerWord; ++i) acc[m][r] = fmaf(wf[r][i], xf[i], acc[m][r]);
          }
        }
      }
    }

    CUTE_UNROLL
    for (int m = 0; m < MT; ++m) {
      CUTE_UNROLL
      for (int r = 0; r < kRows; ++r) acc[m][r] = group_sum(acc[m][r]);
      if constexpr (kNorm) ss[m] = group_sum(ss[m]);
    }
    if (lane == 0) {
      CUTE_UNROLL
      for (int m = 0; m < MT; ++m) {
        CUTE_UNROLL
        for (int r = 0; r < kRows; ++r) partial[warp][m][r] = acc[m][r];
        if constexpr (kNorm) partial[warp][m][kRows] = ss[m];
      }
    }
    __syncthreads();

    // One thread per (row pair, token) of this block: sum the K slices and run the epilogue.
    for (int t = threadIdx.x; t < groups * MT; t += kThreads) {
      int const gi = t / MT, m = t % MT;
      int const r0 = (block * groups + gi) * kRows;
      if (m >= p.m || r0 >= p.n) continue;
      float s[kSums];
      CUTE_UNROLL
      for (int j = 0; j < kSums; ++j) s[j] = 0.0f;
      for (int sl = 0; sl < p.split; ++sl) {
        CUTE_UNROLL
        for (int j = 0; j < kSums; ++j) s[j] += partial[gi * p.split + sl][m][j];
      }
      float scale = 1.0f;
      if constexpr (kNorm) scale = ops::detail::rsqrt_(s[kRows] / static_cast<float>(p.k) + p.eps);
      float y[kRows];
      CUTE_UNROLL
      for (int r = 0; r < kRows; ++r) y[r] = round_bf16(s[r] * scale);
      bool const second = r0 + 1 < p.n;
      size_t const o = static_cast<size_t>(m) * p.n + r0;
      if constexpr (E == Epilogue::swiglu) {
        // rows r0 = 2j (gate) and r0 + 1 (up); n is even (checked by the entry)
        p.out[static_cast<size_t>(m) * (p.n / 2) + r0 / 2] =
            __float2bfloat16_rn(silu_bf16(y[0]) * y[1]);
      } else if constexpr (E == Epilogue::residual) {
        p.out[o] = __float2bfloat16_rn(y[0] + bf16_at(p.residual + o));
        if (second) p.out[o + 1] = __float2bfloat16_rn(y[1] + bf16_at(p.residual + o + 1));
      } else {
        p.out[o] = __float2bfloat16_rn(y[0]);
        if (second) p.out[o + 1] = __float2bfloat16_rn(y[1]);
      }
      if constexpr (E == Epilogue::argmax) {
        unsigned long long key = argmax_key(y[0], r0);
        if (second) key = max(key, argmax_key(y[1], r0 + 1));
        atomicMax(&best[m], key);
      }
    }
    __syncthreads();  // partial is rewritten by the next block
  }

  if constexpr (E == Epilogue::argmax) {
    if (threadIdx.x < p.m) atomicMax(&p.workspace[1 + threadIdx.x], best[threadIdx.x]);
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last_cta = atomicAdd(&p.workspace[0], 1ull) == gridDim.x - 1;
    __syncthreads();
    if (last_cta) {
      __threadfence();
      if (threadIdx.x < p.m)
        p.token[threadIdx.x] = argmax_index(atomicExch(&p.workspace[1 + threadIdx.x], 0ull));
      if (threadIdx.x == 0) atomicExch(&p.workspace[0], 0ull);
    }
  }
}

template <Prologue P, Epilogue E>
void dispatch(Params const& p, int device, char const* entry, dim3 grid) {
  auto go = [&](auto kernel) { launch(entry, device, kernel, grid, dim3(kThreads), 0, p); };
  if (p.m == 1) {
    go(gemv_kernel<1, P, E>);
  } else if (p.m == 2) {
    go(gemv_kernel<2, P, E>);
  } else if (p.m <= 4) {
    go(gemv_kernel<4, P, E>);
  } else if (p.m <= 8) {
    go(gemv_kernel<8, P, E>);
  } else {
    go(gemv_kernel<16, P, E>);
  }
}

/// The K split: the smallest power of two up to 8 that gives about three CTAs per SM, keeping
/// every slice at least one word per lane.
inline int auto_split(int n, int kv, int sms) {
  int split = 1;
  while (split < kWarps && ceil_div(n, kWarps / split * kRows) < 3 * sms &&
         kv / (2 * split) >= kWarp)
    split *= 2;
  return split;
}

/// The tensors one entry received; those its prologue or epilogue does not use are null.
struct Tensors {
  TensorView const& x;
  TensorView const* norm;
  TensorView const& weight;
  TensorView const* residual;
  TensorView const& out;
  TensorView const* token;
  TensorView const* workspace;
};

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
  if (t.token) {
    a.rank(*t.token, "token", 1, "(tokens M,)");
    a.dtype(*t.token, "token", kDLInt, 64, "int64");
    a.extent(*t.token, "token", 0, m, "x's token count M");
    a.contiguous(*t.token, "token");
    a.rank(*t.workspace, "workspace", 1, "(M + 1,), zero-filled once");
    a.dtype(*t.workspace, "workspace", kDLInt, 64, "int64");
    a.min_numel(*t.workspace, "workspace", m + 1, "a ticket and one key per token");
    a.contiguous(*t.workspace, "workspace");
    a.disjoint(*t.token, "token", *t.workspace, "workspace");
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
  if (t.token) a.cuda(arg(t.x, "x"), arg(*t.token, "token"), arg(*t.workspace, "workspace"));

  Params p = {};
  p.x = data<__nv_bfloat16 const>(t.x);
  p.w = data<Word const>(t.weight);
  p.norm = t.norm ? data<__nv_bfloat16 const>(*t.norm) : nullptr;
  p.residual = t.residual ? data<__nv_bfloat16 const>(*t.residual) : nullptr;
  p.out = data<__nv_bfloat16>(t.out);
  p.token = t.token ? data<long long>(*t.token) : nullptr;
  p.workspace = t.workspace ? data<unsigned long long>(*t.workspace) : nullptr;
  p.eps = static_cast<float>(eps);
  p.m = static_cast<int>(m);
  p.n = static_cast<int>(n);
  p.k = static_cast<int>(k);
  p.split = split ? static_cast<int>(split) : auto_split(p.n, p.k / kPerWord, sm_count(device));
  int const blocks = ceil_div(p.n, kWarps / p.split * kRows);
  int const sms = sm_count(device);
  int const per_sm = tuning().ctas_per_sm.load(std::memory_order_relaxed);
  int grid = per_sm > 0 ? std::min(blocks, per_sm * sms) : blocks;
  if (E == Epilogue::argmax) grid = std::min(grid, 4 * sms);
  p.prefetch_bytes = tuning().prefetch_bytes.load(std::memory_order_relaxed);
  dispatch<P, E>(p, device, entry, dim3(grid));
}

}  // namespace gemv
}  // namespace engine
}  // namespace tilefoundry

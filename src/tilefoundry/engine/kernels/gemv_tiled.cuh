// The tiled batch-1 GEMV (gemv_common.cuh says what it computes): any M <= 16 tokens, any K that
// is a multiple of 8.
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

#include "gemv_common.cuh"

namespace tilefoundry {
namespace engine {
namespace gemv {

constexpr int kRows = 2;  // rows of W per warp

template <int MT, Prologue P, Epilogue E>
__global__ void __launch_bounds__(kThreads, 2) gemv_tiled_kernel(Params const p) {
  constexpr int U = MT <= 4 ? 4 : 2;
  constexpr bool kNorm = P == Prologue::rmsnorm;
  constexpr int kSums = kRows + (kNorm ? 1 : 0);
  __shared__ float partial[kWarps][MT][kSums];
  __shared__ unsigned long long best[MT];
  bool not_finite = false;

  int const warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  int const groups = kWarps / p.split;
  int const group = warp / p.split, slice = warp % p.split;
  int const kv = p.k / kPerWord;
  int const per_slice = ceil_div(ceil_div(kv, p.split), kWarp) * kWarp;
  int const kb = min(slice * per_slice, kv), ke = min(kb + per_slice, kv);
  int const blocks = ceil_div(p.n, groups * kRows);  // row blocks; CTA i takes i, i + grid, ...
  if constexpr (picks_tokens(E)) {
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
      if constexpr (E == Epilogue::swiglu) {
        store_swiglu(p, m, r0 / 2, y[0], y[1]);  // n is even (checked by the entry)
      } else {
        store_row<E>(p, m, r0, y[0]);
        if (second) store_row<E>(p, m, r0 + 1, y[1]);
      }
      if constexpr (picks_tokens(E)) {
        unsigned long long key = argmax_key(y[0], r0);
        if (second) key = max(key, argmax_key(y[1], r0 + 1));
        atomicMax(&best[m], key);
        not_finite |= !isfinite(y[0]) || (second && !isfinite(y[1]));
      }
    }
    __syncthreads();  // partial is rewritten by the next block
  }

  if constexpr (picks_tokens(E)) {
    finish_argmax<E>(p, best, __syncthreads_or(not_finite));  // a barrier: best[] is complete
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

}  // namespace gemv
}  // namespace engine
}  // namespace tilefoundry

// The streamed batch-1 GEMV (gemv_common.cuh says what it computes), for steps of one or two
// tokens: each CTA streams one contiguous region of the weight through a ring of shared-memory
// stages filled by bulk copies (the runtime's cuda/bulk_copy.cuh), so that its loads stay in
// flight from the first instruction to the last instead of draining at every row block.
//
// Rows. With P = ceil(N / 2) row pairs, CTA c of G takes the rows [2 floor(P c / G),
// 2 floor(P (c + 1) / G)) (a SwiGLU pair never splits), contiguous in nn.Linear's layout. A stage
// holds `rows_per_stage` whole rows: the most of 1, 2, 4, 8 whose bytes fit the stage size (16 KiB
// by default; one row when a row alone is larger). The 8 warps split a stage as rows_per_stage x
// warps_per_row: warp w takes row w / warps_per_row of every stage and slice w % warps_per_row of
// K, so each lane multiplies the same words of every row and keeps the x words it needs (times the
// norm weight) in registers for the whole launch (at most 8 words a lane for one token, 4 for two:
// K up to 16384 and 8192).
//
// Pipeline. Before the PDL wait, thread 0 starts the copies of the ring's first stages (48 KiB by
// default: the weights never are an output of the kernel before; see gemv_common.cuh). Per stage:
// every warp waits for the stage's barrier, multiplies its row slice (16-byte shared loads),
// sums its lanes and writes one partial per token; a CTA barrier; thread 0 refills the consumed
// buffer with the stage `ring` ahead; warp 0 sums each row's partials and runs the epilogue (a
// SwiGLU pair split over two one-row stages keeps its gate value in a register).
#pragma once

#include "gemv_common.cuh"

#include <tilefoundry/runtime/cuda/bulk_copy.cuh>

namespace tilefoundry {
namespace engine {
namespace gemv {

constexpr int kMaxRing = 8;  // stages a ring holds at most
constexpr int kStreamMaxTokens = 2;

/// How a launch splits the weight: stages of whole rows, and the warps over a stage.
struct StreamPlan {
  int rows_per_stage;  // 1, 2, 4 or 8
  int warps_per_row;   // kWarps / rows_per_stage
  int slice_words;     // words of K a warp multiplies: ceil(K / 8 / warps_per_row)
  int words_per_lane;  // ceil(slice_words / 32)
  int stage_bytes;     // rows_per_stage * K * 2
  int ring;            // stages in flight, 2 .. kMaxRing
};

/// The plan of an M x K launch with stages of about `stage_bytes` and a ring of at most
/// `ring_bytes` per CTA; false when the streamed kernel does not take it (more than two tokens, x
/// too long for the registers, a row longer than half the ring, or streaming switched off).
inline bool stream_plan(int m, int k, int stage_bytes, int ring_bytes, StreamPlan& s) {
  if (m > kStreamMaxTokens || ring_bytes <= 0) return false;
  long long const kv = k / kPerWord, row_bytes = kv * 16;
  int rps = 1;
  while (rps < kWarps && 2 * rps * row_bytes <= stage_bytes) rps *= 2;
  s.rows_per_stage = rps;
  s.warps_per_row = kWarps / rps;
  s.slice_words = static_cast<int>(ceil_div<long long>(kv, s.warps_per_row));
  s.words_per_lane = ceil_div(s.slice_words, kWarp);
  if (s.words_per_lane > (m == 1 ? 8 : 4) || rps * row_bytes > ring_bytes / 2) return false;
  s.stage_bytes = static_cast<int>(rps * row_bytes);
  s.ring = std::min(kMaxRing, ring_bytes / s.stage_bytes);
  return true;
}

template <int MT, int WPL, Prologue P, Epilogue E>
__global__ void __launch_bounds__(kThreads, 2)
    gemv_stream_kernel(Params const p, StreamPlan const s) {
  extern __shared__ __align__(128) unsigned char ring[];
  __shared__ __align__(8) uint64_t full[kMaxRing];
  __shared__ float partial[2][kWarps][MT];
  __shared__ float norm_sums[kWarps][MT];
  __shared__ unsigned long long best[MT];
  constexpr bool kNorm = P == Prologue::rmsnorm;

  int const warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  int const kv = p.k / kPerWord;
  long long const pairs = (p.n + 1) / 2;
  int const r0 = 2 * static_cast<int>(pairs * blockIdx.x / gridDim.x);
  int const r1 = min(p.n, 2 * static_cast<int>(pairs * (blockIdx.x + 1) / gridDim.x));
  int const rps = s.rows_per_stage;
  int const stages = r1 > r0 ? ceil_div(r1 - r0, rps) : 0;
  int const stage_words = s.stage_bytes / 16;

  uint64_t policy = 0;
  if (threadIdx.x == 0) {
    for (int b = 0; b < s.ring; ++b) bulk::init(&full[b], 1);
    bulk::fence_init();
    policy = bulk::evict_first_policy();
  }
  if constexpr (picks_tokens(E)) {
    if (threadIdx.x < MT) best[threadIdx.x] = 0;
  }
  __syncthreads();
  auto issue = [&](int i) {  // thread 0: stage i into its buffer
    int const row = r0 + i * rps, rows = min(rps, r1 - row);
    bulk::load(ring + (i % s.ring) * s.stage_bytes, p.w + static_cast<size_t>(row) * kv,
               static_cast<uint32_t>(rows) * kv * 16, &full[i % s.ring], policy);
  };
  if (threadIdx.x == 0) {
    for (int i = 0; i < min(s.ring, stages); ++i) issue(i);
  }
  wait_for_inputs();
  release_dependents();

  // This lane's x words (times the norm weight), and the norm's sums of squares.
  int const rr = warp / s.warps_per_row, part = warp % s.warps_per_row;
  int const kb = part * s.slice_words, ke = min(kb + s.slice_words, kv);
  Word const* x = reinterpret_cast<Word const*>(p.x);
  Word const* g = reinterpret_cast<Word const*>(p.norm);
  float xr[MT][WPL][kPerWord];
  float ss[MT];
  CUTE_UNROLL
  for (int m = 0; m < MT; ++m) ss[m] = 0.0f;
  CUTE_UNROLL
  for (int j = 0; j < WPL; ++j) {
    int const v = kb + lane + j * kWarp;
    bool const in = v < ke;
    float gf[kPerWord];
    if constexpr (kNorm) {
      if (in) unpack(load_input(g + v), gf);
    }
    CUTE_UNROLL
    for (int m = 0; m < MT; ++m) {
      CUTE_UNROLL
      for (int e = 0; e < kPerWord; ++e) xr[m][j][e] = 0.0f;
      if (in && m < p.m) {
        unpack(load_input(x + static_cast<size_t>(m) * kv + v), xr[m][j]);
        if constexpr (kNorm) {
          CUTE_UNROLL
          for (int e = 0; e < kPerWord; ++e) {
            ss[m] = fmaf(xr[m][j][e], xr[m][j][e], ss[m]);
            xr[m][j][e] *= gf[e];
          }
        }
      }
    }
  }
  float scale[MT];
  CUTE_UNROLL
  for (int m = 0; m < MT; ++m) scale[m] = 1.0f;
  if constexpr (kNorm) {  // the slices of row 0's warps cover K once
    CUTE_UNROLL
    for (int m = 0; m < MT; ++m) ss[m] = group_sum(ss[m]);
    if (rr == 0 && lane == 0) {
      CUTE_UNROLL
      for (int m = 0; m < MT; ++m) norm_sums[part][m] = ss[m];
    }
    __syncthreads();
    CUTE_UNROLL
    for (int m = 0; m < MT; ++m) {
      float total = 0.0f;
      for (int q = 0; q < s.warps_per_row; ++q) total += norm_sums[q][m];
      scale[m] = ops::detail::rsqrt_(total / static_cast<float>(p.k) + p.eps);
    }
  }

  // Warp 0's epilogue lanes: row lane / MT of a stage, token lane % MT. The residual of a stage's
  // rows is loaded one stage ahead, so its latency hides behind the stage.
  int const er = lane / MT, em = lane % MT;
  auto residual_of = [&](int i) {
    int const row = r0 + i * rps + er;
    bool const ok = warp == 0 && i < stages && lane < rps * MT && row < r1 && em < p.m;
    return ok ? bf16_at(p.residual + static_cast<size_t>(em) * p.n + row) : 0.0f;
  };
  float residual_next = 0.0f;
  if constexpr (E == Epilogue::residual) residual_next = residual_of(0);
  float gate = 0.0f;  // SwiGLU over one-row stages: the gate row's value until its up row
  unsigned long long key = 0;
  bool not_finite = false;
  Word const* words = reinterpret_cast<Word const*>(ring);
  for (int i = 0; i < stages; ++i) {
    int const b = i % s.ring;
    int const row0 = r0 + i * rps, rows = min(rps, r1 - row0);
    bulk::wait(&full[b], (i / s.ring) & 1);
    float acc[MT][WPL];  // one chain per word: short dependent FMA chains
    CUTE_UNROLL
    for (int m = 0; m < MT; ++m) {
      CUTE_UNROLL
      for (int j = 0; j < WPL; ++j) acc[m][j] = 0.0f;
    }
    if (rr < rows) {
      Word const* wrow = words + b * stage_words + rr * kv;
      Word wv[WPL];
      CUTE_UNROLL
      for (int j = 0; j < WPL; ++j) {
        int const v = kb + lane + j * kWarp;
        if (v < ke) wv[j] = wrow[v];
      }
      CUTE_UNROLL
      for (int j = 0; j < WPL; ++j) {
        if (kb + lane + j * kWarp >= ke) break;
        float wf[kPerWord];
        unpack(wv[j], wf);
        CUTE_UNROLL
        for (int m = 0; m < MT; ++m) {
          CUTE_UNROLL
          for (int e = 0; e < kPerWord; ++e) acc[m][j] = fmaf(wf[e], xr[m][j][e], acc[m][j]);
        }
      }
    }
    float dot[MT];
    CUTE_UNROLL
    for (int m = 0; m < MT; ++m) {
      dot[m] = 0.0f;
      CUTE_UNROLL
      for (int j = 0; j < WPL; ++j) dot[m] += acc[m][j];
      dot[m] = group_sum(dot[m]);
    }
    if (lane == 0) {
      CUTE_UNROLL
      for (int m = 0; m < MT; ++m) partial[i & 1][warp][m] = dot[m];
    }
    __syncthreads();  // buffer b is consumed, partial[i & 1] complete
    if (threadIdx.x == 0 && i + s.ring < stages) issue(i + s.ring);
    if (warp != 0) continue;

    bool const live = lane < rps * MT && er < rows && em < p.m;
    float sum = 0.0f;
    if (live) {
      for (int q = 0; q < s.warps_per_row; ++q) sum += partial[i & 1][er * s.warps_per_row + q][em];
    }
    float token_scale = scale[0];  // scale[em], without indexing a register array
    CUTE_UNROLL
    for (int m = 1; m < MT; ++m) token_scale = em == m ? scale[m] : token_scale;
    float const y = round_bf16(sum * token_scale);
    int const row = row0 + er;
    if constexpr (E == Epilogue::swiglu) {  // rows 2j, 2j + 1: gate_j, up_j (N even, r0 even)
      if (rps == 1) {
        if ((row & 1) == 0) {
          gate = y;
        } else if (live) {
          store_swiglu(p, em, row / 2, gate, y);
        }
      } else {
        float const up = __shfl_down_sync(0xffffffffu, y, MT);
        if (live && (er & 1) == 0) store_swiglu(p, em, row / 2, y, up);
      }
    } else if constexpr (E == Epilogue::residual) {
      float const residual = residual_next;
      residual_next = residual_of(i + 1);
      if (live) p.out[static_cast<size_t>(em) * p.n + row] = __float2bfloat16_rn(y + residual);
    } else if (live) {
      store_row<E>(p, em, row, y);
      if constexpr (picks_tokens(E)) {
        key = max(key, argmax_key(y, row));
        not_finite |= !isfinite(y);
      }
    }
  }

  if constexpr (picks_tokens(E)) {
    if (warp == 0) {  // fold the lanes of each token
      for (int off = kWarp / 2; off >= MT; off /= 2)
        key = max(key, __shfl_xor_sync(0xffffffffu, key, off));
      if (lane < MT) best[lane] = key;
    }
    finish_argmax<E>(p, best, __syncthreads_or(not_finite));  // a barrier: best[] is complete
  }
}

}  // namespace gemv
}  // namespace engine
}  // namespace tilefoundry

// ops::matmul's streamed tier on CUDA (sm_90 on): the GEMV of a decode step's one or two tokens,
// its weight rows streamed through a ring of shared-memory stages that bulk copies fill
// (bulk_copy.cuh), so that the CTA's loads stay in flight from its first stage to its last instead
// of draining at each group of rows, and no register holds a weight word in flight.
//
// It runs where the call was given a ring (matmul_ring: the streamed schedule of lower/matmul.py,
// CTAs of kWarps warps, the ring in the kernel's dynamic shared memory) and the tile is one the
// dot-product tier would take (a row of a and a column of b contiguous runs of K, matmul_impl.h)
// with K and the tile's width constants of the kernel, at most kMaxRows rows, and every run
// starting 16-byte aligned; anything else goes to the other tiers, which compute the same sums.
//
// The tile's weight rows (its columns of b; of a pair, b's and b1's of each column, one after the
// other) are cut into stages of R whole rows (Plan), one bulk copy a stage where the rows lie one
// after another in memory. The warps split a stage R ways by row and kWarps / R ways along K: each
// lane multiplies the same 16-byte words of every row it meets, so it reads the activation rows'
// words it needs once (normed, where a prologue norms) and keeps them in registers. Per stage:
// every warp waits for the stage's `full` barrier, sums its words' products, adds its lanes, leaves
// one sum per activation row in shared memory and arrives on the stage's `empty` barrier; warp 0
// waits for every warp's arrival, thread 0 refills the buffer with the stage a ring ahead, and
// warp 0 adds each row's slices and stores them through the epilogue (a pair whose two rows fall in
// different stages keeps the first's sum in a register). The other warps never wait for warp 0:
// they run ahead through the stages that have landed.
//
// Measured on the H200 (bench/engine_kernels.py, CUDA-graph medians, us): Qwen3-1.7B's gate/up +
// SwiGLU (48 MiB) 18.97 through the dot-product tier, 25.85 through this tier with a CTA barrier a
// stage (stages of 8 KiB, a ring of 40), 21.52 with the barriers above instead, 17.98 with stages
// of 16 KiB in a ring of 64 (96: 19.36); the engine's hand-written GEMV 14.88. q/k/v (16 MiB) and
// down (24 MiB) measured slower here than in the dot-product tier (9.78 against 7.19, 11.59
// against 9.19; o_proj, 8 MiB, faster in one run: 4.39 against 4.83), so the schedule streams
// weights of 32 MiB on. Inside the whole step (bench/engine_kernels.py's split, one run each): an
// L2 prefetch of the ring's first stages before the PDL wait moved the compiled step by less than
// the runs' spread (1636, 1654 us against 1645); the copies started before the wait, where the
// weights are ConstTensors (weights_constant, below), took gate/up's share of the step (the
// profiler's critical path, bench/engine_kernels.py) from 470 to 450 us; one activation row held in
// registers where the call has one (kRows, below: no second row of zeros multiplied) took gate/up's
// cost against the hand-written GEMV's from +87 to +18 us a step, and the kernel alone to 16.2 us
// (hand-written 14.8); summing the norm's squares from the words each lane holds instead of a
// warp's pass over the row was slower with two rows held (+140 us a step) and no faster with one.
#pragma once

#include <tilefoundry/runtime/common/aligned_ptr.h>
#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/matmul_impl.h>
#include <tilefoundry/runtime/common/ops/packed.h>
#include <tilefoundry/runtime/cuda/bulk_copy.cuh>
#include <tilefoundry/runtime/cuda/dependent_launch.cuh>

#include <cstdint>
#include <type_traits>

namespace tilefoundry {
namespace ops {
namespace matmul_stream {

/// Warps of a CTA the tier runs in (lower/matmul.py's CUDA_STREAM_THREADS: change both together).
constexpr int kWarps = 8;
/// Activation rows a tile may have (a decode step's one or two tokens).
constexpr int kMaxRows = 2;
/// Shared memory of one stage at most (a stage is one row where a row is larger).
constexpr int kStageBytes = 16 * 1024;
/// Buffers of a ring at most.
constexpr int kMaxRing = 8;
/// 16-byte words of K a lane keeps of each activation row, at most.
constexpr int kMaxWordsPerLane = 4;

/// The largest power of two at most `most` that divides `n` (1 at least).
TILEFOUNDRY_HOST_DEVICE constexpr int pow2_divisor(int n, int most) {
  int r = 1;
  while (r * 2 <= most && n % (r * 2) == 0) r *= 2;
  return r;
}

/// How a tile of `Rows` weight rows of K elements of E is streamed through a ring of `RingBytes`.
template <int K, int Rows, class E, int RingBytes>
struct Plan {
  static constexpr int kK = K;
  static constexpr int kPerWord = int(16 / sizeof(E));  // elements in a 16-byte word
  static constexpr int kRowBytes = K * int(sizeof(E));
  static constexpr int kWords = K / kPerWord;  // words in a row
  // Rows in a stage: the most (a power of two dividing Rows, at most kWarps) within kStageBytes.
  static constexpr int kStageRows =
      pow2_divisor(Rows, kRowBytes >= kStageBytes           ? 1
                         : kStageBytes / kRowBytes < kWarps ? kStageBytes / kRowBytes
                                                            : kWarps);
  static constexpr int kStage = kStageRows * kRowBytes;
  static constexpr int kStages = Rows / kStageRows;
  static constexpr int kRing = RingBytes / kStage < kMaxRing ? RingBytes / kStage : kMaxRing;
  static constexpr int kWarpsPerRow = kWarps / kStageRows;
  static constexpr int kSlice = (kWords + kWarpsPerRow - 1) / kWarpsPerRow;  // words a warp takes
  static constexpr int kPerLane = (kSlice + 31) / 32;
  /// Whether the tier takes such a tile at all.
  static constexpr bool kFits =
      K > 0 && Rows > 0 && K % kPerWord == 0 && kRing >= 2 && kPerLane <= kMaxWordsPerLane;
};

template <class T>
TILEFOUNDRY_HOST_DEVICE constexpr int static_extent() {
  if constexpr (cute::is_static<T>::value) {
    return int(T::value);
  } else {
    return 0;
  }
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
/// The tier's work on a tile it takes (P: its plan), once the operands' run-time extents and
/// addresses allow it; false, computing nothing, where they do not. kRows: the activation rows its
/// registers hold (apply() instantiates 1 for a call of one row, so a one-token step multiplies no
/// row of zeros, and kMaxRows for the others). kEarly: b (and b1) are weights no kernel writes
/// (weights_constant), so the ring's first copies start before the wait for the kernel before.
template <class Acc, class P, bool kPair, int kRows, bool kEarly, class A, class B, class B1,
          class Out, class Epi, class Pro>
__device__ __forceinline__ bool run(A const& a, B const& b, B1 const& b1, Out&& out, Epi const& epi,
                                    Pro const& pro, unsigned char* ring) {
  using E = matmul_impl::element_t<A>;
  using T = cute::remove_cvref_t<decltype(out(0, 0))>;
  constexpr int V = P::kPerWord;
  constexpr int kWarp = 32;
  int const rows = int(cute::size<0>(out));
  int const threads = int(program_dim<detail::dependent_level<TopologyScope::thread, Out>>());
  int const tid = int(program_id<detail::dependent_level<TopologyScope::thread, Out>>());
  E const* const pa = &a(0, 0);
  E const* const pb = &b(0, 0);
  int64_t const sa = int64_t(cute::stride<0>(a));
  int64_t const sb = int64_t(cute::stride<1>(b));
  E const* pb1 = pb;
  int64_t sb1 = sb;
  if constexpr (kPair) {
    pb1 = &b1(0, 0);
    sb1 = int64_t(cute::stride<1>(b1));
  }
  auto const aligned = [](auto const* p) { return detail::aligned_to<16>(p); };
  if (rows < 1 || rows > kRows || threads != kWarps * kWarp || !aligned(ring) || !aligned(pa) ||
      !aligned(pb) || !aligned(pb1) || (rows > 1 && sa % V != 0) || sb % V != 0 || sb1 % V != 0) {
    return false;
  }

  __shared__ __align__(8) uint64_t full[P::kRing];
  __shared__ __align__(8) uint64_t empty[P::kRing];
  __shared__ Acc partial[2 * P::kRing][kWarps][kRows];  // by stage, two rings' worth
  int const warp = tid / kWarp, lane = tid % kWarp;
  // Weight row r of the tile: column r of b, or of a pair column r / 2 of b (r even) or b1 (odd).
  auto const row_of = [&](int r) -> E const* {
    if constexpr (kPair) {
      return r % 2 == 0 ? pb + int64_t(r / 2) * sb : pb1 + int64_t(r / 2) * sb1;
    } else {
      return pb + int64_t(r) * sb;
    }
  };
  uint64_t policy = 0;
  if (tid == 0) {
    for (int s = 0; s < P::kRing; ++s) {
      bulk::init(&full[s], 1);
      bulk::init(&empty[s], kWarps);
    }
    bulk::fence_init();
    policy = bulk::evict_first_policy();
  }
  __syncthreads();
  // Whether the tile's rows lie one after another in memory (a weight read whole, or a pair's two
  // weights interleaved row by row): a stage is then one copy.
  bool dense = sb == P::kK;
  if constexpr (kPair) dense = pb1 == pb + P::kK && sb == 2 * P::kK && sb1 == 2 * P::kK;
  auto const issue = [&](int i) {  // thread 0: stage i into its buffer
    int const s = i % P::kRing;
    bulk::expect(&full[s], uint32_t(P::kStage));
    if (dense) {
      bulk::copy(ring + s * P::kStage, row_of(i * P::kStageRows), uint32_t(P::kStage), &full[s],
                 policy);
      return;
    }
    CUTE_UNROLL
    for (int j = 0; j < P::kStageRows; ++j) {
      bulk::copy(ring + s * P::kStage + j * P::kRowBytes, row_of(i * P::kStageRows + j),
                 uint32_t(P::kRowBytes), &full[s], policy);
    }
  };
  // The copies read b (and b1), which the kernel before may have written unless they are weights
  // (kEarly): then they start before the wait, their latency behind the kernel before's tail.
  // Measured on the H200 (Qwen3-1.7B, a decode step's CUDA graph, compiled slots): gate/up +
  // SwiGLU's copies so started, 1608 -> 1593 us a step at context 300, 1670 -> 1656 at 1024 (two
  // runs each).
  if constexpr (!kEarly) wait_for_earlier_kernels();
  if (tid == 0) {
    constexpr int kFirst = P::kRing < P::kStages ? P::kRing : P::kStages;
    for (int i = 0; i < kFirst; ++i) issue(i);
  }
  if constexpr (kEarly) wait_for_earlier_kernels();

  // This lane's words of each activation row (normed where the prologue norms), for the whole tile.
  int const rr = warp / P::kWarpsPerRow, part = warp % P::kWarpsPerRow;
  int const kb = part * P::kSlice;
  int const ke = kb + P::kSlice < P::kWords ? kb + P::kSlice : P::kWords;
  float xs[kRows][P::kPerLane][V];
  [[maybe_unused]] bool g_aligned = false;
  if constexpr (Pro::normalizes) g_aligned = pro.template groups_aligned<V>();
  CUTE_UNROLL
  for (int m = 0; m < kRows; ++m) {
    E const* const x = pa + int64_t(m) * sa;
    [[maybe_unused]] typename Pro::compute_type scale = 0;
    if constexpr (Pro::normalizes) {  // the whole row's sum of squares, in every warp
      if (m < rows) scale = matmul_impl::warp_row_scale<V>(pro, x, P::kK, lane, true);
    }
    CUTE_UNROLL
    for (int j = 0; j < P::kPerLane; ++j) {
      int const v = kb + lane + j * kWarp;
      CUTE_UNROLL
      for (int e = 0; e < V; ++e) xs[m][j][e] = 0.0f;
      if (m < rows && v < ke) {
        detail::load_group(x + v * V, xs[m][j]);
        if constexpr (Pro::normalizes) pro.group(xs[m][j], scale, int64_t(v) * V, g_aligned);
      }
    }
  }

  // Warp 0's lanes in the epilogue: row er of a stage, activation row em.
  int const er = lane / kRows, em = lane % kRows;
  [[maybe_unused]] Acc first =
      Acc(0);  // a pair over one-row stages: the first row's sum until its second's
  for (int i = 0; i < P::kStages; ++i) {
    int const s = i % P::kRing;
    bulk::wait(&full[s], uint32_t(i / P::kRing) & 1u);
    Acc acc[kRows][P::kPerLane];  // a chain per word: short dependent chains
    CUTE_UNROLL
    for (int m = 0; m < kRows; ++m) {
      CUTE_UNROLL
      for (int j = 0; j < P::kPerLane; ++j) acc[m][j] = Acc(0);
    }
    unsigned char const* const stage_row = ring + s * P::kStage + rr * P::kRowBytes;
    CUTE_UNROLL
    for (int j = 0; j < P::kPerLane; ++j) {
      int const v = kb + lane + j * kWarp;
      if (v < ke) {
        float ws[V];
        detail::unpack_word<E>(detail::load_word(stage_row + v * 16), ws);
        CUTE_UNROLL
        for (int m = 0; m < kRows; ++m) {
          CUTE_UNROLL
          for (int e = 0; e < V; ++e) acc[m][j] += Acc(xs[m][j][e]) * Acc(ws[e]);
        }
      }
    }
    CUTE_UNROLL
    for (int m = 0; m < kRows; ++m) {
      Acc sum = Acc(0);
      CUTE_UNROLL
      for (int j = 0; j < P::kPerLane; ++j) sum += acc[m][j];
      sum = matmul_impl::warp_sum(sum);
      if (lane == 0) partial[i % (2 * P::kRing)][warp][m] = sum;
    }
    __syncwarp();
    if (lane == 0) bulk::arrive(&empty[s]);  // this warp is done with the buffer; its sums are out
    if (warp != 0) continue;
    bulk::wait(&empty[s], uint32_t(i / P::kRing) & 1u);  // every warp's
    // The buffer refilled with the stage a ring ahead at once: its sums are next written a ring
    // after that, which warp 0 starts only past this stage's epilogue.
    if (lane == 0 && i + P::kRing < P::kStages) issue(i + P::kRing);
    bool const live = er < P::kStageRows && em < rows;
    Acc sum = Acc(0);
    if (live) {
      Acc const(&sums)[kWarps][kRows] = partial[i % (2 * P::kRing)];
      for (int q = 0; q < P::kWarpsPerRow; ++q) sum += sums[er * P::kWarpsPerRow + q][em];
    }
    int const r = i * P::kStageRows + er;  // the tile's weight row
    if constexpr (!kPair) {
      if (live) matmul_impl::store<T>(out, epi, em, r, sum, sum);
    } else if constexpr (P::kStageRows == 1) {
      if (r % 2 == 0) {
        first = sum;
      } else if (live) {
        matmul_impl::store<T>(out, epi, em, r / 2, first, sum);
      }
    } else {
      Acc const second = __shfl_down_sync(0xffffffffu, sum, kRows);  // row er + 1's
      if (live && er % 2 == 0) matmul_impl::store<T>(out, epi, em, r / 2, sum, second);
    }
  }
  return true;
}
#endif

/// Whether a and b (and b1, of a pair) are operands of the dot-product tier (matmul_impl.h).
template <class A, class B, class B1>
TILEFOUNDRY_HOST_DEVICE constexpr bool dot_operands() {
  if constexpr (matmul_impl::is_pair_v<B1>) {
    return matmul_impl::dot_tier_v<A, B> && matmul_impl::dot_tier_v<A, B1>;
  } else {
    return matmul_impl::dot_tier_v<A, B>;
  }
}

/// The streamed tier: computes the tile through `ring` (shared memory the schedule gave the call)
/// and returns true, or returns false, computing nothing, where the tile is not one it takes (the
/// caller then runs matmul_impl's tiers, which wait for the kernel before themselves). Where it
/// computes the tile, it waits for the kernel before (wait_for_earlier_kernels) before any read.
template <class Acc, bool kEarly, class A, class B, class B1, class Out, class Epi, class Pro,
          class Ring>
__device__ bool apply(A const& a, B const& b, B1 const& b1, Out&& out, Epi const& epi,
                      Pro const& pro, Ring const& ring) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using E = matmul_impl::element_t<A>;
  constexpr bool kPair = matmul_impl::is_pair_v<B1>;
  constexpr int K = static_extent<decltype(cute::size<1>(a))>();
  constexpr int kWidth = static_extent<decltype(cute::size<1>(out))>();
  constexpr bool kDot = dot_operands<A, B, B1>();
  using R = cute::remove_cvref_t<decltype(ring(0))>;
  constexpr int kRingBytes = static_extent<decltype(cute::size(ring))>() * int(sizeof(R));
  if constexpr (!kDot || K == 0 || kWidth == 0 || kRingBytes == 0) {
    return false;
  } else {
    using P = Plan<K, kPair ? 2 * kWidth : kWidth, E, kRingBytes>;
    if constexpr (!P::kFits) {
      return false;
    } else {
      unsigned char* const r = reinterpret_cast<unsigned char*>(&ring(0));
      if (int(cute::size<0>(out)) == 1) {
        return run<Acc, P, kPair, 1, kEarly>(a, b, b1, out, epi, pro, r);
      }
      return run<Acc, P, kPair, kMaxRows, kEarly>(a, b, b1, out, epi, pro, r);
    }
  }
#else
  return false;
#endif
}

}  // namespace matmul_stream

/// What a streamed matmul knows of its weights: that a kernel may write them (weights_written, the
/// default: its copies start after the wait for the kernel before), or that they are ConstTensor
/// parameters no kernel writes (weights_constant: the copies start before that wait).
struct weights_written {};
struct weights_constant {};

/// The shared memory a matmul of the streamed schedule streams its weight rows through (a static
/// array of the kernel's, which codegen wraps in this so that the call's overload takes it), and
/// what the call knows of its weights (weights_written or weights_constant).
template <class Tensor, class Weights = weights_written>
struct matmul_ring {
  Tensor smem;
  static constexpr bool constant_weights = std::is_same<Weights, weights_constant>::value;
};

template <class Weights = weights_written, class Tensor>
__device__ matmul_ring<Tensor, Weights> make_matmul_ring(Tensor const& smem) {
  return matmul_ring<Tensor, Weights>{smem};
}
}  // namespace ops
}  // namespace tilefoundry

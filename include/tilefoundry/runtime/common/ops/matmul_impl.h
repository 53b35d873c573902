// matmul_impl::apply: the body of ops::matmul, out = a @ b over one CTA's tile, accumulated in Acc.
// Both targets' entries run it, so that the two cannot drift apart in order or rounding.
//
// Each element of the tile is a dot product over K accumulated in Acc and rounded once into out's
// element type, as the evaluator computes torch.matmul in the accumulate dtype and casts the
// result. Two tiers, chosen from the operands' layouts: contiguous runs of K (the decode step's
// GEMV: a weight (N, K) read as its transpose) take the dot-product tier; any other strides the
// general one. A prologue (matmul_prologue.h) says how the first operand is read: as stored, or
// as the rms_norm of its rows, each row's scale found first (a sum of its squares), each element
// normed as it is read.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/host_buffer.h>
#include <tilefoundry/runtime/common/numeric.h>
#include <tilefoundry/runtime/common/ops/matmul_blocked.h>
#include <tilefoundry/runtime/common/ops/matmul_epilogue.h>
#include <tilefoundry/runtime/common/ops/matmul_prologue.h>
#include <tilefoundry/runtime/common/ops/packed.h>
#include <tilefoundry/runtime/common/topology.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

namespace tilefoundry {
namespace ops {
namespace matmul_impl {

using ::tilefoundry::detail::unit_stride_v;

// Rows of a tile from which the CPU's dot-product tier hands the tile to the blocked tier
// (matmul_blocked.h); fewer rows stream the weight through dot products, four weight rows against
// four activation rows at a time (dot_block). Measured on SmolLM2-135M's projections (f32, two
// threads of a CPU with AVX-512, ms, dot products / blocked tier): 16 rows q/k/v 0.16 / 0.30,
// gate/up 0.63 / 1.16, down 0.22 / 0.46; 64 rows q/k/v 0.61 / 0.50, gate/up 2.23 / 1.58; at 32
// rows the two are even (on an AVX2 machine the blocked tier won from about 128 rows).
constexpr int64_t kBlockedRows = 32;

template <class T>
using element_t = cute::remove_cvref_t<decltype(std::declval<T const&>()(0, 0))>;

/// Group u of V floats in a flat array of lanes, as the array load_group fills.
template <int V, int N>
TILEFOUNDRY_DEVICE float (&group_at(float (&lanes)[N], int u))[V] {
  return *reinterpret_cast<float(*)[V]>(lanes + u * V);
}

#if !defined(__CUDA_ARCH__)
/// N partial sums in Acc, one lane each, added lane by lane: for float a vector of the compiler's
/// (its adds one instruction per register of lanes, whatever the instruction set), else an array.
template <class Acc, int N>
struct Lanes {
  Acc v[N];
  /// The N elements at p (groups of a packed type, read as bytes: any alignment), as Acc.
  template <class E>
  static Lanes load(E const* p) {
    constexpr int V = int(16 / sizeof(E));
    float xs[N];
    for (int u = 0; u < N / V; ++u) detail::load_group(p + u * V, group_at<V>(xs, u));
    Lanes out;
    for (int i = 0; i < N; ++i) out.v[i] = Acc(xs[i]);
    return out;
  }
  void add_product(Lanes const& a, Lanes const& b) {
    for (int i = 0; i < N; ++i) v[i] += a.v[i] * b.v[i];
  }
  Acc sum() const {
    Acc s = Acc(0);
    for (int i = 0; i < N; ++i) s += v[i];
    return s;
  }
};
template <>
struct Lanes<float, 16> {
  static constexpr int N = 16;
  typedef float vector_t __attribute__((vector_size(N * sizeof(float))));
  vector_t v;
  /// The N elements at p as floats: f32 copied, bf16 widened (its bits are a float's top half),
  /// f16 converted group by group.
  template <class E>
  static Lanes load(E const* p) {
    Lanes out;
    if constexpr (detail::packed_kind_v<E> == detail::packed_kind::f32) {
      std::memcpy(&out.v, p, sizeof out.v);
    } else if constexpr (detail::packed_kind_v<E> == detail::packed_kind::bf16) {
      typedef std::uint16_t halves_t __attribute__((vector_size(N * 2)));
      typedef std::uint32_t words_t __attribute__((vector_size(N * 4)));
      halves_t h;
      std::memcpy(&h, p, sizeof h);
      words_t const w = __builtin_convertvector(h, words_t) << 16;
      std::memcpy(&out.v, &w, sizeof out.v);
    } else {
      constexpr int V = int(16 / sizeof(E));
      float xs[N];
      for (int u = 0; u < N / V; ++u) detail::load_group(p + u * V, group_at<V>(xs, u));
      std::memcpy(&out.v, xs, sizeof out.v);
    }
    return out;
  }
  void add_product(Lanes const& a, Lanes const& b) { v += a.v * b.v; }
  float sum() const {
    float s = 0.0f;
    for (int i = 0; i < N; ++i) s += v[i];
    return s;
  }
};
#endif

#if !defined(__CUDA_ARCH__)
/// R activation rows (x) against C weight rows (w), each of `depth` contiguous elements: the R x C
/// dot products, each in 16 independent partial sums (Lanes: vector lanes, loads of any
/// alignment), the rest of K past the last whole run of 16 added after; store(r, c, sum) takes
/// each. `ahead` rows (n_ahead of them) are prefetched along with the pass.
template <class Acc, int R, int C, class E, class Store>
inline void dot_block(E const* const (&x)[R], E const* const (&w)[C], int64_t depth,
                      E const* const (&ahead)[C], int n_ahead, Store const& store) {
  constexpr int L = 16;
  Lanes<Acc, L> part[R][C] = {};
  int64_t const whole = depth - depth % L;  // K in whole runs of L; the rest, fewer than L, after
  for (int64_t k = 0; k < whole; k += L) {
    for (int j = 0; j < n_ahead; ++j) __builtin_prefetch(ahead[j] + k);
    Lanes<Acc, L> wv[C];
    for (int c = 0; c < C; ++c) wv[c] = Lanes<Acc, L>::load(w[c] + k);
    for (int r = 0; r < R; ++r) {
      Lanes<Acc, L> const xv = Lanes<Acc, L>::load(x[r] + k);
      for (int c = 0; c < C; ++c) part[r][c].add_product(xv, wv[c]);
    }
  }
  Acc tail[R][C] = {};
  for (int64_t k = whole; k < depth; ++k) {
    for (int r = 0; r < R; ++r) {
      Acc const xk = detail::convert<Acc>(x[r][k]);
      for (int c = 0; c < C; ++c) tail[r][c] += xk * detail::convert<Acc>(w[c][k]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) store(r, c, part[r][c].sum() + tail[r][c]);
  }
}
#endif

/// The second weight of a matmul with one (a single product, not a pair).
struct no_second {};

/// Whether B1 is a second weight: a pair of products sharing the first operand, out(m, n) =
/// epi(m, n, (a @ b)(m, n), (a @ b1)(m, n)) (silu(gate) * up).
template <class B1>
constexpr bool is_pair_v = !std::is_same_v<B1, no_second>;

/// Stores the element (m, n) of a tile: the epilogue of its dot product, or of the pair's two.
template <class T, class Out, class Epi, class Acc>
TILEFOUNDRY_DEVICE void store(Out&& out, Epi const& epi, int64_t m, int64_t n, Acc first,
                              Acc second) {
  if constexpr (std::is_invocable_v<Epi const&, int64_t, int64_t, Acc, Acc>) {
    out(m, n) = detail::convert<T>(epi(m, n, first, second));
  } else {
    out(m, n) = detail::convert<T>(epi(m, n, first));
  }
}

/// The epilogue of a matmul with none: each dot product stored as it is (rounded into out's type).
struct store_as_is {
  template <class V>
  TILEFOUNDRY_DEVICE V operator()(int64_t, int64_t, V v) const {
    return v;
  }
};

// The dot-product tier applies where a row of a and a column of b are both contiguous in memory (a
// weight stored (N, K) read as its transpose, the activations row-major) and hold one packed type.
template <class A, class B>
constexpr bool dot_tier_v = unit_stride_v<1, A>&& unit_stride_v<0, B>&&
    std::is_same_v<element_t<A>, element_t<B>>&& detail::is_packed_v<element_t<A>>;

/// The general tier: any strides. Element i of the tile goes to thread i mod threads, each a whole
/// dot product over K (two, of a pair).
template <class Acc, class A, class B, class B1, class Out, class Epi, class Pro>
TILEFOUNDRY_DEVICE void general(A const& a, B const& b, B1 const& b1, Out&& out, Epi const& epi,
                                Pro const& pro) {
  using T = cute::remove_cvref_t<decltype(out(0, 0))>;
  int64_t const rows = int64_t(cute::size<0>(out));
  int64_t const cols = int64_t(cute::size<1>(out));
  int64_t const depth = int64_t(cute::size<1>(a));
  int64_t const threads =
      int64_t(program_dim<detail::dependent_level<TopologyScope::thread, Out>>());
  for (int64_t i = int64_t(program_id<detail::dependent_level<TopologyScope::thread, Out>>());
       i < rows * cols; i += threads) {
    int64_t const m = i / cols;
    int64_t const n = i - m * cols;
    Acc acc = Acc(0), acc1 = Acc(0);
    [[maybe_unused]] typename Pro::compute_type scale = 0;
    if constexpr (Pro::normalizes) {
      typename Pro::compute_type sum = 0;
      for (int64_t k = 0; k < depth; ++k) sum += pro.square(a(m, k));
      scale = pro.scale(sum, depth);
    }
    for (int64_t k = 0; k < depth; ++k) {
      Acc ak;
      if constexpr (Pro::normalizes) {
        ak = detail::convert<Acc>(pro(a(m, k), scale, k));
      } else {
        ak = detail::convert<Acc>(a(m, k));
      }
      acc += ak * detail::convert<Acc>(b(k, n));
      if constexpr (is_pair_v<B1>) acc1 += ak * detail::convert<Acc>(b1(k, n));
    }
    store<T>(out, epi, m, n, acc, acc1);
  }
}

#if defined(__CUDA_ARCH__)
#ifndef TILEFOUNDRY_MATMUL_DOT_PASSES
#define TILEFOUNDRY_MATMUL_DOT_PASSES 2
#endif
/// Passes of a warp's K loop whose loads the dot-product tier issues together (warp_dots). H200,
/// the compiled set's GEMVs alone at Qwen3-1.7B's decode shapes (CUDA-graph replays, us), the loop
/// before (a pass's loads just before its products, the norm weight's alignment a branch inside
/// it) / 2 passes / 4: q/k/v with its norm 9.27 / 7.37 / 7.32, o_proj + residual 4.80 / 4.90 /
/// 5.63, gate/up + SwiGLU 19.19 / 18.90 / 19.40, down + residual 10.07 / 9.33 / 9.08, lm_head
/// 157.6 / 159.0 / 163.6.
constexpr int kDotPasses = TILEFOUNDRY_MATMUL_DOT_PASSES;
static_assert(kDotPasses >= 1, "TILEFOUNDRY_MATMUL_DOT_PASSES: at least one pass");

/// One warp's share of C dot products (CUDA dot-product tier): x against the weight rows of the
/// output columns n0 .. n0 + width - 1 (C of pb's, sb apart; of a pair, C / 2 of pb's, then the
/// same of pb1's), over the runs of 32 lanes' K groups run, run + 32 S, ... (the warp's slice of K
/// when S warps split it; S = 0: `split` warps, known only at run time), each lane's sums added
/// into acc. Inlined, so that acc stays in registers and a constant stride folds into the loads'
/// offsets.
template <int64_t S, int C, int V, bool kPair, class Acc, class E, class Pro, class Scale>
__device__ __forceinline__ void warp_dots(E const* x, E const* pb, int64_t sb, E const* pb1,
                                          int64_t sb1, int64_t n0, int width, int64_t depth,
                                          int64_t run, bool grouped, Pro const& pro, Scale scale,
                                          bool g_aligned, int split, Acc (&acc)[C]) {
  constexpr int64_t kWarp = 32;
  int64_t const warps = S > 0 ? S : split;
  constexpr int kOut = kPair ? C / 2 : C;
  // Weight row c (c a constant of the unrolled loops): b's column n0 + c, or b1's n0 + c - kOut.
  auto const row = [&](int c) {
    return c < kOut ? pb + (n0 + c) * sb : pb1 + (n0 + c - kOut) * sb1;
  };
  // The rows the grouped loop loads: a row past the tile's width (its sum never stored) reads the
  // group's first row again, so that every load is unconditional.
  auto const loaded = [&](int c) { return c % kOut < width ? row(c) : row(c < kOut ? 0 : kOut); };
  if (grouped) {
    // The K loop, its norm weight's alignment a constant (a branch inside the loop would split it
    // into blocks, and ptxas then sinks each load into the block of its first use: one in flight).
    auto const loop = [&](auto g_words) {
      // The products of one pass: x's group k (normed where the prologue norms) against the C
      // rows' (all C of them: a row past the width reads a loaded row again, its sum never stored).
      auto const pass = [&](detail::word4 const& xw, detail::word4 const(&ww)[C], int64_t k) {
        float xs[V];
        detail::unpack_word<E>(xw, xs);
        if constexpr (Pro::normalizes) pro.group(xs, scale, k, decltype(g_words)::value);
        CUTE_UNROLL
        for (int c = 0; c < C; ++c) {
          float ws[V];
          detail::unpack_word<E>(ww[c], ws);
          CUTE_UNROLL
          for (int i = 0; i < V; ++i) acc[c] += Acc(xs[i]) * Acc(ws[i]);
        }
      };
      // kDotPasses passes' words loaded before any of their products: C x kDotPasses 16-byte
      // loads of weight rows in flight a lane.
      int64_t const step = warps * kWarp * V;
      int64_t k = run * V;
      for (; k + (kDotPasses - 1) * step < depth; k += kDotPasses * step) {
        detail::word4 xw[kDotPasses], ww[kDotPasses][C];
        CUTE_UNROLL
        for (int p = 0; p < kDotPasses; ++p) {
          xw[p] = detail::load_word(x + k + p * step);
          CUTE_UNROLL
          for (int c = 0; c < C; ++c) {
            ww[p][c] = detail::load_word_streamed(loaded(c) + k + p * step);
          }
        }
        CUTE_UNROLL
        for (int p = 0; p < kDotPasses; ++p) pass(xw[p], ww[p], k + p * step);
      }
      for (; k < depth; k += step) {  // fewer than kDotPasses passes left
        detail::word4 ww[C];
        CUTE_UNROLL
        for (int c = 0; c < C; ++c) ww[c] = detail::load_word_streamed(loaded(c) + k);
        pass(detail::load_word(x + k), ww, k);
      }
    };
    if (Pro::normalizes && g_aligned) {
      loop(std::true_type{});
    } else {
      loop(std::false_type{});
    }
  } else {
    for (int64_t k = run; k < depth; k += warps * kWarp) {
      Acc xk;
      if constexpr (Pro::normalizes) {
        xk = detail::convert<Acc>(pro(x[k], scale, k));
      } else {
        xk = detail::convert<Acc>(x[k]);
      }
      CUTE_UNROLL
      for (int c = 0; c < C; ++c) {
        if (c % kOut < width) acc[c] += xk * detail::convert<Acc>(row(c)[k]);
      }
    }
  }
}

/// Warps of the CTA the compiler's matmul schedule launches (lower/matmul.py, CUDA_MATMUL_THREADS):
/// at that size and a static tile width the K split below is a constant of the kernel (dot).
constexpr int kScheduleWarps = 4;

/// The K split of `groups` column groups over `warps` warps: the largest power of two (at most
/// 32) whose split * groups warps fit (dot).
TILEFOUNDRY_HOST_DEVICE constexpr int split_of(int groups, int warps) {
  int split = 1;
  while (split < 32 && split * 2 * groups <= warps) split *= 2;
  return split;
}

/// The sum of x over a warp's 32 lanes, in every lane (a butterfly of shuffles).
template <class T>
__device__ __forceinline__ T warp_sum(T x) {
  CUTE_UNROLL
  for (int mask = 16; mask > 0; mask /= 2) x += __shfl_xor_sync(0xffffffffu, x, mask);
  return x;
}

/// A normalizing prologue's scale of the row of `depth` elements at x, by one warp (in every lane):
/// its sum of squares, 16 bytes (V elements) a lane at a time where `grouped` (a few loads in
/// flight, not one element per trip), element by element otherwise.
template <int V, class Pro, class E>
__device__ __forceinline__ typename Pro::compute_type warp_row_scale(Pro const& pro, E const* x,
                                                                     int64_t depth, int lane,
                                                                     bool grouped) {
  constexpr int kWarp = 32;
  typename Pro::compute_type sum = 0;
  if (grouped) {
    for (int64_t k = int64_t(lane) * V; k < depth; k += kWarp * V) {
      float xs[V];
      detail::load_group(x + k, xs);
      CUTE_UNROLL
      for (int i = 0; i < V; ++i) sum += pro.square(xs[i]);
    }
  } else {
    for (int64_t k = lane; k < depth; k += kWarp) sum += pro.square(x[k]);
  }
  return pro.scale(warp_sum(sum), depth);
}
#endif

/// The dot-product tier (the GEMV of a decode step, and more rows): each output element one dot
/// product of two contiguous runs of K (two, of a pair: b and b1, the same run of a against each).
/// On CUDA a warp takes C = 4 weight rows at once (4 columns of b; of a pair, 2 columns of b and
/// the same 2 of b1), its lanes 16-byte groups of K (where the runs' starts and K allow; element by
/// element otherwise), the C rows' loads in flight together, each dot product combined by
/// shuffles; the few activation rows are read one after another against the weight rows it has
/// just loaded (a normalizing prologue: each warp first sums the row's squares, then norms each
/// group as it reads it); a tile of fewer columns than its warps take splits K among the warps of
/// a column group, their sums added in shared memory. On the CPU the one thread takes every
/// element, its dot product in independent partial sums over groups, the weight's next rows
/// prefetched; from kBlockedRows rows on, the blocked tier (matmul_blocked.h) takes the tile (a
/// normalizing prologue: the tile's rows normed once, first; a pair: b's products kept in floats
/// until b1's meet them).
template <class Acc, class A, class B, class B1, class Out, class Epi, class Pro>
TILEFOUNDRY_DEVICE void dot(A const& a, B const& b, B1 const& b1, Out&& out, Epi const& epi,
                            Pro const& pro) {
  using T = cute::remove_cvref_t<decltype(out(0, 0))>;
  using E = element_t<A>;
  constexpr bool kPair = is_pair_v<B1>;
  [[maybe_unused]] constexpr int V = int(16 / sizeof(E));  // elements in 16 bytes (CUDA groups)
  constexpr int C = 4;  // weight rows read at once: their loads in flight together
  constexpr int kOut = kPair ? C / 2 : C;  // output columns of a group of C weight rows
  int64_t const rows = int64_t(cute::size<0>(out));
  int64_t const cols = int64_t(cute::size<1>(out));
  int64_t const depth = int64_t(cute::size<1>(a));
  E const* pa = &a(0, 0);
  E const* const pb = &b(0, 0);
  int64_t sa = int64_t(cute::stride<0>(a));
  int64_t const sb = int64_t(cute::stride<1>(b));
  E const* pb1 = pb;  // a pair's second weight
  int64_t sb1 = sb;
  if constexpr (kPair) {
    pb1 = &b1(0, 0);
    sb1 = int64_t(cute::stride<1>(b1));
  }
#if defined(__CUDA_ARCH__)
  bool const grouped = depth % V == 0 && sa % V == 0 && sb % V == 0 && sb1 % V == 0 &&
                       reinterpret_cast<std::uintptr_t>(pa) % 16 == 0 &&
                       reinterpret_cast<std::uintptr_t>(pb) % 16 == 0 &&
                       reinterpret_cast<std::uintptr_t>(pb1) % 16 == 0;
  constexpr int kWarp = 32;
  constexpr int kMaxWarps = 32;  // warps of a CTA of 1024 threads
  int64_t const tid = int64_t(program_id<detail::dependent_level<TopologyScope::thread, Out>>());
  int const warps = int(program_dim<detail::dependent_level<TopologyScope::thread, Out>>()) / kWarp;
  int const warp = int(tid / kWarp);
  int const lane = int(tid % kWarp);
  // An empty tile (a DimVar at 0: attention over an empty cache) has no column group to share out
  // (warp % groups below would divide by zero): nothing to compute, and every thread leaves
  // together.
  if (rows <= 0 || cols <= 0) return;
  // Fewer groups of columns than warps (a narrow tile, so that a short weight still spreads over
  // many CTAs): `split` warps share each group's K, warp w taking every split-th run of 32 lanes'
  // groups from run w / groups on, their sums met in shared memory. Warps past groups * split sit
  // the tile out (they still meet the barriers).
  int const groups = int((cols + kOut - 1) / kOut);
  int const split = split_of(groups, warps);  // a power of two: the K loop's stride a constant
  int const slice = split == 1 ? 0 : warp / groups;
  bool const active = slice < split;
  __shared__ Acc partial[kMaxWarps][C];
  [[maybe_unused]] bool g_aligned = false;  // a norm prologue's weight read 16 bytes at a time
  if constexpr (Pro::normalizes) g_aligned = grouped && pro.template groups_aligned<V>();
  int64_t const n_step = int64_t(split == 1 ? warps : groups) * kOut;
  for (int64_t n0 = int64_t(split == 1 ? warp : warp % groups) * kOut; n0 < cols; n0 += n_step) {
    int const width = cols - n0 < kOut ? int(cols - n0) : kOut;
    for (int64_t m = 0; m < rows; ++m) {
      E const* const x = pa + m * sa;
      Acc acc[C] = {};
      if (active) {
        [[maybe_unused]] typename Pro::compute_type scale = 0;
        if constexpr (Pro::normalizes) {  // the whole row's sum of squares, in every warp
          scale = warp_row_scale<V>(pro, x, depth, lane, grouped);
        }
        int64_t const run = int64_t(slice) * kWarp + lane;  // this lane's first run of K
        // The schedule's own CTA and a static tile width: the split a constant. Any other: the
        // split read at run time. (An instantiation for each of six splits made a gate/up +
        // SwiGLU GEMV's kernel 111 KB, 42 KB with one; with one, and the attention's tiers out of
        // line, a Qwen3-1.7B decode step on the H200 took 2049 -> 1752 us at context 1024.)
        bool done = false;
        if constexpr (cute::is_static<decltype(cute::size<1>(out))>::value) {
          constexpr int kGroups = (int(decltype(cute::size<1>(out))::value) + kOut - 1) / kOut;
          constexpr int kSplit = split_of(kGroups, kScheduleWarps);
          if (warps == kScheduleWarps) {
            warp_dots<kSplit, C, V, kPair>(x, pb, sb, pb1, sb1, n0, width, depth, run, grouped, pro,
                                           scale, g_aligned, kSplit, acc);
            done = true;
          }
        }
        if (!done) {
          warp_dots<0, C, V, kPair>(x, pb, sb, pb1, sb1, n0, width, depth, run, grouped, pro, scale,
                                    g_aligned, split, acc);
        }
      }
      CUTE_UNROLL
      for (int c = 0; c < C; ++c) acc[c] = warp_sum(acc[c]);
      if (split > 1) {  // the group's slices added in slice order, by its first warp
        if (lane == 0) {
          CUTE_UNROLL
          for (int c = 0; c < C; ++c) partial[warp][c] = acc[c];
        }
        __syncthreads();
        if (slice == 0) {
          CUTE_UNROLL
          for (int c = 0; c < C; ++c) {
            for (int s = 1; s < split; ++s) acc[c] += partial[warp + s * groups][c];
          }
        }
        __syncthreads();  // partial is free for the next row
      }
      if (slice == 0 && lane == 0) {
        CUTE_UNROLL
        for (int c = 0; c < kOut; ++c) {
          if (c < width) store<T>(out, epi, m, n0 + c, acc[c], acc[kPair ? c + kOut : c]);
        }
      }
    }
  }
#else
  // a normalizing prologue's rows, normed once for the whole tile
  host_buffer<E> normed(Pro::normalizes ? rows * depth : 0);
  if constexpr (Pro::normalizes) {
    using Cd = typename Pro::compute_type;
    constexpr int kLanes = 16;  // independent partial sums of a row's squares: vector lanes
    int64_t const whole = depth - depth % kLanes;
    for (int64_t m = 0; m < rows; ++m) {
      E const* const x = pa + m * sa;
      Cd lanes[kLanes] = {};
      for (int64_t k = 0; k < whole; k += kLanes) {
        for (int i = 0; i < kLanes; ++i) lanes[i] += pro.square(x[k + i]);
      }
      Cd sum = 0;
      for (int i = 0; i < kLanes; ++i) sum += lanes[i];
      for (int64_t k = whole; k < depth; ++k) sum += pro.square(x[k]);
      auto const scale = pro.scale(sum, depth);
      E* const row = normed.data() + m * depth;
      for (int64_t k = 0; k < depth; ++k) row[k] = pro(x[k], scale, k);
    }
    pa = normed.data();
    sa = depth;
  }
#if defined(TILEFOUNDRY_TARGET_CPU)
  if constexpr (std::is_same_v<Acc, float>) {
    if (rows >= kBlockedRows) {  // several rows: the blocked tier (matmul_blocked.h)
      if constexpr (kPair) {     // b's products first, in floats, then b1's meeting them
        host_buffer<float> first(rows * cols);
        matmul_blocked::tile(
            pa, sa, pb, sb, rows, cols, depth,
            [&](int64_t m, int64_t n, float acc) { first[size_t(m * cols + n)] = acc; });
        matmul_blocked::tile(pa, sa, pb1, sb1, rows, cols, depth,
                             [&](int64_t m, int64_t n, float acc) {
                               store<T>(out, epi, m, n, first[size_t(m * cols + n)], acc);
                             });
      } else if constexpr (std::is_same_v<Epi, store_as_is> &&
                           unit_stride_v<1,
                                         cute::remove_cvref_t<Out>>) {  // rows stored as they are
        matmul_blocked::tile(
            pa, sa, pb, sb, rows, cols, depth,
            matmul_blocked::plain_store<T>{&out(0, 0), int64_t(cute::stride<0>(out))});
      } else {
        matmul_blocked::tile(pa, sa, pb, sb, rows, cols, depth,
                             [&](int64_t m, int64_t n, float acc) {
                               out(m, n) = detail::convert<T>(epi(m, n, acc));
                             });
      }
      return;
    }
  }
#endif
  // C weight rows at once against kRows activation rows (then the rows left one at a time), each
  // dot product in independent partial sums (dot_block).
  constexpr int kRows = 4;
  // The C weight rows of the group of output columns from n0 (of a pair: b's, then b1's), and
  // which are inside the tile (bit c: row c).
  auto const group_rows = [&](int64_t n0, E const*(&w)[C]) {
    int const width = cols - n0 < kOut ? int(cols - n0) : kOut;
    unsigned live = 0;
    for (int c = 0; c < C; ++c) {
      int const col = c % kOut;
      bool const second = kPair && c >= kOut;
      w[c] = (second ? pb1 : pb) + (n0 + (col < width ? col : 0)) * (second ? sb1 : sb);
      live |= unsigned(col < width) << c;
    }
    return live;
  };
  for (int64_t n0 = 0; n0 < cols; n0 += kOut) {
    E const* w[C];
    unsigned const live = group_rows(n0, w);
    // The next rows, asked for while these are read: rows apart in memory (a strided view of an
    // interleaved weight) are each too short a stream for the hardware's prefetcher to learn.
    E const* ahead[C];
    int n_ahead = 0;
    if (n0 + kOut < cols) {
      unsigned const next = group_rows(n0 + kOut, ahead);
      while (n_ahead < C && (next >> n_ahead & 1u)) ++n_ahead;
      if constexpr (kPair) n_ahead = C;  // both halves (their dead rows repeat a live one)
    }
    int64_t m = 0;
    Acc firsts[kRows][kOut] = {};  // a pair's b products of the rows being stored
    auto const keep = [&](int r, int c, Acc acc) {
      if (!(live >> c & 1u)) return;
      if constexpr (kPair) {
        if (c < kOut) {
          firsts[r][c] = acc;
        } else {
          store<T>(out, epi, m + r, n0 + c - kOut, firsts[r][c - kOut], acc);
        }
      } else {
        store<T>(out, epi, m + r, n0 + c, acc, acc);
      }
    };
    for (; m + kRows <= rows; m += kRows) {
      E const* x[kRows];
      for (int r = 0; r < kRows; ++r) x[r] = pa + (m + r) * sa;
      dot_block<Acc>(x, w, depth, ahead, m == 0 ? n_ahead : 0, keep);
    }
    for (; m < rows; ++m) {
      E const* x[1] = {pa + m * sa};
      dot_block<Acc>(x, w, depth, ahead, m == 0 ? n_ahead : 0, keep);
    }
  }
#endif
}

/// out(m, n) = epi(m, n, sum_k pro(a)(m, k) * b(k, n)) for the tile's M x N elements: a is M x K,
/// b is K x N, the sum in Acc, epi's result rounded into out's type, pro how a's rows are read.
/// The tier comes from the operands' layouts: contiguous runs of K take the dot-product tier.
template <class Acc, class A, class B, class Out, class Epi, class Pro>
TILEFOUNDRY_DEVICE void apply(A const& a, B const& b, Out&& out, Epi const& epi, Pro const& pro) {
  if constexpr (dot_tier_v<A, B>) {
    dot<Acc>(a, b, no_second{}, out, epi, pro);
  } else {
    general<Acc>(a, b, no_second{}, out, epi, pro);
  }
}

/// ... of a pair of products sharing a: out(m, n) = epi(m, n, sum_k pro(a)(m, k) * b(k, n),
/// sum_k pro(a)(m, k) * b1(k, n)) (b and b1 of one shape: silu(x @ gate.T) * (x @ up.T)).
template <class Acc, class A, class B, class B1, class Out, class Epi, class Pro>
TILEFOUNDRY_DEVICE void apply_pair(A const& a, B const& b, B1 const& b1, Out&& out, Epi const& epi,
                                   Pro const& pro) {
  if constexpr (dot_tier_v<A, B> && dot_tier_v<A, B1>) {
    dot<Acc>(a, b, b1, out, epi, pro);
  } else {
    general<Acc>(a, b, b1, out, epi, pro);
  }
}

}  // namespace matmul_impl

/// The epilogue of a matmul with none (each result stored as it is), for the entry with a prologue.
using no_epilogue = matmul_impl::store_as_is;
}  // namespace ops
}  // namespace tilefoundry

// ops::attention_rows's tensor-core tier (sm_80 and later): a prompt's attention, many query rows
// against the keys, as a flash-style kernel on mma.sync (m16n8k16, 16-bit operands, float sums).
//
// A CTA of kThreads takes kBlockRows query rows of one key head (row r: token r / G of the query
// head r % G among the G that read that key head, as ops::attention numbers them), a warp 16 of
// them. It loads its rows of q into registers once (through shared memory), then runs over the keys
// the rows may see in tiles of kKeyTile: each tile of keys and values copied into shared memory
// (cp.async where rows are 16-byte words, else element by element), the scores of the warp's 16
// rows against the tile's keys from mma.sync, made scores as the evaluator makes them (rounded to
// T, scaled, rounded: attention_impl::score), the invisible ones -inf, an online softmax in
// registers (running maximum and sum a row, the weighted sum of value rows rescaled when the
// maximum grows), the tile's weights rounded to T and multiplied with the tile's values by
// mma.sync. The keys' copy for the next tile starts before this tile's values are read, the
// values' after. The output is the weighted sum over the sum, rounded to T.
//
// The keys a block's rows may see are bounded by the visibility's keys_of (the largest position
// of the block's tokens, for a causal cache), read on the device: a causal prompt's first blocks
// read few tiles.
//
// Measured on the H200 (2026-12-05, bench/compiled_prefill_attention_cuda.py: Qwen3-1.7B's 16 / 8
// heads of 128, bf16, a causal prompt from position 0, CUDA-graph medians) against SDPA's flash
// backend: 1024 tokens 67.2 us against 35.8 (0.53x), 8192 tokens 1605 us against 965 (0.60x, 171
// against 285 TFLOP/s). 166 registers, 34 KiB of shared memory: three CTAs an SM. A head_dim of
// 128 on sm_90a now takes attention_gmma.cuh's tier instead (the same blocks on wgmma); the rest
// (sm_80 and sm_89, other head_dims) this one.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/attention_impl.h>
#include <tilefoundry/runtime/cuda/ops/copy_async.cuh>

#include <cstdint>
#include <cstring>
#include <cuda_fp16.h>
#include <type_traits>

namespace tilefoundry {
namespace ops {
namespace attention_mma {

constexpr int kThreads = 128;  // four warps, 16 query rows each
constexpr int kBlockRows = 64;
constexpr int kKeyTile = 64;  // keys a tile

template <class T>
using elem_t = cute::remove_cvref_t<T>;

/// Whether the tier's static conditions hold: q (G x M x D), k (D x N), v (N x Dv) of one 16-bit
/// float type, D == Dv static, a multiple of 16 and at most 128, each row's elements contiguous
/// (attention_impl::contiguous_head_dim), sums in float.
template <class Acc, class Q, class K, class V>
TILEFOUNDRY_HOST_DEVICE constexpr bool tier() {
  using E = elem_t<decltype(std::declval<Q const&>()(0, 0, 0))>;
  constexpr int D = attention_impl::contiguous_head_dim<Q, K, V>();
  return std::is_same_v<Acc, float> &&
         (std::is_same_v<E, cute::bfloat16_t> || std::is_same_v<E, cute::half_t>)&&D > 0 &&
         D % 16 == 0 && D <= 128;
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define TILEFOUNDRY_ATTENTION_MMA 1
#else
#define TILEFOUNDRY_ATTENTION_MMA 0
#endif

#if TILEFOUNDRY_ATTENTION_MMA
/// d += a b for one m16n8k16 tile: a 16 x 16 (row-major fragments), b 16 x 8, d 16 x 8 floats.
template <class E>
__device__ __forceinline__ void mma(float (&d)[4], uint32_t const (&a)[4], uint32_t b0,
                                    uint32_t b1) {
  if constexpr (std::is_same_v<E, cute::bfloat16_t>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

/// Four 8 x 8 blocks of 16-bit elements from shared memory, transposed (ldmatrix .trans): lane l
/// gives the address of row l % 8 of block l / 8.
__device__ __forceinline__ void load_transposed(uint32_t (&r)[4], unsigned address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

/// Two floats rounded to E, packed in a 32-bit word (the first in the low half).
template <class E>
__device__ __forceinline__ uint32_t pack(float lo, float hi) {
  E const pair[2] = {E(lo), E(hi)};
  uint32_t word;
  memcpy(&word, pair, 4);
  return word;
}

/// Rows `step` elements apart from `first`: a key head's keys or values, whose whole tiles
/// fill_rows copies at constant steps.
template <class E>
struct strided_rows {
  E const* first;
  int64_t step;
  __device__ E const* operator()(int64_t i) const { return first + i * step; }
};
template <class Src>
constexpr bool is_strided_rows_v = false;
template <class E>
constexpr bool is_strided_rows_v<strided_rows<E>> = true;

/// Keys n0, n0 + 1, ... of k (D x N: key n's D values from &k(0, n)) as rows: strided_rows where
/// k's key mode has one stride, else key by key.
template <class K>
__device__ __forceinline__ auto key_rows(K const& k, int64_t n0) {
  if constexpr (cute::is_integral<decltype(cute::stride<1>(k.layout()))>::value) {
    return strided_rows<elem_t<decltype(k(0, 0))>>{&k(0, n0), int64_t(cute::stride<1>(k))};
  } else {
    return [&k, n0](int i) { return &k(0, n0 + i); };
  }
}

/// Values n0, n0 + 1, ... of v (N x Dv: value n's from &v(n, 0)) as rows, as key_rows.
template <class V>
__device__ __forceinline__ auto value_rows(V const& v, int64_t n0) {
  if constexpr (cute::is_integral<decltype(cute::stride<0>(v.layout()))>::value) {
    return strided_rows<elem_t<decltype(v(0, 0))>>{&v(n0, 0), int64_t(cute::stride<0>(v))};
  } else {
    return [&v, n0](int i) { return &v(n0 + i, 0); };
  }
}

/// Rows [0, count) of D elements each (row i at src(i), D contiguous) into the tile of kKeyTile
/// rows at `dst`, element (row, col) at dst + at(row, col) (8 elements from a multiple of 8 on
/// contiguous), zeros past `count`: 16-byte cp.async copies where `words` (the rows' starts are
/// 16-byte aligned), else element by element; one group of copies. Both tiers' tiles (fill).
template <int D, class E, class Src, class At>
__device__ __forceinline__ void fill_rows(E* dst, At const& at, Src const& src, int64_t count,
                                          bool words) {
  constexpr int W = 8;  // elements of a 16-byte word
  constexpr int kWords = D / W;
  if constexpr (is_strided_rows_v<Src> && kThreads % kWords == 0) {
    if (words && count >= kKeyTile) {  // a whole tile (every tile of a block but its last)
      // A thread's words share a column and lie kRowStep rows apart (the same row mod 8 in the
      // swizzle): unrolled, its addresses are one computation and constant steps, where the loop
      // below takes a division, a swizzle and a 64-bit product a word (about 45 instructions a
      // 16-byte copy in the wgmma tier's SASS).
      constexpr int kRowStep = kThreads / kWords;
      static_assert(kRowStep % 8 == 0,
                    "a thread's rows a multiple of the swizzle's 8-row period apart: each step the "
                    "same offset in the wgmma tier's tile, as in mma.sync's padded one");
      int const first = int(threadIdx.x) / kWords, col = int(threadIdx.x) % kWords * W;
      E const* const from = src(first) + col;
      int64_t const step = src.step * kRowStep;
      E* const to = dst + at(first, col);
      int const to_step = at(first + kRowStep, col) - at(first, col);
      CUTE_UNROLL
      for (int j = 0; j < kKeyTile / kRowStep; ++j) {
        ops::detail::cp_async_word<16>(to + j * to_step, from + j * step);
      }
      ops::cp_async_commit();
      return;
    }
  }
  for (int i = int(threadIdx.x); i < kKeyTile * kWords; i += kThreads) {
    int const row = i / kWords, col = i % kWords * W;
    E* const to = dst + at(row, col);
    if (row < count && words) {
      ops::detail::cp_async_word<16>(to, src(row) + col);
    } else {
      CUTE_UNROLL
      for (int e = 0; e < W; ++e) to[e] = row < count ? src(row)[col + e] : E(0.0f);
    }
  }
  ops::cp_async_commit();
}

/// Where element (row, col) of this tier's tiles lies: rows kStride elements apart.
template <int kStride>
__device__ __forceinline__ int padded(int row, int col) {
  return row * kStride + col;
}

/// ... into this tier's tile, rows kStride elements apart.
template <int D, int kStride, class E, class Src>
__device__ __forceinline__ void fill(E* dst, Src const& src, int64_t count, bool words) {
  fill_rows<D>(dst, padded<kStride>, src, count, words);
}

/// 2^x on the hardware's approximation, flushing a result below the smallest normal float to 0 (a
/// weight that small adds nothing to a sum of at least 1): one instruction, where exp2f checks
/// for such results first.
__device__ __forceinline__ float exp2_flushed(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/// Two floats rounded to E (bf16 or f16) by one conversion of the pair, and back to float: what
/// detail::convert does to each, in one instruction where it takes two.
template <class E>
__device__ __forceinline__ void round_pair(float& a, float& b) {
  uint32_t w;  // a's rounding in the low half, b's in the high
  if constexpr (std::is_same_v<E, cute::bfloat16_t>) {
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(b), "f"(a));
    a = __uint_as_float(w << 16);
    b = __uint_as_float(w & 0xffff0000u);
  } else {
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(b), "f"(a));
    __half2 h;
    memcpy(&h, &w, 4);
    float2 const f = __half22float2(h);
    a = f.x;
    b = f.y;
  }
}

/// Two dot products made scores as attention_impl::score makes each (rounded to E, scaled,
/// rounded), a pair of roundings at a time.
template <class E, class C>
__device__ __forceinline__ void score_pair(scores_times<C> s, float& a, float& b) {
  float const by = detail::convert<float>(detail::convert<E>(s.value));
  round_pair<E>(a, b);
  a *= by, b *= by;
  round_pair<E>(a, b);
}
template <class E, class C>
__device__ __forceinline__ void score_pair(scores_over<C> s, float& a, float& b) {
  float const by = detail::convert<float>(detail::convert<E>(s.value));
  round_pair<E>(a, b);
  a /= by, b /= by;
  round_pair<E>(a, b);
}
template <class E>
__device__ __forceinline__ void score_pair(scores_as_is, float& a, float& b) {
  round_pair<E>(a, b);
}

/// A tile of scores to weights in place, for the 16 rows of a warp (this thread's two: row g at
/// pos_a and g + 8 at pos_b), in the m16n8 accumulators' layout s[j][e] (keys n0 + 8 j + 2 t + e %
/// 2, row e / 2) that mma.sync and wgmma share: each score made as the evaluator makes it, the keys
/// past `here` and the invisible ones -inf; the running maximum mx and sum of each row updated, and
/// `scale` the factor the rows' weighted sums take for the new maximum (rescale); the weights
/// e^(score - maximum), summed in float. Where the visibility tells that every key of the tile is
/// visible to all the warp's rows (a causal prompt's tiles below the diagonal) no key is tested.
/// The scores are rounded two at a time (score_pair).
template <class E, class Scores, class Visible, class P>
__device__ __forceinline__ void weights(Scores scores, Visible const& visible,
                                        float (&s)[kKeyTile / 8][4], float (&mx)[2],
                                        float (&sum)[2], float (&scale)[2], int64_t n0,
                                        int64_t here, P pos_a, P pos_b) {
  int const t = int(threadIdx.x) % 4;
  int64_t const last = n0 + kKeyTile - 1;
  bool const whole = __all_sync(0xffffffffu, here == kKeyTile && visible.all(n0, last, pos_a) &&
                                                 visible.all(n0, last, pos_b));
  float top[2] = {mx[0], mx[1]};
  CUTE_UNROLL
  for (int j = 0; j < kKeyTile / 8; ++j) {
    score_pair<E>(scores, s[j][0], s[j][1]);
    score_pair<E>(scores, s[j][2], s[j][3]);
  }
  if (whole) {
    CUTE_UNROLL
    for (int j = 0; j < kKeyTile / 8; ++j) {
      CUTE_UNROLL
      for (int e = 0; e < 4; ++e) top[e / 2] = fmaxf(top[e / 2], s[j][e]);
    }
  } else {
    int const first = 2 * t, keys = int(here);  // here <= kKeyTile
    CUTE_UNROLL
    for (int j = 0; j < kKeyTile / 8; ++j) {
      CUTE_UNROLL
      for (int e = 0; e < 4; ++e) {
        int const i = first + j * 8 + (e & 1);  // the key's index in the tile
        bool const ok = i < keys && visible.test(visible.key(n0 + i), e < 2 ? pos_a : pos_b);
        float const sc = ok ? s[j][e] : -INFINITY;
        s[j][e] = sc;
        top[e / 2] = fmaxf(top[e / 2], sc);
      }
    }
  }
  constexpr float kLog2e = 1.4426950408889634f;
  float shift[2];
  CUTE_UNROLL
  for (int h = 0; h < 2; ++h) {
    top[h] = fmaxf(top[h], __shfl_xor_sync(0xffffffffu, top[h], 1));
    top[h] = fmaxf(top[h], __shfl_xor_sync(0xffffffffu, top[h], 2));
    scale[h] = mx[h] == -INFINITY ? 0.0f : exp2_flushed((mx[h] - top[h]) * kLog2e);
    mx[h] = top[h];
    sum[h] *= scale[h];
    shift[h] = mx[h] == -INFINITY ? 0.0f : -mx[h] * kLog2e;  // e^(s - mx) = 2^(s log2(e) + shift)
  }
  CUTE_UNROLL
  for (int j = 0; j < kKeyTile / 8; ++j) {
    CUTE_UNROLL
    for (int e = 0; e < 4; ++e) {
      s[j][e] = exp2_flushed(fmaf(s[j][e], kLog2e, shift[e / 2]));
      sum[e / 2] += s[j][e];
    }
  }
}

/// The rows' weighted sums o times the factors `weights` gave (skipped where no row's maximum grew
/// in the warp).
template <int kDTiles>
__device__ __forceinline__ void rescale(float (&o)[kDTiles][4], float const (&scale)[2]) {
  if (__any_sync(0xffffffffu, scale[0] != 1.0f || scale[1] != 1.0f)) {
    CUTE_UNROLL
    for (int j = 0; j < kDTiles; ++j) {
      o[j][0] *= scale[0], o[j][1] *= scale[0], o[j][2] *= scale[1], o[j][3] *= scale[1];
    }
  }
}

/// The tile's weights w rounded to E, as the A fragments of the values' product (k16 step j / 2).
template <class E>
__device__ __forceinline__ void pack_weights(float const (&w)[kKeyTile / 8][4],
                                             uint32_t (&pf)[kKeyTile / 16][4]) {
  CUTE_UNROLL
  for (int j = 0; j < kKeyTile / 8; ++j) {
    pf[j / 2][(j % 2) * 2 + 0] = pack<E>(w[j][0], w[j][1]);  // row g, keys 2t, 2t + 1
    pf[j / 2][(j % 2) * 2 + 1] = pack<E>(w[j][2], w[j][3]);  // row g + 8
  }
}

/// weights, rescale and pack_weights one after the other: a tile of scores s to the A fragments pf
/// of the values' product, the weighted sums o rescaled for the new maxima.
template <class E, int kDTiles, class Scores, class Visible, class P>
__device__ __forceinline__ void weigh(Scores scores, Visible const& visible,
                                      float (&s)[kKeyTile / 8][4], float (&o)[kDTiles][4],
                                      float (&mx)[2], float (&sum)[2],
                                      uint32_t (&pf)[kKeyTile / 16][4], int64_t n0, int64_t here,
                                      P pos_a, P pos_b) {
  float scale[2];
  weights<E>(scores, visible, s, mx, sum, scale, n0, here, pos_a, pos_b);
  rescale(o, scale);
  pack_weights<E>(s, pf);
}

/// The weighted sums o of this thread's rows ra and rb (of `total`; row r: query head r % groups of
/// token r / groups) over their sums, rounded to E, into out: each row's sum over its quad first
/// (0 / 0: NaN where a row saw no key).
template <class E, int kDTiles, class Out>
__device__ __forceinline__ void finish(float const (&o)[kDTiles][4], float (&sum)[2], Out& out,
                                       int64_t ra, int64_t rb, int64_t total, int64_t groups) {
  int const t = int(threadIdx.x) % 4;
  CUTE_UNROLL
  for (int h = 0; h < 2; ++h) {
    sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 1);
    sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 2);
  }
  CUTE_UNROLL
  for (int h = 0; h < 2; ++h) {
    int64_t const r = h == 0 ? ra : rb;
    if (r >= total) continue;
    int64_t const gi = r % groups, m = r / groups;
    CUTE_UNROLL
    for (int j = 0; j < kDTiles; ++j) {
      int const d = j * 8 + 2 * t;
      out(gi, m, d) = detail::convert<E>(o[j][2 * h] / sum[h]);
      out(gi, m, d + 1) = detail::convert<E>(o[j][2 * h + 1] / sum[h]);
    }
  }
}

/// What a thread of a block knows of the block's rows before its first tile: row r0 and the
/// rows_here after it of the key head's total = groups x M rows (row r: query head r % groups of
/// token r / groups), this thread's two, ra (row g of its warp's 16) and rb = ra + 8, and their
/// positions; the keys any of the block's rows may see (seen: the visibility's keys_of); whether
/// q's, the keys' and the values' rows can be copied in 16-byte words (words).
template <class P>
struct BlockRows {
  int64_t groups, total, r0, rows_here, ra, rb, seen;
  P pos_a, pos_b;
  bool words;

  /// Row i of the block's q (D contiguous elements).
  template <class Q>
  __device__ auto q_row(Q const& q, int i) const {
    int64_t const r = r0 + i;
    return &q(r % groups, r / groups, 0);
  }
};

/// The BlockRows of rows [r0, r0 + kBlockRows) of q (G x M x D) against the keys k (D x N) and
/// the values v (N x Dv), for this thread; both tiers start their blocks with it.
template <class Visible, class Q, class K, class V>
__device__ __forceinline__ BlockRows<typename Visible::position_t> block_rows(
    Visible const& visible, Q const& q, K const& k, V const& v, int64_t r0) {
  BlockRows<typename Visible::position_t> b;
  b.groups = int64_t(cute::size<0>(q));
  b.total = b.groups * int64_t(cute::size<1>(q));
  b.r0 = r0;
  b.rows_here = b.total - r0 < kBlockRows ? b.total - r0 : kBlockRows;
  int const warp = int(threadIdx.x) / 32, g = int(threadIdx.x) % 32 / 4;
  b.ra = r0 + warp * 16 + g;
  b.rb = b.ra + 8;
  b.pos_a = visible.query((b.ra < b.total ? b.ra : b.total - 1) / b.groups);
  b.pos_b = visible.query((b.rb < b.total ? b.rb : b.total - 1) / b.groups);
  b.seen = visible.keys_of(int64_t(cute::size<1>(k)), r0 / b.groups,
                           (r0 + b.rows_here - 1) / b.groups + 1);
  auto const aligned = [](void const* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  b.words = aligned(&q(0, 0, 0)) && aligned(&k(0, 0)) && aligned(&v(0, 0)) &&
            int64_t(cute::stride<0>(q)) % 8 == 0 && int64_t(cute::stride<1>(q)) % 8 == 0 &&
            int64_t(cute::stride<1>(k)) % 8 == 0 && int64_t(cute::stride<0>(v)) % 8 == 0;
  return b;
}

/// The block's rows of q (b) through the tile at `tile` (element (row, col) at tile + at(row, col))
/// into registers: qf[kk], this thread's A fragments of k16 step kk (rows row_a and row_a + 8 of
/// its warp's 16, mma.sync's m16n8k16 layout, which wgmma's register operand shares). The tile is
/// free again when this returns.
template <int D, class E, class At, class P, class Q>
__device__ __forceinline__ void load_q(E* tile, At const& at, BlockRows<P> const& b, Q const& q,
                                       uint32_t (&qf)[D / 16][4]) {
  fill_rows<D>(
      tile, at, [&](int i) { return b.q_row(q, i); }, b.rows_here, b.words);
  ops::cp_async_wait<0>();
  __syncthreads();
  int const row_a = int(b.ra - b.r0), t = int(threadIdx.x) % 4;
  auto const word = [&](int row, int col) {
    return *reinterpret_cast<uint32_t const*>(tile + at(row, col));
  };
  CUTE_UNROLL
  for (int kk = 0; kk < D / 16; ++kk) {
    qf[kk][0] = word(row_a, kk * 16 + 2 * t);
    qf[kk][1] = word(row_a + 8, kk * 16 + 2 * t);
    qf[kk][2] = word(row_a, kk * 16 + 8 + 2 * t);
    qf[kk][3] = word(row_a + 8, kk * 16 + 8 + 2 * t);
  }
  __syncthreads();
}

/// Rows [r0, r0 + kBlockRows) of a key head's G x M rows: softmax(scores(q k^T), visible) v into
/// out.
template <class Acc, class Scores, class Visible, class Q, class K, class V, class Out>
__device__ void block(Scores scores, Visible const& visible, Q const& q, K const& k, V const& v,
                      Out& out, int64_t r0) {
  using E = elem_t<decltype(q(0, 0, 0))>;
  constexpr int D = int(decltype(cute::shape<2>(q.layout()))::value);
  constexpr int kStride = D + 8;  // elements between rows of a tile: 16 bytes more, no conflicts
  constexpr int kDTiles = D / 8;  // n-tiles of the output, k-steps of the scores are D / 16
  __shared__ __align__(16) E sK[kKeyTile * kStride];
  __shared__ __align__(16) E sV[kKeyTile * kStride];

  auto const b = block_rows(visible, q, k, v, r0);
  int64_t const seen = b.seen;
  bool const words = b.words;
  int const g = int(threadIdx.x) % 32 / 4, t = int(threadIdx.x) % 4;

  uint32_t qf[D / 16][4];  // this block's rows of q, the A fragments of every k-step
  load_q<D>(sK, padded<kStride>, b, q, qf);  // sK is the keys' from here

  float o[kDTiles][4];
  CUTE_UNROLL
  for (int j = 0; j < kDTiles; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
  float mx[2] = {-INFINITY, -INFINITY}, sum[2] = {0.0f, 0.0f};

  auto const key_row = [&](int64_t n0) { return key_rows(k, n0); };
  auto const val_row = [&](int64_t n0) { return value_rows(v, n0); };
  // groups of copies in flight at the top of a tile: its keys', then its values'
  if (seen > 0) {
    fill<D, kStride>(sK, key_row(0), seen < kKeyTile ? seen : kKeyTile, words);
    fill<D, kStride>(sV, val_row(0), seen < kKeyTile ? seen : kKeyTile, words);
  }
  for (int64_t n0 = 0; n0 < seen; n0 += kKeyTile) {
    int64_t const here = seen - n0 < kKeyTile ? seen - n0 : kKeyTile;
    ops::cp_async_wait<1>();
    __syncthreads();  // the tile's keys are in
    float s[kKeyTile / 8][4];
    CUTE_UNROLL
    for (int j = 0; j < kKeyTile / 8; ++j) {
      s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
      E const* const kr = sK + (j * 8 + g) * kStride + 2 * t;
      CUTE_UNROLL
      for (int kk = 0; kk < D / 16; ++kk) {
        mma<E>(s[j], qf[kk], *reinterpret_cast<uint32_t const*>(kr + kk * 16),
               *reinterpret_cast<uint32_t const*>(kr + kk * 16 + 8));
      }
    }
    uint32_t pf[kKeyTile / 16][4];
    weigh<E>(scores, visible, s, o, mx, sum, pf, n0, here, b.pos_a, b.pos_b);
    __syncthreads();  // every warp's scores are read: sK takes the next tile's keys
    bool const more = n0 + kKeyTile < seen;
    int64_t const next = seen - n0 - kKeyTile < kKeyTile ? seen - n0 - kKeyTile : kKeyTile;
    if (more) {
      fill<D, kStride>(sK, key_row(n0 + kKeyTile), next, words);
    } else {
      ops::cp_async_commit();  // an empty group: the count below holds at the last tile too
    }
    ops::cp_async_wait<1>();  // this tile's values are in (the next keys may not be)
    __syncthreads();
    // o += weights @ values: B fragments of the values through ldmatrix .trans
    CUTE_UNROLL
    for (int kk = 0; kk < kKeyTile / 16; ++kk) {
      uint32_t a[4] = {pf[kk][0], pf[kk][1], pf[kk][2], pf[kk][3]};
      CUTE_UNROLL
      for (int j = 0; j < kDTiles; j += 2) {
        int const lane = int(threadIdx.x) % 32, block_id = lane / 8, r = lane % 8;
        E const* const at =
            sV + (kk * 16 + (block_id % 2) * 8 + r) * kStride + j * 8 + (block_id / 2) * 8;
        uint32_t b[4];
        load_transposed(b, unsigned(__cvta_generic_to_shared(at)));
        mma<E>(o[j], a, b[0], b[1]);
        mma<E>(o[j + 1], a, b[2], b[3]);
      }
    }
    __syncthreads();  // every warp's values are read: sV takes the next tile's
    if (more) fill<D, kStride>(sV, val_row(n0 + kKeyTile), next, words);
  }
  ops::cp_async_wait<0>();
  finish<E>(o, sum, out, b.ra, b.rb, b.total, b.groups);
}
#endif

}  // namespace attention_mma
}  // namespace ops
}  // namespace tilefoundry

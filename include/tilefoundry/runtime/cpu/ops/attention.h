// ops::attention and ops::attention_combine on the CPU target: attention_impl's general tier (which
// the CUDA target's entries run too), a tier of this target's own for rows contiguous along the
// head dimension (a prompt's attention over the KV cache), and attention_impl's combine a row at
// a time.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/host_buffer.h>
#include <tilefoundry/runtime/common/numeric.h>
#include <tilefoundry/runtime/common/ops/attention_impl.h>
#include <tilefoundry/runtime/common/ops/matmul_blocked.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace tilefoundry {
namespace ops {
namespace attention_cpu {

using ::tilefoundry::detail::unit_stride_v;

/// The CPU's tier where q's rows, the keys' and the values' rows (k's first axis, v's second) are
/// contiguous and the dot products accumulate in float: a flash-style loop of query rows against
/// tiles of keys. The slice's keys are copied once as floats, transposed in blocks of kBlock keys
/// (for each block and each of the head's dimensions, the block's kBlock values side by side: one
/// vector; float keys by 16 x 16 transposes, transposed_block). Query rows go kRows at a time, read
/// (as floats) at the first tile one of them sees. Against a tile of kTile keys: their dot
/// products, half a tile at a time, in 2 x kRows vectors of sums held in registers through the
/// loop over the dimensions (each key vector loaded once for the rows); then, a row at a time, its
/// kTile scores, their largest (one reduction a tile), their exponentials and their sum; then the
/// rows' weighted sums of the tile's value rows, two vectors of columns at a time in registers
/// across the keys (each value vector loaded once for the rows; a key a row does not see has weight
/// 0 and adds 0 * v, as the evaluator's probs @ v). Which keys each row sees is a byte a key, found
/// in a vectorised loop; a tile every row sees whole skips the select, one no row sees is skipped
/// (a causal prompt's later keys), and a row that sees no key of the slice stores only its maximum
/// (-inf) and sum. With many query rows (a prompt: at least kRows a slice) the slices are of rows,
/// each against every key (no slice's rows left waiting on a causal mask, one slice a row for the
/// combine); with few (a decode step), of keys. Value rows are read in place where they are float
/// rows, except a prompt's rows a multiple of 1024 floats apart (a head_dim of 128 over 8 key
/// heads: 64 rows of a tile on 64 pages), which are copied once. Products are fused multiply-adds
/// where the CPU has them. Each score is rounded and scaled as the general tier's
/// (attention_impl.h); the online softmax is the same sum, rescaled per tile instead of per key.
///
/// Measured on this project's 2-core machine, f32, two threads (bench/compiled_attention_cpu.py,
/// against SDPA told is_causal: its flash kernel, the engine's torch slot), 2026-12-05. Eight rows
/// against blocks of 16 keys, every score block reduced twice (largest, sum): SmolLM2-135M's (9
/// heads over 3, head_dim 64) at 500 / 1000 tokens 3.54 / 12.6 ms against 2.62 / 7.3 (0.74 /
/// 0.57x), Qwen3-1.7B's (16 over 8, 128) 0.88 / 12.0 / 42.2 ms at 128 / 500 / 1000 tokens. Tiles of
/// 64 keys: 2.9 / 10.4 and 12.6 / 49.3 ms (the value sums spilled to the stack: held as two arrays
/// of vectors, 2.3 / 8.3 and 9.7 / 36.6); Qwen3's value rows copied, 8.3 / 26.8; the combine a
/// slice's row at a time (vector lanes), 2.0 / 7.2 and 0.77 / 7.9 / 24.7 ms: 1.11-1.63x SDPA
/// is_causal at 64-1000 tokens; the buffers from host_buffer's pool, 2.1 / 7.2 and 0.85 / 6.5 /
/// 23.3 ms: 1.15-1.66x (bench/compiled_attention_cpu.json). A decode step (one or four
/// query rows over 128-4000 keys, slices of keys) took 0.60-0.91x the time of blocks of 16 keys,
/// but Qwen3's one row over 128 keys: 62 against 58 us.
template <class Q, class K, class V>
constexpr bool rows_tier_v = unit_stride_v<2, Q>&& unit_stride_v<0, K>&& unit_stride_v<1, V>;

/// x * y + acc in every lane of a vector, one rounding each where the CPU fuses multiply-add (the
/// build's -ffp-contract=off fuses nothing it is not asked to).
template <class Block>
inline Block fma_lanes(float x, Block const& y, Block const& acc) {
  constexpr int kLanes = int(sizeof(Block) / sizeof(float));
  Block out;
  TILEFOUNDRY_SIMD_LOOP
  for (int i = 0; i < kLanes; ++i) out[i] = detail::fma_(x, y[i], acc[i]);
  return out;
}

/// The largest of N values (N a power of two), NaN if one is: halves folded onto each other, so
/// that the compares run side by side (a chain of N compares otherwise, each waiting on the last).
/// Its own select rather than detail::nan_max's (the same value): SmolLM2-135M's attention at 500
/// tokens took 5.8-6.1 ms with it, 6.1-6.3 with nan_max (2 threads, this project's CPU machine).
/// Where the build has AVX-512 and N is whole vectors, the vectors' maxima stay in one register,
/// then that register's own reduction (the fold went through the stack: 3.94 -> 3.51 ms there).
template <int N>
inline float largest(float const (&x)[N]) {
#if defined(__AVX512F__)
  if constexpr (N % 16 == 0) {  // in registers: a test for NaN, then the vector's own reduction
    __m512 top = _mm512_loadu_ps(x);
    __mmask16 nan = _mm512_cmp_ps_mask(top, top, _CMP_UNORD_Q);
    for (int i = 16; i < N; i += 16) {
      __m512 const v = _mm512_loadu_ps(x + i);
      nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
      top = _mm512_max_ps(top, v);
    }
    if (nan != 0) return std::numeric_limits<float>::quiet_NaN();
    return _mm512_reduce_max_ps(top);
  }
#endif
  float t[N];
  std::memcpy(t, x, sizeof t);
  for (int w = N / 2; w >= 1; w /= 2) {
    for (int j = 0; j < w; ++j) {
      float const a = t[j], b = t[j + w];
      t[j] = a != a ? a : b != b ? b : a > b ? a : b;
    }
  }
  return t[0];
}

/// The sum of N values (N a power of two), halves folded onto each other as largest() folds them
/// (in registers where the build has AVX-512 and N is whole vectors).
template <int N>
inline float sum_of(float const (&x)[N]) {
#if defined(__AVX512F__)
  if constexpr (N % 16 == 0) {  // the same halves, in registers
    __m512 total = _mm512_loadu_ps(x);
    if constexpr (N >= 32) {
      __m512 half = _mm512_loadu_ps(x + N / 2);
      for (int i = 16; i < N / 2; i += 16) {
        total = _mm512_add_ps(total, _mm512_loadu_ps(x + i));
        half = _mm512_add_ps(half, _mm512_loadu_ps(x + N / 2 + i));
      }
      total = _mm512_add_ps(total, half);
    }
    return _mm512_reduce_add_ps(total);
  }
#endif
  float t[N];
  std::memcpy(t, x, sizeof t);
  for (int w = N / 2; w >= 1; w /= 2) {
    for (int j = 0; j < w; ++j) t[j] += t[j + w];
  }
  return t[0];
}

/// Keys [n, n + 16) of float rows (`stride` apart, `depth` values each) into a block of kt
/// (column[d][j] = dimension d of key n + j) by 16 x 16 transposes, where all 16 keys exist, depth
/// is whole vectors and the CPU has AVX-512 (true); else nothing (false: the caller copies them a
/// value at a time, for this key and the next).
template <class E, class Block>
inline bool transposed_block(E const* rows, int64_t stride, int64_t left, int64_t depth,
                             Block* column) {
#if TILEFOUNDRY_BF16_DOT
  if constexpr (std::is_same_v<E, float> && sizeof(Block) == 16 * sizeof(float)) {
    if (left < 16 || depth % 16 != 0 || !matmul_blocked::f32_wide::available()) return false;
    for (int64_t d0 = 0; d0 < depth; d0 += 16) {
      matmul_blocked::avx512::transpose16(rows + d0, stride, reinterpret_cast<float*>(column + d0),
                                          16);
    }
    return true;
  }
#endif
  (void)rows, (void)stride, (void)left, (void)depth, (void)column;
  return false;
}

template <class Scores, class Visible, class Q, class K, class V, class Part>
inline void rows(Scores scores, Visible visible, Q const& q, K const& k, V const& v, Part&& part,
                 int64_t split, int64_t splits) {
  using T = cute::remove_cvref_t<decltype(q(0, 0, 0))>;
  using P = typename Visible::position_t;
  constexpr int kRows = 8;    // query rows scored together
  constexpr int kBlock = 16;  // keys a vector of scores holds, and kt's blocks
  constexpr int kTile = 64;   // keys scored together: four vectors of scores per query row
  constexpr int kHalf = kTile / 2;
  typedef float block_t __attribute__((vector_size(kBlock * sizeof(float))));
  int64_t const groups = int64_t(cute::size<0>(q));
  int64_t const rows = int64_t(cute::size<1>(q));
  int64_t const depth = int64_t(cute::size<2>(q));
  int64_t const dv = int64_t(cute::size<1>(v));
  int64_t const total = groups * rows;
  // Many query rows (a prompt): slice `split` takes every splits-th group of rows against every
  // key, and marks the other rows unseen (the combine then reads one slice a row); few (a decode
  // step): every row against the slice's share of the keys.
  bool const by_rows = splits > 1 && total >= splits * kRows;
  attention_impl::KeyRange const keys = attention_impl::slice_of(
      visible.keys(int64_t(cute::size<1>(k))), by_rows ? 0 : split, by_rows ? 1 : splits, 1);
  int64_t const n_keys = keys.end - keys.begin;
  int64_t const tiles = (n_keys + kTile - 1) / kTile;
  int64_t const blocks = tiles * (kTile / kBlock);
  // kt[b * depth + d][j]: dimension d of key b * kBlock + j of the slice (0 past its end, to the
  // end of the last tile: zeroed below, after the keys are in).
  host_buffer<block_t> kt(blocks * depth);
  // The slice's value rows as floats: read in place where they are float rows (vld floats apart),
  // else copied once into vf.
  using TV = cute::remove_cvref_t<decltype(v(0, 0))>;
  bool const v_in_place = std::is_same_v<TV, float> && int64_t(cute::stride<1>(v)) == 1 &&
                          (!by_rows || int64_t(cute::stride<0>(v)) % 1024 != 0);
  host_buffer<float> vf(v_in_place ? 0 : n_keys * dv);
  float const* const vbase =
      v_in_place && n_keys > 0 ? reinterpret_cast<float const*>(&v(keys.begin, 0)) : vf.data();
  int64_t const vld = v_in_place ? int64_t(cute::stride<0>(v)) : dv;
  host_buffer<P> kpos(tiles * kTile, /*zeroed=*/true);  // (past the slice's end: never seen)
  bool whole = false;  // the block of key n transposed whole (transposed_block)
  for (int64_t n = 0; n < n_keys; ++n) {
    auto const* const kn = &k(0, keys.begin + n);
    block_t* const column = &kt[size_t(n / kBlock * depth)];
    if (n % kBlock == 0) {
      whole = transposed_block(kn, int64_t(cute::stride<1>(k)), n_keys - n, depth, column);
    }
    if (!whole) {
      for (int64_t d = 0; d < depth; ++d) column[d][n % kBlock] = detail::convert<float>(kn[d]);
    }
    if (!v_in_place) {
      auto const* const vn = &v(keys.begin + n, 0);
      for (int64_t e = 0; e < dv; ++e) vf[size_t(n * dv + e)] = detail::convert<float>(vn[e]);
    }
    kpos[size_t(n)] = visible.key(keys.begin + n);
  }
  // The last tile's lanes past the slice's end: the rest of a block that holds keys, whole blocks
  // after it (a block with keys is written key by key, so only those lanes were written).
  int64_t written = n_keys / kBlock;
  if (n_keys % kBlock != 0) {
    block_t* const column = &kt[size_t(written * depth)];
    for (int64_t d = 0; d < depth; ++d) {
      for (int64_t j = n_keys % kBlock; j < kBlock; ++j) column[d][j] = 0.0f;
    }
    ++written;
  }
  if (written < blocks) {
    std::memset(static_cast<void*>(&kt[size_t(written * depth)]), 0,
                size_t((blocks - written) * depth) * sizeof(block_t));
  }
  host_buffer<float> qf(kRows * depth);
  host_buffer<float> acc(kRows * dv);
  int64_t const threads =
      int64_t(program_dim<detail::dependent_level<TopologyScope::thread, Part>>());
  int64_t const first = int64_t(program_id<detail::dependent_level<TopologyScope::thread, Part>>());
  for (int64_t r0 = first * kRows; r0 < total; r0 += threads * kRows) {
    int const live = total - r0 < kRows ? int(total - r0) : kRows;
    int64_t gs[kRows], ms[kRows];
    P at[kRows];
    float mx[kRows], sum[kRows];
    for (int r = 0; r < kRows; ++r) {
      int64_t const row = r0 + (r < live ? r : 0);  // a dead row repeats the first: never stored
      ms[r] = row / groups;
      gs[r] = row - ms[r] * groups;
      at[r] = visible.query(ms[r]);
      mx[r] = -INFINITY;
      sum[r] = 0.0f;
    }
    if (by_rows && r0 / kRows % splits != split) {  // another slice's rows: none seen here
      for (int r = 0; r < live; ++r) {
        part(gs[r], ms[r], dv) = -INFINITY;
        part(gs[r], ms[r], dv + 1) = 0.0f;
      }
      continue;
    }
    bool started = false;  // the rows' q read and their sums cleared: at the first tile they see
    float const* qrow[kRows] = {};  // each row of q, as floats
    for (int64_t t = 0; t < tiles; ++t) {
      int const width = n_keys - t * kTile < kTile ? int(n_keys - t * kTile) : kTile;
      // which keys of the tile each row sees, a byte a key; `every`: all of them, for every row
      alignas(64) unsigned char seen[kRows][kTile];
      P const* const kp = &kpos[size_t(t * kTile)];
      for (int r = 0; r < kRows; ++r) {
        P const pos = at[r];
        TILEFOUNDRY_SIMD_LOOP
        for (int j = 0; j < kTile; ++j) seen[r][j] = (j < width) & visible.test(kp[j], pos);
      }
      uint64_t any = 0, every = ~uint64_t(0);
      for (int r = 0; r < kRows; ++r) {
        for (int w = 0; w < kTile / 8; ++w) {
          uint64_t word;
          std::memcpy(&word, &seen[r][w * 8], sizeof word);
          any |= word;
          every &= word;
        }
      }
      if (any == 0) continue;  // no row sees a key of the tile
      bool const all_seen = every == 0x0101010101010101ull;
      if (!started) {  // float rows are read where they are; others converted once
        for (int r = 0; r < kRows; ++r) {
          if constexpr (std::is_same_v<T, float>) {
            qrow[r] = &q(gs[r], ms[r], 0);
          } else {
            for (int64_t d = 0; d < depth; ++d) {
              qf[size_t(r * depth + d)] = detail::convert<float>(q(gs[r], ms[r], d));
            }
            qrow[r] = &qf[size_t(r * depth)];
          }
        }
        std::fill(acc.data(), acc.data() + acc.size(), 0.0f);
        started = true;
      }
      // The rows' dot products with the tile's keys, half a tile at a time: 2 x kRows vectors of
      // sums in registers through the loop over the dimensions, each key vector loaded once.
      alignas(64) float p[kRows][kTile];  // the dot products, then the scores, then the weights
      for (int h = 0; h < 2; ++h) {
        block_t const* const c0 = &kt[size_t((t * (kTile / kBlock) + 2 * h) * depth)];
        block_t const* const c1 = c0 + depth;
        block_t dots0[kRows] = {}, dots1[kRows] = {};
        for (int64_t d = 0; d < depth; ++d) {
          block_t const k0 = c0[d], k1 = c1[d];
#pragma GCC unroll 16
          for (int r = 0; r < kRows; ++r) {
            float const x = qrow[r][d];
            dots0[r] = fma_lanes(x, k0, dots0[r]);
            dots1[r] = fma_lanes(x, k1, dots1[r]);
          }
        }
        for (int r = 0; r < kRows; ++r) {
          std::memcpy(&p[r][h * kHalf], &dots0[r], sizeof dots0[r]);
          std::memcpy(&p[r][h * kHalf + kBlock], &dots1[r], sizeof dots1[r]);
        }
      }
      for (int r = 0; r < kRows; ++r) {
        float(&s)[kTile] = p[r];
        TILEFOUNDRY_SIMD_LOOP
        for (int j = 0; j < kTile; ++j) s[j] = attention_impl::score<T>(scores, s[j]);
        if (!all_seen) {
          unsigned char const* const seen_r = seen[r];
          TILEFOUNDRY_SIMD_LOOP
          for (int j = 0; j < kTile; ++j) s[j] = seen_r[j] ? s[j] : -INFINITY;
        }
        float const top = largest<kTile>(s);  // NaN if one is NaN: it reaches the sum
        if (top == -INFINITY) {               // the row sees no key of the tile
          std::memset(s, 0, sizeof s);
          continue;
        }
        if (top > mx[r]) {  // the maximum grows: what was summed below the old one shrinks
          float const corr = mx[r] == -INFINITY ? 0.0f : detail::exp_(mx[r] - top);
          sum[r] *= corr;
          float* const a = &acc[size_t(r * dv)];
          TILEFOUNDRY_SIMD_LOOP
          for (int64_t e = 0; e < dv; ++e) a[e] *= corr;
          mx[r] = top;
        }
        float const row_max = mx[r];
        TILEFOUNDRY_SIMD_LOOP
        for (int j = 0; j < kTile; ++j) {  // one loop of exponentials: vector lanes
          s[j] = s[j] == -INFINITY ? 0.0f : detail::exp_(s[j] - row_max);
        }
        sum[r] += sum_of<kTile>(s);
      }
      // The rows' weighted sums of the tile's value rows, two vectors of columns at a time (then
      // one): in registers across the keys, each value vector loaded once for the rows. A key a row
      // does not see has weight 0 and adds 0 * v, NaN where v is not finite, as the evaluator's
      // probs @ v does.
      float const* const v0 = vbase + t * kTile * vld;
      int64_t e = 0;
      for (; e + 2 * kBlock <= dv; e += 2 * kBlock) {
        block_t lo[kRows], hi[kRows];  // columns [e, e + 16) and [e + 16, e + 32) of each row
        for (int r = 0; r < kRows; ++r) {
          std::memcpy(&lo[r], &acc[size_t(r * dv + e)], sizeof lo[r]);
          std::memcpy(&hi[r], &acc[size_t(r * dv + e + kBlock)], sizeof hi[r]);
        }
        for (int j = 0; j < width; ++j) {
          block_t vlo, vhi;
          std::memcpy(&vlo, v0 + j * vld + e, sizeof vlo);
          std::memcpy(&vhi, v0 + j * vld + e + kBlock, sizeof vhi);
#pragma GCC unroll 16
          for (int r = 0; r < kRows; ++r) {
            float const w = p[r][j];
            lo[r] = fma_lanes(w, vlo, lo[r]);
            hi[r] = fma_lanes(w, vhi, hi[r]);
          }
        }
        for (int r = 0; r < kRows; ++r) {
          std::memcpy(&acc[size_t(r * dv + e)], &lo[r], sizeof lo[r]);
          std::memcpy(&acc[size_t(r * dv + e + kBlock)], &hi[r], sizeof hi[r]);
        }
      }
      for (; e + kBlock <= dv; e += kBlock) {
        block_t sums[kRows];
        for (int r = 0; r < kRows; ++r)
          std::memcpy(&sums[r], &acc[size_t(r * dv + e)], sizeof sums[r]);
        for (int j = 0; j < width; ++j) {
          block_t vj;
          std::memcpy(&vj, v0 + j * vld + e, sizeof vj);
#pragma GCC unroll 16
          for (int r = 0; r < kRows; ++r) sums[r] = fma_lanes(p[r][j], vj, sums[r]);
        }
        for (int r = 0; r < kRows; ++r)
          std::memcpy(&acc[size_t(r * dv + e)], &sums[r], sizeof sums[r]);
      }
      for (; e < dv; ++e) {  // columns short of a vector, a value at a time
        for (int j = 0; j < width; ++j) {
          float const vje = v0[j * vld + e];
          for (int r = 0; r < kRows; ++r) acc[size_t(r * dv + e)] += p[r][j] * vje;
        }
      }
    }
    // (a row that saw no key of the slice: its maximum -inf, its sums never read by the combine)
    for (int r = 0; r < live; ++r) {
      if (mx[r] != -INFINITY) {
        if (int64_t(cute::stride<2>(part)) == 1) {  // the row's Dv sums side by side: one copy
          std::memcpy(&part(gs[r], ms[r], 0), &acc[size_t(r * dv)], size_t(dv) * sizeof(float));
        } else {
          for (int64_t e = 0; e < dv; ++e) part(gs[r], ms[r], e) = acc[size_t(r * dv + e)];
        }
      }
      part(gs[r], ms[r], dv) = mx[r];
      part(gs[r], ms[r], dv + 1) = sum[r];
    }
  }
}

/// The tier for these operands: rows() where it applies, attention_impl's general tier otherwise.
template <class Acc, class Scores, class Visible, class Q, class K, class V, class Part>
inline void run(Scores scores, Visible visible, Q const& q, K const& k, V const& v, Part&& part,
                int64_t split, int64_t splits) {
  if constexpr (std::is_same_v<Acc, float> && rows_tier_v<Q, K, V>) {
    rows(scores, visible, q, k, v, part, split, splits);
  } else {
    attention_impl::general<Acc>(scores, visible, q, k, v, part, split, splits);
  }
}

/// attention_impl::combine's sums, a row (g, m) at a time: each slice's weight e^(its maximum -
/// the largest) found once for the row, not once for each of its Dv elements, and only the slices
/// whose keys the row saw (a maximum above -inf) summed, a slice's row at a time into the row's
/// sums (vector lanes; a loop over the slices for each element was scalar, 6% of a 1000-token
/// prompt's attention).
template <class Part, class Out>
inline void combine_rows(Part const& part, Out&& out) {
  using T = cute::remove_cvref_t<decltype(out(0, 0, 0))>;
  int64_t const splits = int64_t(cute::size<0>(part));
  int64_t const groups = int64_t(cute::size<0>(out));
  int64_t const rows = int64_t(cute::size<1>(out));
  int64_t const dv = int64_t(cute::size<2>(out));
  std::vector<float> weight(static_cast<size_t>(splits));
  std::vector<int64_t> live(static_cast<size_t>(splits));
  std::vector<float> acc(static_cast<size_t>(dv));  // the row's weighted sums
  int64_t const threads =
      int64_t(program_dim<detail::dependent_level<TopologyScope::thread, Out>>());
  for (int64_t i = int64_t(program_id<detail::dependent_level<TopologyScope::thread, Out>>());
       i < groups * rows; i += threads) {
    int64_t const m = i % rows;
    int64_t const g = i / rows;
    float mx = -INFINITY;
    for (int64_t s = 0; s < splits; ++s) {
      float const ms = part(s, g, m, dv);
      mx = ms > mx ? ms : mx;
    }
    float sum = 0.0f;
    int64_t seen = 0;  // the slices whose keys the row saw, their weights first in `weight`
    for (int64_t s = 0; s < splits; ++s) {
      float const ms = part(s, g, m, dv);
      if (ms == -INFINITY) continue;
      weight[size_t(seen)] = detail::exp_(ms - mx);
      live[size_t(seen++)] = s;
      sum += weight[size_t(seen - 1)] * part(s, g, m, dv + 1);
    }
    // the slices' rows weighed into acc a slice at a time (the same sums, element by element, in
    // the same order): vector lanes where each row's Dv sums lie side by side
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t j = 0; j < seen; ++j) {
      float const w = weight[size_t(j)];
      int64_t const s = live[size_t(j)];
      if (int64_t(cute::stride<3>(part)) == 1) {
        float const* const row = &part(s, g, m, 0);
        TILEFOUNDRY_SIMD_LOOP
        for (int64_t d = 0; d < dv; ++d) acc[size_t(d)] += w * row[d];
      } else {
        for (int64_t d = 0; d < dv; ++d) acc[size_t(d)] += w * part(s, g, m, d);
      }
    }
    for (int64_t d = 0; d < dv; ++d) out(g, m, d) = detail::convert<T>(acc[size_t(d)] / sum);
  }
}

}  // namespace attention_cpu

/// The attention family's entry: this CTA's slice `split` of `splits` of the keys, softmax(scores)
/// @ v for q (G x M x D) against keys k (D x N) and values v (N x Dv), the slice's state into part
/// (G x M x (Dv + 2) floats) for attention_combine. Every key visible.
template <class Acc, class Scores, class Q, class K, class V, class Part>
inline void attention(Scores scores, Q const& q, K const& k, V const& v, Part&& part, int64_t split,
                      int64_t splits) {
  attention_cpu::run<Acc>(scores, attention_impl::visible_always{}, q, k, v, part, split, splits);
}

/// ... key n visible to query row m where cmp(kpos(n), qpos(m)) (a causal mask from positions).
template <class Acc, class Scores, class Cmp, class QPos, class KPos, class Q, class K, class V,
          class Part>
inline void attention(Scores scores, Cmp cmp, QPos const& qpos, KPos const& kpos, Q const& q,
                      K const& k, V const& v, Part&& part, int64_t split, int64_t splits) {
  attention_impl::visible_where<Cmp, QPos, KPos> const visible{cmp, qpos, kpos};
  attention_cpu::run<Acc>(scores, visible, q, k, v, part, split, splits);
}

/// ... key n visible to query row m where cmp(n, qpos(m)): the keys are a cache in position order,
/// and a causal comparison scans only the entries up to the largest query position.
template <class Acc, class Scores, class Cmp, class QPos, class Q, class K, class V, class Part>
inline void attention(Scores scores, Cmp cmp, QPos const& qpos, Q const& q, K const& k, V const& v,
                      Part&& part, int64_t split, int64_t splits) {
  attention_impl::visible_index<Cmp, QPos, attention_impl::key_index_t<K>> const visible{cmp, qpos};
  attention_cpu::run<Acc>(scores, visible, q, k, v, part, split, splits);
}

/// The slices' states part (S x G x M x (Dv + 2)) merged into out (G x M x Dv).
template <class Part, class Out>
inline void attention_combine(Part const& part, Out&& out) {
  attention_cpu::combine_rows(part, out);
}

}  // namespace ops
}  // namespace tilefoundry

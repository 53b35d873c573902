// ops::attention and ops::attention_combine on the CPU target: attention_impl's general tier (which
// the CUDA target's entries run too), a tier of this target's own for rows contiguous along the
// head dimension (a prompt's attention over the KV cache), and attention_impl's combine a row at
// a time.
#pragma once

#include <tilefoundry/runtime/common/config.h>
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
/// contiguous and the dot products accumulate in float. The slice's keys are copied once as floats,
/// transposed in blocks of kBlock keys (for each block and each of the head's dimensions, the
/// block's kBlock values side by side: one vector); its values are read in place where they are
/// float rows, else copied once as float rows. Query rows go
/// kRows at a time, read (as floats) at the first block one of them sees: per block of keys, each
/// dimension's vector of keys is loaded once and multiplied into the kRows rows' vectors of kBlock
/// scores (held in registers: kRows independent chains of multiply-adds); a row's scores, their
/// largest, their exponentials and their sum are vector lanes; where Dv is whole vectors, each
/// vector of a value row is loaded once and added into the kRows rows' weighted sums (in registers
/// across the block's keys; a key a row does not see has weight 0 and adds 0 * v, as the
/// evaluator's probs @ v). A block no row of the group may see is skipped (a causal prompt's
/// later keys), and a row that sees no key of the slice stores only its maximum (-inf) and sum.
/// With many query rows (a prompt: at least kRows a slice) the slices are of rows, each against
/// every key (no slice's rows left waiting on a causal mask, one slice a row for the combine); with
/// few (a decode step), of keys. Float keys go into kt by 16 x 16 transposes (transposed_block).
/// Products are fused multiply-adds where the CPU has them. Each score is rounded and scaled as the
/// general tier's (attention_impl.h); the online softmax is the same sum, rescaled per block
/// instead of per key. Measured on this project's 2-core machine, f32, two threads
/// (bench/compiled_attention_cpu.py; x: SDPA's time over this one's): SmolLM2-135M's attention over
/// a 500-token prompt 7.6 -> 5.7 ms where the block's scores, maximum and exponentials were scalar
/// and its sums in memory; four rows a group, each row's value sums a vector at a time,
/// Qwen3-1.7B's (16 heads over 8, head_dim 128) at 64 / 128 / 256 / 500 tokens 1.09 / 0.84 / 0.86 /
/// 0.96x SDPA; eight rows, each value vector loaded once for them, 1.17 / 0.99 / 1.04 / 1.14x
/// (sixteen rows: within noise of eight); slices of rows and keys transposed by vectors, 1.23 /
/// 1.04-1.09 / 1.06-1.10 at 64 / 128 / 256 (SmolLM2's at 128: 1.18 -> 1.29-1.62). Against SDPA told
/// is_causal (its flash kernel, the engine's torch slot), 2026-12-05: SmolLM2's at 128 / 500 / 1000
/// tokens 0.40 / 4.71 / 17.2 -> 0.33 / 3.94 / 14.3 ms (0.64 / 0.66 / 0.48 -> 0.74 / 0.77 / 0.53x),
/// Qwen3-1.7B's 1.11 / 13.0 / 44.7 -> 0.88 / 12.0 / 42.2 ms, where each weight of a value vector
/// was tested against 0 (a select after each multiply-add), the rows' visibility found in the loop
/// that ORed it, and value rows copied into vf though they were float rows.
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
/// tokens took 5.8-6.1 ms with it, 6.1-6.3 with nan_max, and as much with this and sum_of() one
/// fold over a function object (2 threads, this project's CPU machine). Sixteen values where the
/// build has AVX-512 stay in one register (the fold went through the stack): 3.94 -> 3.51 ms there,
/// 14.3 -> 12.9 at 1000 tokens (2026-12-05).
template <int N>
inline float largest(float const (&x)[N]) {
#if defined(__AVX512F__)
  if constexpr (N == 16) {  // in one register: a test for NaN, then the vector's own reduction
    __m512 const v = _mm512_loadu_ps(x);
    if (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) != 0) return std::numeric_limits<float>::quiet_NaN();
    return _mm512_reduce_max_ps(v);
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

/// The sum of N values (N a power of two), halves folded onto each other as largest() folds them.
template <int N>
inline float sum_of(float const (&x)[N]) {
#if defined(__AVX512F__)
  if constexpr (N == 16)
    return _mm512_reduce_add_ps(_mm512_loadu_ps(x));  // the same halves, in registers
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
  constexpr int kBlock = 16;  // keys scored together: one vector of scores per query row
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
  int64_t const blocks = (n_keys + kBlock - 1) / kBlock;
  // kt[b * depth + d][j]: dimension d of key b * kBlock + j of the slice (0 past its end).
  std::vector<block_t> kt(static_cast<size_t>(blocks * depth));
  // The slice's value rows as floats: read in place where they are float rows (vld floats apart),
  // else copied once into vf.
  using TV = cute::remove_cvref_t<decltype(v(0, 0))>;
  bool const v_in_place = std::is_same_v<TV, float> && int64_t(cute::stride<1>(v)) == 1;
  std::vector<float> vf(v_in_place ? 0 : static_cast<size_t>(n_keys * dv));
  float const* const vbase =
      v_in_place && n_keys > 0 ? reinterpret_cast<float const*>(&v(keys.begin, 0)) : vf.data();
  int64_t const vld = v_in_place ? int64_t(cute::stride<0>(v)) : dv;
  std::vector<P> kpos(static_cast<size_t>(n_keys));
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
  for (int64_t n = n_keys; n < blocks * kBlock; ++n) {
    for (int64_t d = 0; d < depth; ++d) kt[size_t(n / kBlock * depth + d)][n % kBlock] = 0.0f;
  }
  std::vector<float> qf(static_cast<size_t>(kRows * depth));
  std::vector<float> acc(static_cast<size_t>(kRows * dv));
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
    bool started = false;  // the rows' q read and their sums cleared: at the first block they see
    float const* qrow[kRows] = {};  // each row of q, as floats
    for (int64_t b = 0; b < blocks; ++b) {
      int const width = n_keys - b * kBlock < kBlock ? int(n_keys - b * kBlock) : kBlock;
      bool seen[kRows][kBlock];
      P const* const kp = &kpos[size_t(b * kBlock)];
      for (int r = 0; r < kRows; ++r) {
        P const pos = at[r];
        TILEFOUNDRY_SIMD_LOOP
        for (int j = 0; j < kBlock; ++j)
          seen[r][j] = j < width && visible.test(kp[j < width ? j : 0], pos);
      }
      bool any = false;
      for (int r = 0; r < kRows; ++r) {
        for (int j = 0; j < kBlock; ++j) any |= seen[r][j];
      }
      if (!any) continue;  // no row sees a key of the block
      if (!started) {      // float rows are read where they are; others converted once
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
        std::fill(acc.begin(), acc.end(), 0.0f);
        started = true;
      }
      block_t const* const column = &kt[size_t(b * depth)];
      // the rows' scores, in registers through the loop
      block_t dots[kRows] = {};
      for (int64_t d = 0; d < depth; ++d) {
        block_t const keys_d = column[d];
#pragma GCC unroll 16
        for (int r = 0; r < kRows; ++r) dots[r] = fma_lanes(qrow[r][d], keys_d, dots[r]);
      }
      float p[kRows][kBlock];
      for (int r = 0; r < kRows; ++r) {
        float s[kBlock];
        block_t const dots_r = dots[r];
        TILEFOUNDRY_SIMD_LOOP
        for (int j = 0; j < kBlock; ++j) {  // the block's scores: vector lanes
          s[j] = seen[r][j] ? attention_impl::score<T>(scores, dots_r[j]) : -INFINITY;
        }
        float const top = largest(s);  // NaN if one is NaN: it reaches the sum
        if (top == -INFINITY) {        // the row sees no key of the block
          for (int j = 0; j < kBlock; ++j) p[r][j] = 0.0f;
          continue;
        }
        if (top > mx[r]) {  // the maximum grows: what was summed below the old one shrinks
          float const corr = mx[r] == -INFINITY ? 0.0f : detail::exp_(mx[r] - top);
          sum[r] *= corr;
          float* const a = &acc[size_t(r * dv)];
          for (int64_t e = 0; e < dv; ++e) a[e] *= corr;
          mx[r] = top;
        }
        float const row_max = mx[r];
        TILEFOUNDRY_SIMD_LOOP
        for (int j = 0; j < kBlock; ++j) {  // one loop of exponentials: vector lanes
          p[r][j] = s[j] == -INFINITY ? 0.0f : detail::exp_(s[j] - row_max);
        }
        sum[r] += sum_of(p[r]);
      }
      if (dv % kBlock == 0) {  // the rows' sums a vector at a time, in registers across the keys
        float const* const v0 = vbase + b * kBlock * vld;
        for (int64_t e = 0; e < dv; e += kBlock) {
          block_t sums[kRows];
          for (int r = 0; r < kRows; ++r)
            std::memcpy(&sums[r], &acc[size_t(r * dv + e)], sizeof sums[r]);
          for (int j = 0; j < width; ++j) {
            block_t vj;  // each value vector loaded once for the rows
            std::memcpy(&vj, v0 + j * vld + e, sizeof vj);
            // a key the row does not see has weight 0: it adds 0 * v, NaN where v is not finite, as
            // the evaluator's probs @ v does
            for (int r = 0; r < kRows; ++r) sums[r] = fma_lanes(p[r][j], vj, sums[r]);
          }
          for (int r = 0; r < kRows; ++r)
            std::memcpy(&acc[size_t(r * dv + e)], &sums[r], sizeof sums[r]);
        }
        continue;
      }
      for (int j = 0; j < width; ++j) {  // each value row loaded once for the rows
        float const* const vn = vbase + (b * kBlock + j) * vld;
        for (int r = 0; r < kRows; ++r) {
          float const pj = p[r][j];  // 0 where the row does not see the key: adds 0 * v, as above
          float* const a = &acc[size_t(r * dv)];
          for (int64_t e = 0; e < dv; ++e) a[e] += pj * vn[e];
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
/// whose keys the row saw (a maximum above -inf) summed.
template <class Part, class Out>
inline void combine_rows(Part const& part, Out&& out) {
  using T = cute::remove_cvref_t<decltype(out(0, 0, 0))>;
  int64_t const splits = int64_t(cute::size<0>(part));
  int64_t const groups = int64_t(cute::size<0>(out));
  int64_t const rows = int64_t(cute::size<1>(out));
  int64_t const dv = int64_t(cute::size<2>(out));
  std::vector<float> weight(static_cast<size_t>(splits));
  std::vector<int64_t> live(static_cast<size_t>(splits));
  std::vector<float const*> row(static_cast<size_t>(splits));  // each live slice's row of sums
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
    bool const rows_contiguous = int64_t(cute::stride<3>(part)) == 1;
    for (int64_t i = 0; i < seen && rows_contiguous; ++i)
      row[size_t(i)] = &part(live[size_t(i)], g, m, 0);
    for (int64_t d = 0; d < dv; ++d) {
      float acc = 0.0f;
      for (int64_t i = 0; i < seen; ++i) {
        acc += weight[size_t(i)] *
               (rows_contiguous ? row[size_t(i)][d] : part(live[size_t(i)], g, m, d));
      }
      out(g, m, d) = detail::convert<T>(acc / sum);
    }
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

// ops::attention and ops::attention_combine on the CPU target: attention_impl's general tier and
// combine (which the CUDA target's entries run too), and a tier of this target's own for rows
// contiguous along the head dimension (a prompt's attention over the KV cache).
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/attention_impl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

namespace tilefoundry {
namespace ops {
namespace attention_cpu {

template <int I, class T>
constexpr bool unit_stride_v =
    cute::is_constant<1, decltype(cute::stride<I>(std::declval<T const&>().layout()))>::value;

/// The CPU's tier where q's rows, the keys' and the values' rows (k's first axis, v's second) are
/// contiguous and the dot products accumulate in float: each query row read once as floats, each
/// dot product in independent partial sums (vector lanes), a block of keys scored before their
/// exponentials are taken in one loop (the running maximum raised once a block), the weighted sum
/// of value rows kept in a local buffer (not in `part` through its strides). Each score is
/// computed as the general tier computes it (attention_impl.h); the online softmax is the same
/// sum, rescaled per block instead of per key.
template <class Q, class K, class V>
constexpr bool rows_tier_v = unit_stride_v<2, Q>&& unit_stride_v<0, K>&& unit_stride_v<1, V>;

template <class Scores, class Visible, class Q, class K, class V, class Part>
inline void rows(Scores scores, Visible visible, Q const& q, K const& k, V const& v, Part&& part,
                 int64_t split, int64_t splits) {
  using T = cute::remove_cvref_t<decltype(q(0, 0, 0))>;
  constexpr int kLanes = 16;  // partial sums of a dot product: one AVX-512 register of floats
  constexpr int kBlock = 32;  // keys scored before their exponentials are taken, in one loop
  int64_t const groups = int64_t(cute::size<0>(q));
  int64_t const rows = int64_t(cute::size<1>(q));
  int64_t const depth = int64_t(cute::size<2>(q));
  int64_t const dv = int64_t(cute::size<1>(v));
  attention_impl::KeyRange const keys =
      attention_impl::slice_of(int64_t(cute::size<1>(k)), split, splits, 1);
  std::vector<float> qf(static_cast<size_t>(depth));
  std::vector<float> acc(static_cast<size_t>(dv));
  int64_t const threads =
      int64_t(program_dim<detail::dependent_level<TopologyScope::thread, Part>>());
  for (int64_t r = int64_t(program_id<detail::dependent_level<TopologyScope::thread, Part>>());
       r < groups * rows; r += threads) {
    int64_t const m = r / groups;
    int64_t const g = r - m * groups;
    for (int64_t d = 0; d < depth; ++d) qf[size_t(d)] = detail::convert<float>(q(g, m, d));
    std::fill(acc.begin(), acc.end(), 0.0f);
    float mx = -INFINITY;
    float sum = 0.0f;
    auto const at = visible.query(m);
    for (int64_t n0 = keys.begin; n0 < keys.end; n0 += kBlock) {
      int const width = keys.end - n0 < kBlock ? int(keys.end - n0) : kBlock;
      float s[kBlock], p[kBlock];
      float top = -INFINITY;  // the block's largest score (NaN if one is NaN: it reaches the sum)
      for (int j = 0; j < width; ++j) {
        s[j] = -INFINITY;
        if (!visible.test(visible.key(n0 + j), at)) continue;
        auto const* const kn = &k(0, n0 + j);
        float lanes[kLanes] = {};
        int64_t d = 0;
        for (; d + kLanes <= depth; d += kLanes) {
          for (int i = 0; i < kLanes; ++i) {
            lanes[i] += qf[size_t(d + i)] * detail::convert<float>(kn[d + i]);
          }
        }
        for (; d < depth; ++d) lanes[0] += qf[size_t(d)] * detail::convert<float>(kn[d]);
        float dot = 0.0f;
        for (int i = 0; i < kLanes; ++i) dot += lanes[i];
        s[j] = attention_impl::score<T>(scores, dot);
        top = s[j] > top || s[j] != s[j] ? s[j] : top;
      }
      if (top == -INFINITY) continue;  // no key of the block is seen
      if (top > mx) {  // the maximum grows: what was summed below the old one shrinks
        float const corr = mx == -INFINITY ? 0.0f : detail::exp_(mx - top);
        sum *= corr;
        for (int64_t e = 0; e < dv; ++e) acc[size_t(e)] *= corr;
        mx = top;
      }
      for (int j = 0; j < width; ++j) {  // one loop of exponentials: vector lanes
        p[j] = s[j] == -INFINITY ? 0.0f : detail::exp_(s[j] - mx);
      }
      for (int j = 0; j < width; ++j) {
        if (p[j] == 0.0f) continue;
        sum += p[j];
        auto const* const vn = &v(n0 + j, 0);
        for (int64_t e = 0; e < dv; ++e) acc[size_t(e)] += p[j] * detail::convert<float>(vn[e]);
      }
    }
    for (int64_t e = 0; e < dv; ++e) part(g, m, e) = acc[size_t(e)];
    part(g, m, dv) = mx;
    part(g, m, dv + 1) = sum;
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

/// The slices' states part (S x G x M x (Dv + 2)) merged into out (G x M x Dv).
template <class Part, class Out>
inline void attention_combine(Part const& part, Out&& out) {
  attention_impl::combine(part, out);
}

}  // namespace ops
}  // namespace tilefoundry

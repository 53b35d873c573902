// ops::reduce on the CPU target. The thread level has extent 1, so every reduction the tier
// trait accepts is the plain tier here.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/reduce_split.h>
#include <tilefoundry/runtime/common/ops/reduce_thread.h>

namespace tilefoundry {
namespace ops {

/**
 * @brief Reduce src into dst along Axes.
 * @tparam Op compile-time combine tag (sum_op, mean_op, max_op, min_op, absmax_op)
 * @tparam Axes compile-time reduced logical axes (cute::seq<...>)
 * @param ws unused on this target: nothing is exchanged between threads
 */
template <class Op, class Axes, class Src, class Dst, class Ws = no_workspace>
inline void reduce(Src const& src, Dst&& dst, Ws&& ws = {}) {
  using Plan = detail::reduce_plan_t<Op, Axes, Src, Dst>;
  static_assert(Plan::tier == detail::reduce_tier::plain,
                "ops::reduce: the CPU target's thread level has extent 1");
  (void)ws;
  detail::reduce_plain_tier<Op, Axes>(src, dst);
}

/// The split form, first step: each row's part of one CTA's tile of rows too long for a CTA (a
/// reduction fused after the matmul computing the tile): part_value(m) = Op over row m's elements
/// (reduce_split.h).
template <class Op, class Tile, class Values>
inline void reduce_part(Tile const& tile, Values&& part_value) {
  reduce_split::part<Op>(tile, part_value);
}

/// The split form, second step: out(m) = Op over row m's parts (S x M, one part a CTA of the first
/// step), of a row of `count` elements (a mean divides by it).
template <class Op, class Values, class Out>
inline void reduce_merge(Values const& values, int64_t count, Out&& out) {
  reduce_split::merge<Op>(values, count, out);
}

}  // namespace ops
}  // namespace tilefoundry

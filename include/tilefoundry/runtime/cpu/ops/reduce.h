// ops::reduce on the CPU target. The thread level has extent 1, so every reduction the tier
// trait accepts is the plain tier here.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/split_reduce.h>
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

/**
 * @brief The split form's first step: each row's part of one CTA's tile of rows too long for a CTA
 *        (the reductions fused after the matmul computing the tile), for every reduction given,
 *        in one pass over the tile (split_reduce.h).
 * @param tile the CTA's tile of the rows, M x T
 * @param col0 the tile's first column in the row (an arg-reduction's positions count from it)
 * @param parts part_of<Op>(values[, positions]) of each reduction
 */
template <class Tile, class... Parts>
inline void reduce_parts(Tile const& tile, int64_t col0, Parts const&... parts) {
  split_reduce::parts(tile, col0, parts...);
}

/**
 * @brief The split form's second step: each row's result of every reduction given, from every
 *        CTA's part of the row, in one pass over the parts (one CTA runs it).
 * @param count the rows' length (a mean divides by it)
 * @param merges merge_of<Op>(values[, positions], out) of each reduction, their parts S x M alike
 */
template <class... Merges>
inline void reduce_merges(int64_t count, Merges const&... merges) {
  split_reduce::merges(count, merges...);
}

}  // namespace ops
}  // namespace tilefoundry

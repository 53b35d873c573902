// ops::arg_reduce on the CPU target. The thread level has extent 1, so every arg-reduction the
// tier trait accepts is the plain tier here.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/arg_split.h>
#include <tilefoundry/runtime/common/ops/reduce_arg.h>

namespace tilefoundry {
namespace ops {

/**
 * @brief Store into dst the position along Axes of the element Op picks from src (argmax_op: the
 *        first largest, NaN counting as the largest), as torch.argmax.
 * @tparam Op compile-time tag (argmax_op)
 * @tparam Axes compile-time reduced logical axes (cute::seq<...>); a position counts the reduced
 *         modes colexicographically
 * @param src source operand; sharded operands carry ShardLayout
 * @param dst integer (int64) destination, laid out as ops::reduce's destination would be
 */
template <class Op, class Axes, class Src, class Dst>
inline void arg_reduce(Src const& src, Dst&& dst) {
  using Plan = detail::reduce_plan_t<max_op, Axes, Src, Dst>;
  static_assert(Plan::tier == detail::reduce_tier::plain,
                "ops::arg_reduce: the CPU target's thread level has extent 1");
  detail::arg_reduce_in_registers<Op, Axes>(src, dst, detail::no_staging{},
                                            [](auto acc) { return acc; });
}

/// The split form, first step: each row's part of one CTA's tile of rows too long for a CTA (an
/// argmax fused after the matmul computing the tile): part_value(m), part_position(m) = the pair
/// Op picks among row m's elements, at positions col0 + n (arg_split.h).
template <class Op, class Tile, class Values, class Positions>
inline void arg_reduce_part(Tile const& tile, int64_t col0, Values&& part_value,
                            Positions&& part_position) {
  arg_split::part<Op>(tile, col0, part_value, part_position);
}

/// The split form, second step: out(m) = the position of the pair Op picks among row m's parts
/// (values and positions S x M, one part a CTA of the first step).
template <class Op, class Values, class Positions, class Out>
inline void arg_reduce_merge(Values const& values, Positions const& positions, Out&& out) {
  arg_split::merge<Op>(values, positions, out);
}

}  // namespace ops
}  // namespace tilefoundry

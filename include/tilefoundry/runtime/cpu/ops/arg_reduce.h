// ops::arg_reduce on the CPU target. The thread level has extent 1, so every arg-reduction the
// tier trait accepts is the plain tier here.
#pragma once

#include <tilefoundry/runtime/common/config.h>
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

}  // namespace ops
}  // namespace tilefoundry

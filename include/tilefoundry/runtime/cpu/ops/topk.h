// ops::topk on the CPU target. The thread level has extent 1, so every top-k the tier trait
// accepts is the plain tier here.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/reduce_topk.h>

namespace tilefoundry {
namespace ops {

/**
 * @brief Store into values and indices the k elements along Axes that Op picks first from src,
 *        in its order (argmax_op: the largest first, NaN counting as the largest; argmin_op: the
 *        smallest first, NaN last; equal values by position), as torch.topk(sorted=True).
 * @tparam Op compile-time tag (argmax_op or argmin_op)
 * @tparam Axes compile-time reduced logical axes (cute::seq<...>); a position counts the reduced
 *         modes colexicographically
 * @param src source operand; sharded operands carry ShardLayout
 * @param values destination of src's element type, laid out as ops::reduce's keepdim destination
 *        with k elements over its reduced modes (k is their static size)
 * @param indices integer (int64) destination of the picks' positions, laid out as values
 */
template <class Op, class Axes, class Src, class Values, class Indices>
inline void topk(Src const& src, Values&& values, Indices&& indices) {
  using Plan = detail::reduce_plan_t<max_op, Axes, Src, Values>;
  static_assert(Plan::tier == detail::reduce_tier::plain,
                "ops::topk: the CPU target's thread level has extent 1");
  detail::topk_passes<Op, Axes>(src, values, indices, detail::no_staging{},
                                [](auto acc) { return acc; });
}

}  // namespace ops
}  // namespace tilefoundry

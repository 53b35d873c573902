// ops::topk on the CUDA target: k passes of ops::arg_reduce's fold (reduce_topk.h), each completed
// by arg_reduce's tier, chosen by reduce's tier trait from the operands' layouts:
//   plain       each thread folds what it holds
//   intra_warp  + butterfly shuffles of the (value, position) pair over the lane axes
//   cross_warp  + pairs through shared memory, one slot per thread
//   intra_cta   + shuffles over the lane axes first, then shared memory across warps
// The shared-memory tiers exchange through the call's own static array, as arg_reduce does: each
// pass writes its thread's pair, waits at a barrier, combines its peers' pairs in one fixed order
// and waits at a second barrier, so that the next pass (and a later call) may overwrite the slots.
// Every thread of the CTA must make the call, as SPMD generated code does.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/reduce_topk.h>
#include <tilefoundry/runtime/cuda/ops/arg_reduce.cuh>

namespace tilefoundry {
namespace ops {
namespace detail {

// Completes a thread's pair across the CTA's exchange group through shared memory `slots`.
template <class Op, class Plan, class Acc>
struct exchange_arg_through_smem {
  arg_pair<Acc>* slots;
  __device__ arg_pair<Acc> operator()(arg_pair<Acc> acc) const {
    int const tid = program_id<TopologyScope::thread>();
    slots[tid] = shuffle_arg_lanes<Op, Plan>(acc);
    __syncthreads();
    arg_pair<Acc> const all = combine_arg_peers<Op, Plan, Acc>(
        slots, warp_group_base<Plan>(tid), std::make_integer_sequence<int, Plan::peer_count>{});
    __syncthreads();
    return all;
  }
};

}  // namespace detail

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
__device__ void topk(Src const& src, Values&& values, Indices&& indices) {
  using Plan = detail::reduce_plan_t<max_op, Axes, Src, Values>;
  if constexpr (Plan::tier == detail::reduce_tier::plain) {
    detail::topk_passes<Op, Axes>(src, values, indices, detail::stage_in_registers{},
                                  [](auto acc) { return acc; });
  } else if constexpr (Plan::tier == detail::reduce_tier::intra_warp) {
    detail::topk_passes<Op, Axes>(src, values, indices, detail::stage_in_registers{}, [](auto acc) {
      return detail::shuffle_arg_lanes<Op, Plan>(acc);
    });
  } else {
    using Acc = detail::compute_t<detail::value_t<decltype(detail::view_of(src))>>;
    static_assert(Plan::thread_count > 0,
                  "ops::topk: a cross-warp exchange needs a static thread count");
    __shared__ detail::arg_pair<Acc> slots[Plan::thread_count];
    detail::topk_passes<Op, Axes>(src, values, indices, detail::stage_in_registers{},
                                  detail::exchange_arg_through_smem<Op, Plan, Acc>{slots});
  }
}

}  // namespace ops
}  // namespace tilefoundry

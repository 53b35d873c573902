// ops::arg_reduce on the CUDA target: ops::reduce's tiers (reduce.cuh), chosen by the same tier
// trait from the operands' layouts, folding (value, position) pairs:
//   plain       each thread folds what it holds
//   intra_warp  + butterfly shuffles of both halves of the pair over the lane axes
//   cross_warp  + pairs through shared memory, one slot per thread and kept element
//   intra_cta   + shuffles over the lane axes first, then shared memory across warps
// The pairs' shared memory is the call's own static array (a value and an int64 position do not
// fit the accumulator workspace of ops::reduce): each thread writes its pair, waits at a barrier,
// combines its peers' pairs in one fixed order, and waits at a second barrier before it returns,
// so that a later call (the next row) may overwrite the slots. Every thread of the CTA must make
// the call, as SPMD generated code does.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/reduce_arg.h>
#include <tilefoundry/runtime/cuda/ops/reduce.cuh>

namespace tilefoundry {
namespace ops {
namespace detail {

template <class T>
__device__ __forceinline__ T shuffle_xor(T v, int mask) {
  if constexpr (sizeof(T) < sizeof(int)) {
    return static_cast<T>(__shfl_xor_sync(0xffffffffu, static_cast<int>(v), mask));
  } else {
    return __shfl_xor_sync(0xffffffffu, v, mask);
  }
}

template <class Op, class Plan, int K = 0, class Acc>
__device__ __forceinline__ arg_pair<Acc> shuffle_arg_lanes(arg_pair<Acc> acc) {
  if constexpr (K < Plan::n_lane_masks) {
    constexpr int mask = Plan::template lane_mask<K>;
    arg_pair<Acc> const other{
        shuffle_xor(acc.value, mask),
        static_cast<std::int64_t>(shuffle_xor(static_cast<long long>(acc.index), mask))};
    return shuffle_arg_lanes<Op, Plan, K + 1>(arg_combine<Op>(acc, other));
  } else {
    return acc;
  }
}

template <class Op, class Plan, class Acc, int... P>
__device__ __forceinline__ arg_pair<Acc> combine_arg_peers(arg_pair<Acc> const* w, int slot,
                                                           std::integer_sequence<int, P...>) {
  arg_pair<Acc> acc = arg_traits<Op>::template identity<Acc>();
  ((acc = arg_combine<Op>(acc, w[slot + Plan::template peer_offset<P>])), ...);
  return acc;
}

template <class Op, class Axes, class Src, class Dst>
__device__ void arg_reduce_smem_tier(Src const& src, Dst&& dst) {
  using Plan = reduce_plan_t<max_op, Axes, Src, Dst>;
  check_arg_operands<Src, Dst>();
  auto const view = view_of(src);
  auto const d = view_of(dst);
  check_sizes<Plan, decltype(view), decltype(d)>();
  using Acc = compute_t<value_t<decltype(view)>>;
  using D = value_t<decltype(d)>;
  constexpr int threads = Plan::thread_count;
  static_assert(threads > 0, "ops::arg_reduce: a cross-warp reduction needs a static thread count");
  auto const dl = dst_kept_layout<Plan>(d);
  using Outputs = decltype(cute::size(dl));
  static_assert(cute::is_static<Outputs>::value,
                "ops::arg_reduce: a cross-warp reduction needs a static local dst size");
  constexpr int n = Outputs::value;
  __shared__ arg_pair<Acc> slots[n * threads];

  auto const& s = stage_in_registers{}(view);
  auto const pos = arg_positions<typename Plan::split>(src, view);
  std::int64_t const offset = arg_offset<typename Plan::split>(src);
  bool const store =
      stores_result<Plan, decltype(d)>(dst, std::make_index_sequence<Plan::n_dst_broadcast>{});
  int const tid = program_id<TopologyScope::thread>();
  arg_pair<Acc> part[n];
  CUTE_UNROLL
  for (int j = 0; j < n; ++j) {
    part[j] = shuffle_arg_lanes<Op, Plan>(
        fold_arg_local<Op, Acc, typename Plan::split>(s, j, pos, offset));
  }
  CUTE_UNROLL
  for (int j = 0; j < n; ++j) slots[j * threads + tid] = part[j];
  __syncthreads();
  int const base = warp_group_base<Plan>(tid);
  CUTE_UNROLL
  for (int j = 0; j < n; ++j) {
    part[j] = combine_arg_peers<Op, Plan, Acc>(slots, j * threads + base,
                                               std::make_integer_sequence<int, Plan::peer_count>{});
  }
  __syncthreads();
  if (store) {
    CUTE_UNROLL
    for (int j = 0; j < n; ++j) {
      d.data()[dl(j)] = static_cast<D>(part[j].index == INT64_MAX ? 0 : part[j].index);
    }
  }
}

}  // namespace detail

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
__device__ void arg_reduce(Src const& src, Dst&& dst) {
  using Plan = detail::reduce_plan_t<max_op, Axes, Src, Dst>;
  if constexpr (Plan::tier == detail::reduce_tier::plain) {
    detail::arg_reduce_in_registers<Op, Axes>(src, dst, detail::stage_in_registers{},
                                              [](auto acc) { return acc; });
  } else if constexpr (Plan::tier == detail::reduce_tier::intra_warp) {
    detail::arg_reduce_in_registers<Op, Axes>(src, dst, detail::stage_in_registers{}, [](auto acc) {
      return detail::shuffle_arg_lanes<Op, Plan>(acc);
    });
  } else {
    detail::arg_reduce_smem_tier<Op, Axes>(src, dst);
  }
}

}  // namespace ops
}  // namespace tilefoundry

// The plain reduce tier, shared by both targets, the register-only body it shares with the CUDA
// target's intra-warp tier, and the rule for which instance stores a result.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/reduce_local.h>

namespace tilefoundry {
namespace ops {
namespace detail {

// A dst in shared storage (gmem / smem) that is a broadcast along some mesh axes holds one copy
// for all instances along them: only the instance at coordinate 0 stores it. A register dst is
// per instance, so every instance stores its own.
template <class Plan, class DstView, class Dst, std::size_t... I>
TILEFOUNDRY_DEVICE bool stores_result(Dst const& dst, std::index_sequence<I...>) {
  if constexpr (!is_distributed_v<Dst> || is_rmem_view_v<DstView> || sizeof...(I) == 0) {
    (void)dst;
    return true;
  } else {
    auto const coord = shard_layout_of(dst).mesh.local_index();
    return ((cute::get<Plan::template dst_broadcast_axis<I>>(coord) == 0) && ...);
  }
}

template <class Plan, class SrcView, class DstView>
TILEFOUNDRY_DEVICE constexpr void check_sizes() {
  using KeptSize = decltype(cute::size(kept_layout<typename Plan::split>(std::declval<SrcView>())));
  using DstSize = decltype(cute::size(dst_kept_layout<Plan>(std::declval<DstView>())));
  if constexpr (cute::is_static<KeptSize>::value && cute::is_static<DstSize>::value) {
    static_assert(KeptSize::value == DstSize::value,
                  "ops::reduce: dst does not hold one element per kept element of src");
  }
}

// The tiers that keep every partial in registers (plain, intra_warp) differ only in how a
// thread's own fold is completed before it is stored: not at all, or by lane shuffles. One body
// serves both, so that they cannot disagree on sizes, the mean's count or which instance stores.
template <class Op, class Axes, class Src, class Dst, class Complete>
TILEFOUNDRY_DEVICE void reduce_in_registers(Src const& src, Dst&& dst, Complete const& complete) {
  using Plan = reduce_plan_t<Op, Axes, Src, Dst>;
  auto const s = view_of(src);
  auto const d = view_of(dst);
  check_sizes<Plan, decltype(s), decltype(d)>();
  using Acc = compute_t<value_t<decltype(s)>>;
  using D = value_t<decltype(d)>;
  auto const count = reduced_count<typename Plan::split>(full_shape(src));
  auto const dl = dst_kept_layout<Plan>(d);
  bool const store =
      stores_result<Plan, decltype(d)>(dst, std::make_index_sequence<Plan::n_dst_broadcast>{});
  CUTE_UNROLL
  for (int j = 0; j < int(cute::size(dl)); ++j) {
    Acc const acc = complete(fold_local<Op, Acc, typename Plan::split>(s, j));
    if (store) d.data()[dl(j)] = convert<D>(finish<Op>(acc, count));
  }
}

template <class Op, class Axes, class Src, class Dst>
TILEFOUNDRY_DEVICE void reduce_plain_tier(Src const& src, Dst&& dst) {
  reduce_in_registers<Op, Axes>(src, dst, [](auto acc) { return acc; });
}

}  // namespace detail
}  // namespace ops
}  // namespace tilefoundry

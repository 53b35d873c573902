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

// How a tier reads its source before folding it: as it is (no_staging), or, on the CUDA target, a
// small static source in memory first copied into registers through the 16-byte vector path, so
// that the fold does not load one element at a time. Both fold the same elements in the same
// order.
struct no_staging {
  template <class View>
  TILEFOUNDRY_DEVICE View const& operator()(View const& v) const {
    return v;
  }
};

// The tiers that keep every partial in registers (plain, intra_warp) differ only in how a
// thread's own fold is completed before it is stored: not at all, or by lane shuffles. One body
// serves both, so that they cannot disagree on sizes, the mean's count or which instance stores.
template <class Op, class Axes, class Src, class Dst, class Stage, class Complete>
TILEFOUNDRY_DEVICE void reduce_in_registers(Src const& src, Dst&& dst, Stage const& stage,
                                            Complete const& complete) {
  using Plan = reduce_plan_t<Op, Axes, Src, Dst>;
  auto const view = view_of(src);
  auto const d = view_of(dst);
  check_sizes<Plan, decltype(view), decltype(d)>();
  using Acc = compute_t<value_t<decltype(view)>>;
  using D = value_t<decltype(d)>;
  auto const& s = stage(view);
  auto const count = reduced_count_of<typename Plan::split>(src);
  auto const dl = dst_kept_layout<Plan>(d);
  bool const store =
      stores_result<Plan, decltype(d)>(dst, std::make_index_sequence<Plan::n_dst_broadcast>{});
  CUTE_UNROLL
  for (int j = 0; j < int(cute::size(dl)); ++j) {
    Acc const acc = complete(fold_local<Op, Acc, typename Plan::split>(s, j));
    if (store) d.data()[dl(j)] = convert<D>(finish<Op>(acc, count));
  }
}

template <class Op, class Axes, class Src, class Dst, class Stage = no_staging>
TILEFOUNDRY_DEVICE void reduce_plain_tier(Src const& src, Dst&& dst, Stage const& stage = {}) {
  reduce_in_registers<Op, Axes>(src, dst, stage, [](auto acc) { return acc; });
}

}  // namespace detail
}  // namespace ops
}  // namespace tilefoundry

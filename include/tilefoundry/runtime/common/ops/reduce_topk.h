// The top-k family (ops::topk): the k elements an arg-reduction order picks first from what a
// reduction folds, as torch.topk gives them (sorted): argmax_op's order for the largest (NaN
// first), argmin_op's for the smallest (NaN last); equal values in the order of their positions.
//
// k passes of arg_reduce's fold (reduce_arg.h): the order is a total one on (value, position)
// pairs, so the pick of pass p is the first, in that order, of the elements that the pick of pass
// p-1 beats; the first pass takes every element (arg_traits::first beats them all). No element is
// taken twice and nothing is marked. Each pass is completed across instances as arg_reduce's
// tier does (reduce's tier trait on the same layouts), so every instance holds the same pick.
//
// The destinations hold the k picks of each kept element along their reduced modes: laid out as
// ops::reduce's destination would be with keepdim, its reduced modes holding k elements instead
// of one (a row's k results, on a row's broadcast layout: every instance holds all k).
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/reduce_arg.h>

#include <cstdint>

namespace tilefoundry {
namespace ops {
namespace detail {

// Admits the elements that `picked` beats: those after it in Op's order.
template <class Op, class Acc>
struct picked_after {
  arg_pair<Acc> picked;
  TILEFOUNDRY_DEVICE bool operator()(arg_pair<Acc> const& x) const {
    return arg_traits<Op>::beats(picked, x);
  }
};

template <class Src, class Values, class Indices>
TILEFOUNDRY_DEVICE constexpr void check_topk_operands() {
  check_arg_operands<Src, Indices>();
  using S = value_t<decltype(view_of(std::declval<Src const&>()))>;
  using V = value_t<decltype(view_of(std::declval<Values&>()))>;
  static_assert(std::is_same_v<S, V>, "ops::topk: the values have the source's element type");
}

// The k passes, each completed across instances by `complete` (nothing, lane shuffles, or shared
// memory: every instance calls it k times per kept element, in the same order), stored by the
// instances that store.
template <class Op, class Axes, class Src, class Values, class Indices, class Stage, class Complete>
TILEFOUNDRY_DEVICE void topk_passes(Src const& src, Values&& values, Indices&& indices,
                                    Stage const& stage, Complete const& complete) {
  using Plan = reduce_plan_t<max_op, Axes, Src, Values>;
  using Split = typename Plan::split;
  static_assert(Plan::keepdim, "ops::topk: the destinations keep the reduced modes (k picks)");
  check_topk_operands<Src, Values, Indices>();
  auto const view = view_of(src);
  auto const v = view_of(values);
  auto const ix = view_of(indices);
  check_sizes<Plan, decltype(view), decltype(v)>();
  check_sizes<Plan, decltype(view), decltype(ix)>();
  using Acc = compute_t<value_t<decltype(view)>>;
  using V = value_t<decltype(v)>;
  using I = value_t<decltype(ix)>;
  auto const& s = stage(view);
  auto const pos = arg_positions<Split>(src, view);
  std::int64_t const offset = arg_offset<Split>(src);
  auto const kept_v = dst_kept_layout<Plan>(v);
  auto const kept_ix = dst_kept_layout<Plan>(ix);
  auto const picks_v = reduced_layout<Split>(v);
  auto const picks_ix = reduced_layout<Split>(ix);
  using K = decltype(cute::size(picks_v));
  static_assert(cute::is_static<K>::value,
                "ops::topk: k (the destinations' reduced size) is static");
  static_assert(std::is_same_v<K, decltype(cute::size(picks_ix))>,
                "ops::topk: values and indices hold k picks each");
  constexpr int k = K::value;
  bool const store_v =
      stores_result<Plan, decltype(v)>(values, std::make_index_sequence<Plan::n_dst_broadcast>{});
  bool const store_ix =
      stores_result<Plan, decltype(ix)>(indices, std::make_index_sequence<Plan::n_dst_broadcast>{});
  for (int j = 0; j < int(cute::size(kept_v)); ++j) {
    arg_pair<Acc> picked = arg_traits<Op>::template first<Acc>();
    for (int p = 0; p < k; ++p) {
      picked = complete(
          fold_arg_local<Op, Acc, Split>(s, j, pos, offset, picked_after<Op, Acc>{picked}));
      // A source shorter than k (which lowering refuses) leaves a pass nothing: position 0.
      if (store_v) v.data()[kept_v(j) + picks_v(p)] = convert<V>(picked.value);
      if (store_ix) {
        ix.data()[kept_ix(j) + picks_ix(p)] =
            static_cast<I>(picked.index == INT64_MAX ? 0 : picked.index);
      }
    }
  }
}

}  // namespace detail
}  // namespace ops
}  // namespace tilefoundry

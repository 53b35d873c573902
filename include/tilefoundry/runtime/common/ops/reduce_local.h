// The thread-local part of every reduce tier: each thread folds the elements it holds along the
// reduced modes, one accumulator per kept element (the plain tier is exactly this).
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/reduce_plan.h>

namespace tilefoundry {
namespace ops {
namespace detail {

template <class L, int... K>
CUTE_HOST_DEVICE constexpr auto select_modes(L const& l, std::integer_sequence<int, K...>) {
  if constexpr (sizeof...(K) == 0) {
    return cute::Layout<cute::_1, cute::_0>{};
  } else {
    auto s = cute::wrap(l.shape());
    auto d = cute::wrap(l.stride());
    return cute::make_layout(cute::make_shape(cute::get<K>(s)...),
                             cute::make_stride(cute::get<K>(d)...));
  }
}

template <class Split, class View>
CUTE_HOST_DEVICE constexpr auto kept_layout(View const& v) {
  return select_modes(v.layout(), typename Split::kept{});
}

template <class Split, class View>
CUTE_HOST_DEVICE constexpr auto reduced_layout(View const& v) {
  return select_modes(v.layout(), typename Split::reduced{});
}

// The dst layout indexed by the kept linear index j.
template <class Plan, class View>
CUTE_HOST_DEVICE constexpr auto dst_kept_layout(View const& v) {
  if constexpr (Plan::keepdim) {
    return select_modes(v.layout(), typename Plan::split::kept{});
  } else {
    return v.layout();
  }
}

// How many independent partial results a thread's fold keeps. On the CPU target one thread folds
// a whole row (thousands of elements): a single accumulator is a chain of dependent additions the
// compiler may not reorder, so the fold keeps fold_lanes partials, one vector register's worth,
// combined at the end. A GPU thread folds a handful of elements and keeps one.
#if defined(TILEFOUNDRY_TARGET_CPU)
constexpr int fold_lanes = 16;
#else
constexpr int fold_lanes = 1;
#endif

// Fold of the elements of kept index j, in the accumulator type Acc.
template <class Op, class Acc, class Split, class SrcView>
TILEFOUNDRY_DEVICE Acc fold_local(SrcView const& src, int j) {
  using T = reduce_traits<Op>;
  auto const base = src.data() + kept_layout<Split>(src)(j);
  auto const red = reduced_layout<Split>(src);
  int const n = int(cute::size(red));
  int r = 0;
  Acc acc = T::template identity<Acc>();
  if constexpr (fold_lanes > 1) {
    Acc part[fold_lanes];
    for (int l = 0; l < fold_lanes; ++l) part[l] = T::template identity<Acc>();
    for (; r + fold_lanes <= n; r += fold_lanes) {
      for (int l = 0; l < fold_lanes; ++l) {
        part[l] = T::combine(part[l], T::enter(static_cast<Acc>(to_compute(base[red(r + l)]))));
      }
    }
    for (int l = 0; l < fold_lanes; ++l) acc = T::combine(acc, part[l]);
  }
  CUTE_UNROLL
  for (; r < n; ++r) {
    acc = T::combine(acc, T::enter(static_cast<Acc>(to_compute(base[red(r)]))));
  }
  return acc;
}

// Number of elements a mean divides by: the product of the reduced modes' extents in the
// operand's full (canonical, for a ShardTensor) shape.
template <class Split, class Shape>
CUTE_HOST_DEVICE auto reduced_count(Shape const& shape) {
  auto s = cute::wrap(shape);
  return cute::size(select_modes(cute::make_layout(s), typename Split::reduced{}));
}

template <class Src>
CUTE_HOST_DEVICE auto full_shape(Src const& src) {
  if constexpr (is_distributed_v<Src>) {
    return shard_layout_of(src).layout.shape();
  } else {
    return src.shape();
  }
}

template <class Op, class Acc, class Count>
TILEFOUNDRY_DEVICE Acc finish(Acc acc, Count const& count) {
  if constexpr (reduce_traits<Op>::divides) {
    return acc / static_cast<Acc>(count);
  } else {
    (void)count;
    return acc;
  }
}

template <class View>
constexpr bool is_rmem_view_v =
    cute::is_rmem<cute::remove_cvref_t<decltype(std::declval<View>().data())>>::value;

}  // namespace detail
}  // namespace ops
}  // namespace tilefoundry

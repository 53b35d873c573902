// The arg-reduction family (ops::arg_reduce): the position of the element a reduction picks,
// as torch.argmax gives it. Its tags, the (value, index) pair every tier folds, and the
// thread-local fold shared by both targets' tiers.
//
// An element's index is its colexicographic position among the reduced modes of the source's
// full (canonical) shape: along a row laid out as (vector, threads, per-thread count), its
// position in the row. A thread's elements are found from its local view and, for a distributed
// source, its mesh coordinate along the mesh axes that split a reduced mode. Which tier runs, and
// which instances exchange pairs, is reduce's tier trait (reduce_plan.h) on the same layouts.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/reduce_thread.h>

#include <cstdint>
#include <limits>

namespace tilefoundry {
namespace ops {

// The first position of the largest element; NaN counts as larger than any number (the first
// NaN wins), +0 and -0 are equal, as in torch.argmax.
struct argmax_op {};
// The first position of the smallest element; NaN counts as larger than any number (a NaN is
// picked only from a row of NaNs), +0 and -0 are equal. (torch.argmin lets NaN win; this is the
// order of torch.topk(largest=False), which puts NaN last.)
struct argmin_op {};

namespace detail {

template <class T>
struct arg_pair {
  T value;
  std::int64_t index;
};

// The largest value of T, NaN for a float type: a pair of it that precedes every element in
// argmax_op's order, and that every element precedes in argmin_op's. (A class-scope constant, as
// math.h's extreme, so that device code may read it.)
template <class T>
struct nan_or_highest {
  static constexpr T value = std::numeric_limits<T>::has_quiet_NaN
                                 ? std::numeric_limits<T>::quiet_NaN()
                                 : std::numeric_limits<T>::max();
};

// Each order's identity() is a pair every element beats (a reduction over no elements gives it);
// first() is a pair that beats every element (ops::topk's first pass takes what it beats: all).
template <class Op>
struct arg_traits {
  static_assert(sizeof(Op) == 0, "ops::arg_reduce: Op is argmax_op or argmin_op");
};

template <>
struct arg_traits<argmax_op> {
  // Beaten by every element: the lowest value at a position past every real one. A reduction
  // over no elements gives index 0.
  template <class T>
  static TILEFOUNDRY_DEVICE arg_pair<T> identity() {
    return {lowest<T>(), INT64_MAX};
  }
  template <class T>
  static TILEFOUNDRY_DEVICE arg_pair<T> first() {
    return {nan_or_highest<T>::value, -1};
  }
  // Whether b wins over a: a NaN over a number, then the larger value, then the earlier position.
  // A total order, so partial results may combine in any grouping and order.
  template <class T>
  static TILEFOUNDRY_DEVICE bool beats(arg_pair<T> const& b, arg_pair<T> const& a) {
    bool const a_nan = a.value != a.value, b_nan = b.value != b.value;
    if (a_nan != b_nan) return b_nan;
    if (!a_nan && a.value != b.value) return a.value < b.value;
    return b.index < a.index;
  }
};

template <>
struct arg_traits<argmin_op> {
  template <class T>
  static TILEFOUNDRY_DEVICE arg_pair<T> identity() {
    return {nan_or_highest<T>::value, INT64_MAX};
  }
  template <class T>
  static TILEFOUNDRY_DEVICE arg_pair<T> first() {
    return {lowest<T>(), -1};
  }
  // Whether b wins over a: a number over a NaN, then the smaller value, then the earlier position.
  template <class T>
  static TILEFOUNDRY_DEVICE bool beats(arg_pair<T> const& b, arg_pair<T> const& a) {
    bool const a_nan = a.value != a.value, b_nan = b.value != b.value;
    if (a_nan != b_nan) return a_nan;
    if (!a_nan && a.value != b.value) return b.value < a.value;
    return b.index < a.index;
  }
};

template <class Op, class T>
TILEFOUNDRY_DEVICE arg_pair<T> arg_combine(arg_pair<T> const& a, arg_pair<T> const& b) {
  return arg_traits<Op>::beats(b, a) ? b : a;
}

// Constant expressions of the split, as types (device code may not call its constexpr functions).
template <class Split, int K>
struct reduced_mode : std::bool_constant<Split::is_reduced(K)> {};

template <class A, class Seq>
struct has_partial_attr;
template <class A, std::size_t... M>
struct has_partial_attr<A, std::index_sequence<M...>>
    : std::bool_constant<(false || ... ||
                          is_partial_v<cute::remove_cvref_t<cute::tuple_element_t<M, A>>>)> {};

// The index of a thread's first element: its mesh coordinate along each mesh axis splitting a
// reduced mode, at that mode's colexicographic stride among the reduced modes of the full shape.
template <class Split, class Src>
TILEFOUNDRY_DEVICE std::int64_t arg_offset(Src const& src) {
  if constexpr (is_distributed_v<Src>) {
    auto const& sl = shard_layout_of(src);
    auto const shape = cute::wrap(sl.layout.shape());
    using A = cute::remove_cvref_t<decltype(sl.attrs)>;
    constexpr int rank = cute::tuple_size<decltype(shape)>::value;
    auto const coord = sl.mesh.local_index();
    std::int64_t offset = 0, stride = 1;
    cute::for_each(cute::make_int_sequence<rank>{}, [&](auto k) {
      constexpr int K = decltype(k)::value;
      if constexpr (reduced_mode<Split, K>::value) {
        constexpr int m = mesh_axis_splitting<A, K>();
        if constexpr (m >= 0) offset += std::int64_t(cute::get<m>(coord)) * stride;
        stride *= std::int64_t(cute::get<K>(shape));
      }
    });
    return offset;
  } else {
    (void)src;
    return 0;
  }
}

// The positions of a view's reduced elements, by their local linear index: the local reduced
// shape at the full shape's colexicographic strides.
template <class Split, class Src, class View>
TILEFOUNDRY_DEVICE auto arg_positions(Src const& src, View const& view) {
  auto const full =
      select_modes(cute::make_layout(cute::wrap(full_shape(src))), typename Split::reduced{});
  return cute::make_layout(reduced_layout<Split>(view).shape(),
                           cute::compact_col_major(full.shape()));
}

// Which elements a fold takes: all of them (arg_reduce), or those a pair beats (ops::topk's passes
// after the first: what the previous pass picked beats exactly the elements not picked yet).
struct admit_all {
  template <class P>
  TILEFOUNDRY_DEVICE bool operator()(P const&) const {
    return true;
  }
};

// A thread's fold of the elements of kept index j (positions from arg_positions, plus offset)
// that `admit` takes.
template <class Op, class Acc, class Split, class SrcView, class Positions, class Admit = admit_all>
TILEFOUNDRY_DEVICE arg_pair<Acc> fold_arg_local(SrcView const& src, int j, Positions const& pos,
                                                std::int64_t offset, Admit const& admit = {}) {
  auto const base = src.data() + kept_layout<Split>(src)(j);
  auto const red = reduced_layout<Split>(src);
  int const n = int(cute::size(red));
  arg_pair<Acc> acc = arg_traits<Op>::template identity<Acc>();
  for (int r = 0; r < n; ++r) {
    arg_pair<Acc> const x{static_cast<Acc>(to_compute(base[red(r)])),
                          offset + std::int64_t(pos(r))};
    if (admit(x)) acc = arg_combine<Op>(acc, x);
  }
  return acc;
}

template <class Src, class Dst>
TILEFOUNDRY_DEVICE constexpr void check_arg_operands() {
  using D = value_t<decltype(view_of(std::declval<Dst&>()))>;
  static_assert(std::is_integral_v<D> && !std::is_same_v<D, bool>,
                "ops::arg_reduce: the destination holds integer positions (int64)");
  if constexpr (is_distributed_v<Src>) {
    using A = cute::remove_cvref_t<decltype(shard_layout_of(std::declval<Src const&>()).attrs)>;
    static_assert(!has_partial_attr<A, std::make_index_sequence<attr_count<A>>>::value,
                  "ops::arg_reduce: a partial source has no positions to pick from");
  }
}

// The tiers that keep every pair in registers (plain, and on the device intra_warp): a thread's
// fold, completed by `complete` (nothing, or lane shuffles), stored by the instances that store.
template <class Op, class Axes, class Src, class Dst, class Stage, class Complete>
TILEFOUNDRY_DEVICE void arg_reduce_in_registers(Src const& src, Dst&& dst, Stage const& stage,
                                                Complete const& complete) {
  using Plan = reduce_plan_t<max_op, Axes, Src, Dst>;
  check_arg_operands<Src, Dst>();
  auto const view = view_of(src);
  auto const d = view_of(dst);
  check_sizes<Plan, decltype(view), decltype(d)>();
  using Acc = compute_t<value_t<decltype(view)>>;
  using D = value_t<decltype(d)>;
  auto const& s = stage(view);
  auto const pos = arg_positions<typename Plan::split>(src, view);
  std::int64_t const offset = arg_offset<typename Plan::split>(src);
  auto const dl = dst_kept_layout<Plan>(d);
  bool const store =
      stores_result<Plan, decltype(d)>(dst, std::make_index_sequence<Plan::n_dst_broadcast>{});
  for (int j = 0; j < int(cute::size(dl)); ++j) {
    arg_pair<Acc> const acc =
        complete(fold_arg_local<Op, Acc, typename Plan::split>(s, j, pos, offset));
    if (store) d.data()[dl(j)] = static_cast<D>(acc.index == INT64_MAX ? 0 : acc.index);
  }
}

}  // namespace detail
}  // namespace ops
}  // namespace tilefoundry

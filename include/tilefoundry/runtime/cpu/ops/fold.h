// An elementwise call that folds a reduction of its results as it stores them, on the CPU target
// (codegen/cpu/chains.py): ops::binary(op, a, b, out, ops::fold<Red, Axes>(dst)) is
// ops::binary(op, a, b, out) followed by ops::reduce<Red, Axes>(out, dst), in one pass over out
// where the two calls make two (a softmax's exponential and its sum). The fold takes each result as
// it is stored (converted to out's type) in the order ops::reduce folds out (reduce_local.h: a sum
// into fold_lanes partials, then the tail; a max or min in vectors of the register's width), so
// dst gets what the reduction would have given, bit for bit. A reduction that keeps elements (one
// result per kept index) and a counted copy run as the two calls.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/cpu/ops/binary.h>
#include <tilefoundry/runtime/cpu/ops/reduce.h>
#include <tilefoundry/runtime/cpu/ops/ternary.h>
#include <tilefoundry/runtime/cpu/ops/unary.h>

namespace tilefoundry {
namespace ops {

/// ops::reduce<Red, Axes>(out, dst) run by the elementwise call writing out (ops::fold).
template <class Red, class Axes, class Dst>
struct folding {
  Dst& dst;
};

/// The reduction an elementwise call folds as it stores its results: into dst, as
/// ops::reduce<Red, Axes>(out, dst) would.
template <class Red, class Axes, class Dst>
inline folding<Red, Axes, Dst> fold(Dst& dst) {
  return {dst};
}

namespace detail {

// Whether a fold runs in the elementwise pass: the reduction keeps one element (the kept modes of
// out, if any, have extent 1), so that it folds out's elements in their linear order, the order
// the elementwise call stores them in.
template <class Red, class Axes, class Out, class Dst>
constexpr bool folds_in_pass() {
  using Plan = reduce_plan_t<Red, Axes, Out, Dst>;
  using View = decltype(view_of(std::declval<Out const&>()));
  using Kept = decltype(cute::size(kept_layout<typename Plan::split>(std::declval<View>())));
  if constexpr (cute::is_static<Kept>::value) {
    return Kept::value == 1;
  } else {
    return false;
  }
}

// Stores value(i), converted to out's type, at o(i) for every element, and returns the fold of the
// stored elements as fold_local folds them (fold_entered, in the same order; before the
// reduction's finish: a mean's division).
template <class Red, class Out, class Value>
inline auto store_and_fold(Out const& o, Value const& value) {
  using T = reduce_traits<Red>;
  using D = value_t<Out>;
  using Acc = compute_t<D>;
  auto const put = [&](auto at) {  // (fold_entered reads at an int or a long: stores at a long)
    long const i = at;
    D const v = convert<D>(value(int(i)));
    o(i) = v;
    return T::enter(static_cast<Acc>(to_compute(v)));
  };
  return fold_entered<T, Acc>(put, int(cute::size(o)));
}

// Stores a fold of out into dst as reduce_in_registers stores it.
template <class Red, class Axes, class Out, class Dst, class Acc>
inline void store_fold(Out const& out, Dst& dst, Acc acc) {
  using Plan = reduce_plan_t<Red, Axes, Out, Dst>;
  static_assert(Plan::tier == reduce_tier::plain,
                "ops::fold: the CPU target's thread level has extent 1");
  auto const d = view_of(dst);
  check_sizes<Plan, decltype(view_of(out)), decltype(d)>();
  auto const count = reduced_count_of<typename Plan::split>(out);
  bool const store =
      stores_result<Plan, decltype(d)>(dst, std::make_index_sequence<Plan::n_dst_broadcast>{});
  if (store)
    d.data()[dst_kept_layout<Plan>(d)(0)] = convert<value_t<decltype(d)>>(finish<Red>(acc, count));
}

// out(i) = value(i) for every element, and the fold f of out, in one pass.
template <class Red, class Axes, class RDst, class Out, class Value>
inline void apply_folding(Out& out, Value const& value, folding<Red, Axes, RDst> const& f) {
  auto const acc = store_and_fold<Red>(view_of(out), value);
  store_fold<Red, Axes>(out, f.dst, acc);
}

template <class Red, class Axes, class Out, class RDst>
constexpr bool folds_v = folds_in_pass<Red, Axes, cute::remove_cvref_t<Out>, RDst>();

}  // namespace detail

/// ops::unary(op, src, dst), then ops::reduce<Red, Axes>(dst, fold's dst), in one pass.
template <class Op, class Src, class Dst, class Red, class Axes, class RDst>
inline void unary(Op const& op, Src const& src, Dst&& dst, folding<Red, Axes, RDst> const& f) {
  if constexpr (detail::folds_v<Red, Axes, Dst, RDst> && !std::is_base_of_v<copy_n_op, Op>) {
    auto const s = detail::view_of(src);
    unary_impl::on_compute<Op> const fn{op};
    detail::apply_folding(
        dst, [&](int i) { return fn(s(i)); }, f);
  } else {
    unary(op, src, dst);
    reduce<Red, Axes>(dst, f.dst);
  }
}

/// ops::binary(op, a, b, out), then ops::reduce<Red, Axes>(out, fold's dst), in one pass.
template <class Op, class A, class B, class Out, class Red, class Axes, class RDst>
inline void binary(Op const& op, A const& a, B const& b, Out&& out,
                   folding<Red, Axes, RDst> const& f) {
  if constexpr (detail::folds_v<Red, Axes, Out, RDst>) {
    auto const o = detail::view_of(out);
    auto const va = binary_impl::operand(binary_impl::entry_operand(a), o.shape());
    auto const vb = binary_impl::operand(binary_impl::entry_operand(b), o.shape());
    using C = binary_impl::compute_of_t<cute::remove_cvref_t<decltype(va)>,
                                        cute::remove_cvref_t<decltype(vb)>>;
    binary_impl::on_compute<Op, C> const fn{op};
    detail::apply_folding(
        out, [&](int i) { return fn(binary_impl::element(va, i), binary_impl::element(vb, i)); },
        f);
  } else {
    binary(op, a, b, out);
    reduce<Red, Axes>(out, f.dst);
  }
}

/// ops::ternary(op, c, a, b, out), then ops::reduce<Red, Axes>(out, fold's dst), in one pass.
template <class Op, class C, class A, class B, class Out, class Red, class Axes, class RDst>
inline void ternary(Op const& op, C const& c, A const& a, B const& b, Out&& out,
                    folding<Red, Axes, RDst> const& f) {
  if constexpr (detail::folds_v<Red, Axes, Out, RDst>) {
    auto const o = detail::view_of(out);
    auto const vc = binary_impl::operand(binary_impl::entry_operand(c), o.shape());
    auto const va = binary_impl::operand(binary_impl::entry_operand(a), o.shape());
    auto const vb = binary_impl::operand(binary_impl::entry_operand(b), o.shape());
    using T = binary_impl::compute_of_t<cute::remove_cvref_t<decltype(va)>,
                                        cute::remove_cvref_t<decltype(vb)>>;
    detail::apply_folding(
        out,
        [&](int i) {
          return op(static_cast<bool>(binary_impl::element(vc, i)),
                    static_cast<T>(detail::to_compute(binary_impl::element(va, i))),
                    static_cast<T>(detail::to_compute(binary_impl::element(vb, i))));
        },
        f);
  } else {
    ternary(op, c, a, b, out);
    reduce<Red, Axes>(out, f.dst);
  }
}

}  // namespace ops
}  // namespace tilefoundry

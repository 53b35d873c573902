// The split form of the reduce and arg-reduce families: reductions along rows too long for one CTA
// (of the logits a matmul just computed: greedy decoding's argmax, the row's largest and smallest
// value, a sum or mean), found in two steps, every reduction of the same rows at once.
//
//   ops::reduce_parts(tile, col0, part_of<Op>(values[, positions])...)
//       each CTA folds its tile of the rows (M x T, the columns from col0) into one part a row for
//       each reduction: a float (reduce_traits<Op>: a sum, mean, maximum, minimum or largest
//       magnitude), or a (value, position) pair for an argmax / argmin (arg_traits<Op>);
//   ops::reduce_merges(count, merge_of<Op>(values[, positions], out)...)
//       one CTA folds every part of a row (S x M, part s of row m at (s, m)) into the row's result:
//       a mean divides by `count`, the row's length; an arg-reduction writes the position.
//
// One pass over the tile, and over the parts, for every reduction: each thread reads its values of
// all of them before it combines any, and the CTA's values meet at one pair of barriers
// (split_fold::fold_each). Pairs fold in a total order (the first largest, NaN counting as the
// largest, as torch.argmax), whatever the grouping; a maximum or minimum is NaN where the row
// holds one, as torch's; a sum or mean adds in float, in another order than torch's. Values fold
// as float: every element type the matmul writes (f32, bf16, f16) converts to it exactly.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/numeric.h>
#include <tilefoundry/runtime/common/ops/reduce_arg.h>
#include <tilefoundry/runtime/common/ops/reduce_ops.h>
#include <tilefoundry/runtime/common/ops/split_fold.h>

#include <cstddef>
#include <cstdint>
#include <utility>

namespace tilefoundry {
namespace ops {
namespace split_reduce {

using Pair = detail::arg_pair<float>;

template <class Op>
constexpr bool is_arg_v = std::is_same_v<Op, argmax_op> || std::is_same_v<Op, argmin_op>;

/// A float reduction's fold (reduce_traits<Op>) of at(i), a part's columns or a merge's parts.
template <class Op, class At>
TILEFOUNDRY_DEVICE auto value_fold(At const& at) {
  using Traits = detail::reduce_traits<Op>;
  return split_fold::fold_of(
      Traits::template identity<float>(), [](float a, float b) { return Traits::combine(a, b); },
      at);
}

/// An arg-reduction's fold (arg_traits<Op>) of at(i), (value, position) pairs.
template <class Op, class At>
TILEFOUNDRY_DEVICE auto pair_fold(At const& at) {
  return split_fold::fold_of(
      detail::arg_traits<Op>::template identity<float>(),
      [](Pair const& a, Pair const& b) { return detail::arg_combine<Op>(a, b); }, at);
}

/// A reduction's parts: where each row's part goes (a float, reduce_traits<Op>).
template <class Op, class Values>
struct value_part {
  Values values;
  using Traits = detail::reduce_traits<Op>;
  /// The fold of row m's columns, at(n) the n-th element (as float).
  template <class Element>
  TILEFOUNDRY_DEVICE auto fold(Element const& element, int64_t) const {
    return value_fold<Op>([element](int64_t n) { return Traits::enter(element(n)); });
  }
  TILEFOUNDRY_DEVICE void write(int64_t m, float v) const { values(m) = v; }
};

/// An arg-reduction's parts: each row's (value, position) pair (arg_traits<Op>).
template <class Op, class Values, class Positions>
struct pair_part {
  Values values;
  Positions positions;
  template <class Element>
  TILEFOUNDRY_DEVICE auto fold(Element const& element, int64_t col0) const {
    return pair_fold<Op>([element, col0](int64_t n) { return Pair{element(n), col0 + n}; });
  }
  TILEFOUNDRY_DEVICE void write(int64_t m, Pair const& p) const {
    values(m) = p.value;
    positions(m) = p.index;
  }
};

/// A reduction's merge: row m's result into out(m), from its parts (S x M).
template <class Op, class Values, class Out>
struct value_merge {
  Values values;
  Out out;
  using Traits = detail::reduce_traits<Op>;
  TILEFOUNDRY_DEVICE int64_t parts() const { return int64_t(cute::size<0>(values)); }
  TILEFOUNDRY_DEVICE auto fold(int64_t m) const {
    Values const v = values;
    return value_fold<Op>([v, m](int64_t s) { return float(v(s, m)); });
  }
  TILEFOUNDRY_DEVICE void write(int64_t m, float v, int64_t count) const {
    using T = cute::remove_cvref_t<decltype(out(0))>;
    if constexpr (Traits::divides) v = v / float(count);
    out(m) = detail::convert<T>(v);
  }
};

/// An arg-reduction's merge: row m's position into out(m) (0 for a row of none).
template <class Op, class Values, class Positions, class Out>
struct pair_merge {
  Values values;
  Positions positions;
  Out out;
  TILEFOUNDRY_DEVICE int64_t parts() const { return int64_t(cute::size<0>(values)); }
  TILEFOUNDRY_DEVICE auto fold(int64_t m) const {
    Values const v = values;
    Positions const p = positions;
    return pair_fold<Op>([v, p, m](int64_t s) { return Pair{v(s, m), int64_t(p(s, m))}; });
  }
  TILEFOUNDRY_DEVICE void write(int64_t m, Pair const& r, int64_t) const {
    out(m) = r.index == INT64_MAX ? 0 : r.index;
  }
};

template <class Tile, class... P, std::size_t... I>
TILEFOUNDRY_DEVICE void parts_of_row(Tile const& tile, int64_t m, int64_t cols, int64_t col0,
                                     std::index_sequence<I...>, P const&... p) {
  auto const element = [&tile, m](int64_t n) { return detail::convert<float>(tile(m, n)); };
  auto folds = cute::make_tuple(p.fold(element, col0)...);
  split_fold::fold_each(cols, cute::get<I>(folds)...);
  if (split_fold::writes()) (p.write(m, cute::get<I>(folds).mine), ...);
}

template <class... M, std::size_t... I>
TILEFOUNDRY_DEVICE void merges_of_row(int64_t m, int64_t count, std::index_sequence<I...>,
                                      M const&... r) {
  auto folds = cute::make_tuple(r.fold(m)...);
  int64_t const parts = cute::get<0>(cute::make_tuple(r.parts()...));
  split_fold::fold_each(parts, cute::get<I>(folds)...);
  if (split_fold::writes()) (r.write(m, cute::get<I>(folds).mine, count), ...);
}

/// Each row's part of a CTA's tile (M x T, the columns from col0) for every reduction given (read
/// after the barrier of split_fold::each_row).
template <class Tile, class... P>
TILEFOUNDRY_DEVICE void parts(Tile const& tile, int64_t col0, P const&... p) {
  split_fold::each_row(tile, [&](int64_t m, int64_t cols) {
    parts_of_row(tile, m, cols, col0, std::index_sequence_for<P...>{}, p...);
  });
}

/// Each row's result of every reduction given, from its parts (all of one count of parts), of a
/// row of `count` elements.
template <class... M>
TILEFOUNDRY_DEVICE void merges(int64_t count, M const&... r) {
  int64_t const rows = cute::get<0>(cute::make_tuple(int64_t(cute::size<1>(r.values))...));
  for (int64_t m = 0; m < rows; ++m) {
    merges_of_row(m, count, std::index_sequence_for<M...>{}, r...);
  }
}

}  // namespace split_reduce

/// Where a CTA's part of each row goes for reduction Op (ops::reduce_parts): values(m), a float;
/// for an arg-reduction (argmax_op, argmin_op) also positions(m), the pair's position.
template <class Op, class Values>
TILEFOUNDRY_DEVICE split_reduce::value_part<Op, Values> part_of(Values const& values) {
  static_assert(!split_reduce::is_arg_v<Op>, "ops::part_of: an arg-reduction's part has positions");
  return {values};
}
template <class Op, class Values, class Positions>
TILEFOUNDRY_DEVICE split_reduce::pair_part<Op, Values, Positions> part_of(
    Values const& values, Positions const& positions) {
  static_assert(split_reduce::is_arg_v<Op>, "ops::part_of: positions are an arg-reduction's");
  return {values, positions};
}

/// Reduction Op's merge (ops::reduce_merges): out(m) from every CTA's part of row m (values, and
/// an arg-reduction's positions, S x M).
template <class Op, class Values, class Out>
TILEFOUNDRY_DEVICE split_reduce::value_merge<Op, Values, Out> merge_of(Values const& values,
                                                                       Out const& out) {
  static_assert(!split_reduce::is_arg_v<Op>,
                "ops::merge_of: an arg-reduction's merge has positions");
  return {values, out};
}
template <class Op, class Values, class Positions, class Out>
TILEFOUNDRY_DEVICE split_reduce::pair_merge<Op, Values, Positions, Out> merge_of(
    Values const& values, Positions const& positions, Out const& out) {
  static_assert(split_reduce::is_arg_v<Op>, "ops::merge_of: positions are an arg-reduction's");
  return {values, positions, out};
}

}  // namespace ops
}  // namespace tilefoundry

// The reduce family's split form: a reduction along rows too long for one CTA (a sum, mean,
// maximum, minimum or largest magnitude of the logits a matmul just computed), found in two
// steps, as the arg-reduction family's split form finds positions (arg_split.h). First each CTA
// folds its tile of the rows (M x T) into one value a row, its part; then one CTA folds every
// part of a row into the row's result (a mean then divides by the row's length). Values enter and
// fold as reduce_traits<Op> says (reduce_ops.h: NaN wins a maximum or minimum, as in torch), in
// float: each part is a float, whatever the element type (f32, bf16 or f16).
//
// Both targets run these bodies (TILEFOUNDRY_DEVICE), folding as split_fold.h does (on CUDA the
// CTA's threads stride over a row, thread 0 writes). Every thread of the CTA must make the call.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/numeric.h>
#include <tilefoundry/runtime/common/ops/reduce_ops.h>
#include <tilefoundry/runtime/common/ops/split_fold.h>

#include <cstdint>

namespace tilefoundry {
namespace ops {
namespace reduce_split {

/// Op over at(i) for i in [0, count), from Op's identity (split_fold::fold: valid in thread 0).
template <class Op, class At>
TILEFOUNDRY_DEVICE float fold(int64_t count, At const& at) {
  using Traits = detail::reduce_traits<Op>;
  return split_fold::fold(
      Traits::template identity<float>(), count,
      [](float a, float b) { return Traits::combine(a, b); }, at);
}

/// Each row's part of a CTA's tile (M x T): part_value(m) = Op over the row's T elements, each
/// entering as Op says (a largest magnitude takes |x|; read after the barrier of
/// split_fold::each_row).
template <class Op, class Tile, class Values>
TILEFOUNDRY_DEVICE void part(Tile const& tile, Values&& part_value) {
  using Traits = detail::reduce_traits<Op>;
  split_fold::each_row(tile, [&](int64_t m, int64_t cols) {
    float const v = fold<Op>(
        cols, [&](int64_t n) { return Traits::enter(detail::convert<float>(tile(m, n))); });
    if (split_fold::writes()) part_value(m) = v;
  });
}

/// Each row's result from its parts (S x M, part s of row m at (s, m)) of a row of `count`
/// elements: out(m) = Op over the row's S parts, divided by `count` for a mean, rounded once to
/// out's element type.
template <class Op, class Values, class Out>
TILEFOUNDRY_DEVICE void merge(Values const& values, int64_t count, Out&& out) {
  using T = cute::remove_cvref_t<decltype(out(0))>;
  int64_t const parts = int64_t(cute::size<0>(values));
  int64_t const rows = int64_t(cute::size<1>(values));
  for (int64_t m = 0; m < rows; ++m) {
    float v = fold<Op>(parts, [&](int64_t s) { return float(values(s, m)); });
    if constexpr (detail::reduce_traits<Op>::divides) v = v / float(count);
    if (split_fold::writes()) out(m) = detail::convert<T>(v);
  }
}

}  // namespace reduce_split
}  // namespace ops
}  // namespace tilefoundry

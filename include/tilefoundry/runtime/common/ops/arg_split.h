// The arg-reduction family's split form: the position of the element an order picks along rows
// too long for one CTA, found in two steps. First each CTA folds its tile of the rows (M x T, the
// columns from col0: an argmax fused after the matmul that computed the tile, its logits) into
// one (value, position) pair a row, its part; then one CTA merges every part of a row into the
// row's position. Pairs fold by arg_traits<Op>::beats (reduce_arg.h), a total order, so the
// result is torch.argmax's (the first largest, NaN counting as the largest) whatever the grouping.
// Values fold as float: every element type converts to it exactly and in order.
//
// Both targets run these bodies (TILEFOUNDRY_DEVICE), folding as split_fold.h does (on CUDA the
// CTA's threads stride over a row, thread 0 writes). Every thread of the CTA must make the call.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/numeric.h>
#include <tilefoundry/runtime/common/ops/reduce_arg.h>
#include <tilefoundry/runtime/common/ops/split_fold.h>

#include <cstdint>

namespace tilefoundry {
namespace ops {
namespace arg_split {

using Pair = detail::arg_pair<float>;

/// The pair Op picks among at(i) for i in [0, count) (split_fold::fold: valid in thread 0).
template <class Op, class At>
TILEFOUNDRY_DEVICE Pair fold(int64_t count, At const& at) {
  return split_fold::fold(
      detail::arg_traits<Op>::template identity<float>(), count,
      [](Pair const& a, Pair const& b) { return detail::arg_combine<Op>(a, b); }, at);
}

/// Each row's part of a CTA's tile (M x T, the columns from col0): part_value(m) and
/// part_position(m) the pair Op picks among the row's T elements, at positions col0 + n (read
/// after the barrier of split_fold::each_row).
template <class Op, class Tile, class Values, class Positions>
TILEFOUNDRY_DEVICE void part(Tile const& tile, int64_t col0, Values&& part_value,
                             Positions&& part_position) {
  split_fold::each_row(tile, [&](int64_t m, int64_t cols) {
    Pair const p = fold<Op>(cols, [&](int64_t n) {
      return Pair{detail::convert<float>(tile(m, n)), col0 + n};
    });
    if (split_fold::writes()) {
      part_value(m) = p.value;
      part_position(m) = p.index;
    }
  });
}

/// Each row's position from its parts (values and positions S x M, part s of row m at (s, m)):
/// out(m) = the position of the pair Op picks among the row's S parts (0 for a row of none).
template <class Op, class Values, class Positions, class Out>
TILEFOUNDRY_DEVICE void merge(Values const& values, Positions const& positions, Out&& out) {
  int64_t const parts = int64_t(cute::size<0>(values));
  int64_t const rows = int64_t(cute::size<1>(values));
  for (int64_t m = 0; m < rows; ++m) {
    Pair const p = fold<Op>(parts, [&](int64_t s) {
      return Pair{values(s, m), int64_t(positions(s, m))};
    });
    if (split_fold::writes()) out(m) = p.index == INT64_MAX ? 0 : p.index;
  }
}

}  // namespace arg_split
}  // namespace ops
}  // namespace tilefoundry

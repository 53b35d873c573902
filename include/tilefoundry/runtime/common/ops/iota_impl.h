// iota_impl::apply: the body of ops::iota, positions as values (torch.arange along a row). Both
// targets' entries run it, so that the two cannot drift apart in which position an element holds.
//
// An element's position is the one ops::arg_reduce gives it (reduce_arg.h): its colexicographic
// index among the modes Axes names in the destination's full (canonical) shape, found from the
// local view and, for a ShardTensor, the instance's mesh coordinate along the axes that split
// those modes. Along a row laid out as (vector, threads, per-thread count), its place in the row.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/reduce_arg.h>
#include <tilefoundry/runtime/common/ops/reduce_plan.h>

#include <cstdint>

namespace tilefoundry {
namespace ops {
namespace iota_impl {

// Element at position p of the modes Axes becomes start + step * p, computed in int64 and
// converted once to the destination's element type (exact for every integer type, as
// torch.arange's integer results are).
template <class Axes, class Dst>
TILEFOUNDRY_DEVICE void apply(Dst&& dst, std::int64_t start, std::int64_t step) {
  auto const d = detail::view_of(dst);
  constexpr int kRank = int(cute::rank_v<decltype(cute::wrap(detail::full_shape(dst)))>);
  using Split = detail::axis_split<kRank, Axes>;
  static_assert(Split::n_kept == 0,
                "ops::iota: Axes names every mode of the destination (the positions of a row)");
  using D = detail::value_t<decltype(d)>;
  auto const pos = detail::arg_positions<Split>(dst, d);
  auto const red = detail::reduced_layout<Split>(d);
  std::int64_t const offset = detail::arg_offset<Split>(dst);
  for (int r = 0; r < int(cute::size(red)); ++r) {
    d.data()[red(r)] = detail::convert<D>(start + step * (offset + std::int64_t(pos(r))));
  }
}

}  // namespace iota_impl
}  // namespace ops
}  // namespace tilefoundry

// reduce_axis_impl::apply: the body of ops::reduce_axis, a reduction across the rows of a tile in
// memory (the experts' outputs summed per token): out(d) = Op over e of src(e, d). Both targets'
// entries run it. The CTA's threads share the columns d, each folding its columns down the rows
// in the compute type with reduce's own identity and combine (a mean divides by the row count).
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/numeric.h>
#include <tilefoundry/runtime/common/ops/reduce_ops.h>
#include <tilefoundry/runtime/common/topology.h>

#include <cstdint>

namespace tilefoundry {
namespace ops {
namespace reduce_axis_impl {

/// out(d) = Op over e < size<0>(src) of src(e, d), for every d < size(out) = size<1>(src).
template <class Op, class Src, class Out>
TILEFOUNDRY_DEVICE void apply(Src const& src, Out&& out) {
  using T = cute::remove_cvref_t<decltype(out(0))>;
  using C = detail::compute_t<cute::remove_cvref_t<decltype(src(0, 0))>>;
  using Traits = detail::reduce_traits<Op>;
  int64_t const rows = int64_t(cute::size<0>(src));
  int64_t const cols = int64_t(cute::size(out));
  int64_t const threads =
      int64_t(program_dim<detail::dependent_level<TopologyScope::thread, Out>>());
  int64_t const first = int64_t(program_id<detail::dependent_level<TopologyScope::thread, Out>>());
  for (int64_t d = first; d < cols; d += threads) {
    C acc = Traits::template identity<C>();
    for (int64_t e = 0; e < rows; ++e) {
      acc = Traits::combine(acc, Traits::enter(detail::to_compute(src(e, d))));
    }
    if constexpr (Traits::divides) acc = acc / C(rows);
    out(d) = detail::convert<T>(acc);
  }
}

}  // namespace reduce_axis_impl
}  // namespace ops
}  // namespace tilefoundry

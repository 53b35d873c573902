// rope_impl::apply: the body of ops::rope, one row of head_dim elements rotated by its position's
// cos / sin rows. Both targets' entries run it, so that the two cannot drift apart in rounding.
//
// Rotate-half, as the evaluator computes it in Compute: out = x * cos + rotate_half(x) * sin, where
// rotate_half(x) is (-x[half:], x[:half]). The CTA's threads share the row's pairs (j, j + half),
// each pair read once and both its results written by one thread.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/numeric.h>
#include <tilefoundry/runtime/common/topology.h>

namespace tilefoundry {
namespace ops {
namespace rope_impl {

/// out(j) = x(j) * cos(j) - x(j + half) * sin(j) and out(j + half) = x(j + half) * cos(j + half)
/// + x(j) * sin(j + half) for j < half = size(x) / 2, in Compute, rounded once into out's type.
template <class Compute, class X, class C, class S, class Out>
TILEFOUNDRY_DEVICE void apply(X const& x, C const& cos, S const& sin, Out&& out) {
  using T = cute::remove_cvref_t<decltype(out(0))>;
  int64_t const half = int64_t(cute::size(x)) / 2;
  int64_t const threads =
      int64_t(program_dim<detail::dependent_level<TopologyScope::thread, Out>>());
  for (int64_t j = int64_t(program_id<detail::dependent_level<TopologyScope::thread, Out>>());
       j < half; j += threads) {
    Compute const x1 = detail::convert<Compute>(x(j));
    Compute const x2 = detail::convert<Compute>(x(j + half));
    Compute const first = x1 * detail::convert<Compute>(cos(j));
    Compute const second = x2 * detail::convert<Compute>(cos(j + half));
    out(j) = detail::convert<T>(first - x2 * detail::convert<Compute>(sin(j)));
    out(j + half) = detail::convert<T>(second + x1 * detail::convert<Compute>(sin(j + half)));
  }
}

}  // namespace rope_impl
}  // namespace ops
}  // namespace tilefoundry

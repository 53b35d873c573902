// fill_impl::apply: the body of ops::fill. Both targets' entries run it, so that the two cannot
// drift apart in how the value is converted or which elements it reaches.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/fast_path.h>
#include <tilefoundry/runtime/common/ops/operand.h>

namespace tilefoundry {
namespace ops {
namespace fill_impl {

// The value every element becomes, as the fast path takes it (a function of no input).
template <class V>
struct constant {
  V v;
  TILEFOUNDRY_DEVICE V operator()() const { return v; }
};

// val is converted once, to the destination's element type, not once per element.
template <class Dst, class Value, class Fast = detail::no_fast_path>
TILEFOUNDRY_DEVICE void apply(Dst&& dst, Value val, Fast const& fast = {}) {
  auto d = detail::view_of(dst);
  auto const v = detail::convert<detail::value_t<decltype(d)>>(val);
  if (fast(constant<decltype(detail::to_compute(v))>{detail::to_compute(v)}, d)) return;
  CUTE_UNROLL
  for (int i = 0; i < int(cute::size(d)); ++i) d(i) = v;
}

}  // namespace fill_impl
}  // namespace ops
}  // namespace tilefoundry

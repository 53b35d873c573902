// fill_impl::apply: the body of ops::fill. Both targets' entries run it, so that the two cannot
// drift apart in how the value is converted or which elements it reaches.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/operand.h>

namespace tilefoundry {
namespace ops {
namespace fill_impl {

// val is converted once, to the destination's element type, not once per element.
template <class Dst, class Value>
TILEFOUNDRY_DEVICE void apply(Dst&& dst, Value val) {
  auto d = detail::view_of(dst);
  auto const v = detail::convert<detail::value_t<decltype(d)>>(val);
  CUTE_UNROLL
  for (int i = 0; i < int(cute::size(d)); ++i) d(i) = v;
}

}  // namespace fill_impl
}  // namespace ops
}  // namespace tilefoundry

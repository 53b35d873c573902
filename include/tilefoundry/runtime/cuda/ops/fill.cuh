// ops::fill on the CUDA target.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/operand.h>

namespace tilefoundry {
namespace ops {

/// Every element of dst (its local view, for a ShardTensor) becomes val.
template <class Dst, class Value>
__device__ void fill(Dst&& dst, Value val) {
  auto d = detail::view_of(dst);
  auto const v = detail::convert<detail::value_t<decltype(d)>>(val);
  CUTE_UNROLL
  for (int i = 0; i < int(cute::size(d)); ++i) d(i) = v;
}

}  // namespace ops
}  // namespace tilefoundry

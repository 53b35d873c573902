// ops::fill on the CPU target. Only the annotation is this target's: the body is
// fill_impl::apply, which the CUDA target's entry runs too.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/fill_impl.h>

namespace tilefoundry {
namespace ops {

/// Every element of dst (its local view, for a ShardTensor) becomes val.
template <class Dst, class Value>
inline void fill(Dst&& dst, Value val) {
  fill_impl::apply(dst, val);
}

}  // namespace ops
}  // namespace tilefoundry

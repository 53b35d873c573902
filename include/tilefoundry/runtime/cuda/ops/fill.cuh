// ops::fill on the CUDA target: the body is fill_impl::apply, which the CPU target's entry runs
// too; this target adds its annotation and its 16-byte vector path (common/ops/vector_groups.h).
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/fill_impl.h>
#include <tilefoundry/runtime/common/ops/vector_groups.h>

namespace tilefoundry {
namespace ops {

/// Every element of dst (its local view, for a ShardTensor) becomes val.
template <class Dst, class Value>
__device__ void fill(Dst&& dst, Value val) {
  fill_impl::apply(dst, val, detail::vector_path{});
}

}  // namespace ops
}  // namespace tilefoundry

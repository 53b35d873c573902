// ops::iota on the CUDA target: the body is iota_impl::apply, which the CPU target's entry runs
// too; this target adds its annotation.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/iota_impl.h>

namespace tilefoundry {
namespace ops {

/// Each element of dst (its local view, for a ShardTensor) becomes start + step * its position
/// among the modes Axes (every mode of dst: its place in the row), as torch.arange gives it.
template <class Axes, class Dst>
__device__ void iota(Dst&& dst, std::int64_t start, std::int64_t step) {
  iota_impl::apply<Axes>(dst, start, step);
}

}  // namespace ops
}  // namespace tilefoundry

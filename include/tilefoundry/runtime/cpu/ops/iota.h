// ops::iota on the CPU target. Only the annotation is this target's: the body is
// iota_impl::apply, which the CUDA target's entry runs too.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/iota_impl.h>

namespace tilefoundry {
namespace ops {

/// Each element of dst (its local view, for a ShardTensor) becomes start + step * its position
/// among the modes Axes (every mode of dst: its place in the row), as torch.arange gives it.
template <class Axes, class Dst>
inline void iota(Dst&& dst, std::int64_t start, std::int64_t step) {
  iota_impl::apply<Axes>(dst, start, step);
}

}  // namespace ops
}  // namespace tilefoundry

// ops::unary on the CUDA target: the body is unary_impl::apply, which the CPU target's entry runs
// too; this target adds its annotation and its 16-byte vector path (common/ops/vector_groups.h).
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/unary_impl.h>
#include <tilefoundry/runtime/common/ops/vector_groups.h>

namespace tilefoundry {
namespace ops {

/// The unary family's one entry: dst(i) = op(src(i)) for a unary tag (cast_op, clamp_op, ...).
template <class Op, class Src, class Dst>
__device__ void unary(Op const& op, Src const& src, Dst&& dst) {
  unary_impl::apply(op, src, dst, detail::vector_path{});
}

}  // namespace ops
}  // namespace tilefoundry

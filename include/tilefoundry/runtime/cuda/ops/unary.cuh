// ops::unary on the CUDA target.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/unary_impl.h>

namespace tilefoundry {
namespace ops {

/// The unary family's one entry: dst(i) = op(src(i)) for a unary tag (cast_op, clamp_op, ...).
template <class Op, class Src, class Dst>
__device__ void unary(Op const& op, Src const& src, Dst&& dst) {
  unary_impl::Unary<Op>::run(op, detail::view_of(src), detail::view_of(dst));
}

}  // namespace ops
}  // namespace tilefoundry

// ops::reduce_axis on the CUDA target: the body is reduce_axis_impl::apply, which the CPU target's
// entry runs too; the CTA's threads share the columns.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/reduce_axis_impl.h>

namespace tilefoundry {
namespace ops {

/// A reduction across the rows of a tile in memory: out(d) = Op over e of src(e, d), Op one of
/// reduce's (sum_op, mean_op, max_op, min_op, absmax_op), in the compute type.
template <class Op, class Src, class Out>
__device__ void reduce_axis(Src const& src, Out&& out) {
  reduce_axis_impl::apply<Op>(src, out);
}

}  // namespace ops
}  // namespace tilefoundry

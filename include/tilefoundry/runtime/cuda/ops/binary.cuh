// ops::binary on the CUDA target: the body is binary_impl::apply, which the CPU target's entry runs
// too; this target adds its annotation and its 16-byte vector path (common/ops/vector_groups.h).
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/binary_impl.h>
#include <tilefoundry/runtime/common/ops/vector_groups.h>

namespace tilefoundry {
namespace ops {

/// The binary family's one entry: out(i) = op(a(i), b(i)), a and b broadcast to out's shape (a
/// scalar operand broadcasts everywhere).
template <class Op, class A, class B, class Out>
__device__ void binary(Op const& op, A const& a, B const& b, Out&& out) {
  binary_impl::apply(op, a, b, out, detail::vector_path{});
}

}  // namespace ops
}  // namespace tilefoundry

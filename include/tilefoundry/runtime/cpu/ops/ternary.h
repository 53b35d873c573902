// ops::ternary on the CPU target. Only the annotation is this target's: the body is
// ternary_impl::apply, which the CUDA target's entry runs too.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/ternary_impl.h>

namespace tilefoundry {
namespace ops {

/// The ternary family's one entry: out(i) = op(c(i), a(i), b(i)), operands broadcast to out's
/// shape (a scalar operand broadcasts everywhere). select_op is torch.where.
template <class Op, class C, class A, class B, class Out>
inline void ternary(Op const& op, C const& c, A const& a, B const& b, Out&& out) {
  ternary_impl::apply(op, c, a, b, out);
}

}  // namespace ops
}  // namespace tilefoundry

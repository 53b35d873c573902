// ops::scalar: one element of each elementwise family (unary, binary, ternary), computed as the
// family computes every element of a tensor: the operands in their compute type (float for 16-bit
// storage; the common one of two operands), the op, the result converted to the result type D. An
// epilogue fused into another op's loop (a residual added to each matmul output) is written with
// these, so it rounds where the unfused ops round.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/numeric.h>

#include <type_traits>

namespace tilefoundry {
namespace ops {
namespace scalar {

/// op(x), as ops::unary computes each element.
template <class D, class Op, class X>
TILEFOUNDRY_DEVICE D unary(Op const& op, X const& x) {
  return detail::convert<D>(op(detail::to_compute(x)));
}

/// op(x, y), as ops::binary computes each element.
template <class D, class Op, class X, class Y>
TILEFOUNDRY_DEVICE D binary(Op const& op, X const& x, Y const& y) {
  using C = std::common_type_t<detail::compute_t<X>, detail::compute_t<Y>>;
  return detail::convert<D>(
      op(static_cast<C>(detail::to_compute(x)), static_cast<C>(detail::to_compute(y))));
}

/// op(k, x, y) (select: k ? x : y), as ops::ternary computes each element.
template <class D, class Op, class K, class X, class Y>
TILEFOUNDRY_DEVICE D ternary(Op const& op, K const& k, X const& x, Y const& y) {
  using C = std::common_type_t<detail::compute_t<X>, detail::compute_t<Y>>;
  return detail::convert<D>(op(static_cast<bool>(k), static_cast<C>(detail::to_compute(x)),
                               static_cast<C>(detail::to_compute(y))));
}

}  // namespace scalar
}  // namespace ops
}  // namespace tilefoundry

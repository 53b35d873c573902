// ops::binary on the CPU target.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/binary_impl.h>

namespace tilefoundry {
namespace ops {
namespace detail {

template <class X>
inline auto binary_operand(X const& x) {
  if constexpr (is_tensor_operand_v<X>) {
    return view_of(x);
  } else {
    return x;
  }
}

}  // namespace detail

/// The binary family's one entry: out(i) = op(a(i), b(i)), a and b broadcast to out's shape (a
/// scalar operand broadcasts everywhere).
template <class Op, class A, class B, class Out>
inline void binary(Op const& op, A const& a, B const& b, Out&& out) {
  binary_impl::Binary<Op>::run(op, detail::binary_operand(a), detail::binary_operand(b),
                               detail::view_of(out));
}

}  // namespace ops
}  // namespace tilefoundry

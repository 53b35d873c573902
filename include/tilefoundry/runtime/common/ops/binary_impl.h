// binary_impl::Binary<Op>: the elementwise skeleton of the binary family, and binary_impl::apply,
// the body both targets' ops::binary run. An operand may be a tensor (broadcast to the result's
// shape) or a scalar.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/binary_ops.h>
#include <tilefoundry/runtime/common/ops/broadcast.h>

namespace tilefoundry {
namespace ops {
namespace binary_impl {

template <class X, class Shape>
CUTE_HOST_DEVICE auto operand(X const& x, Shape const& shape) {
  if constexpr (cute::is_tensor<X>::value) {
    return detail::broadcast_to(x, shape);
  } else {
    return x;  // a scalar: the same value for every element
  }
}

// Reached only from the op body below, so it is annotated like one (spec 3): no view helper.
template <class X>
TILEFOUNDRY_DEVICE auto element(X const& x, int i) {
  if constexpr (cute::is_tensor<X>::value) {
    return x(i);
  } else {
    return x;
  }
}

template <class X>
struct element_type {
  using type = X;
};
template <class E, class L>
struct element_type<cute::Tensor<E, L>> {
  using type = detail::value_t<cute::Tensor<E, L>>;
};

template <class Op>
struct Binary {
  template <class A, class B, class Out>
  static TILEFOUNDRY_DEVICE void run(Op const& op, A const& a, B const& b, Out const& out) {
    using D = detail::value_t<Out>;
    using C = std::common_type_t<detail::compute_t<typename element_type<A>::type>,
                                 detail::compute_t<typename element_type<B>::type>>;
    auto va = operand(a, out.shape());
    auto vb = operand(b, out.shape());
    int const n = static_cast<int>(cute::size(out));
    CUTE_UNROLL
    for (int i = 0; i < n; ++i) {
      C const x = static_cast<C>(detail::to_compute(element(va, i)));
      C const y = static_cast<C>(detail::to_compute(element(vb, i)));
      out(i) = detail::convert<D>(op(x, y));
    }
  }
};

// A ShardTensor operand is read through its local view; a scalar is no tensor and passes as is.
template <class X>
TILEFOUNDRY_DEVICE auto entry_operand(X const& x) {
  if constexpr (detail::is_tensor_operand_v<X>) {
    return detail::view_of(x);
  } else {
    return x;
  }
}

template <class Op, class A, class B, class Out>
TILEFOUNDRY_DEVICE void apply(Op const& op, A const& a, B const& b, Out&& out) {
  Binary<Op>::run(op, entry_operand(a), entry_operand(b), detail::view_of(out));
}

}  // namespace binary_impl
}  // namespace ops
}  // namespace tilefoundry

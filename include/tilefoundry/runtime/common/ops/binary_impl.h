// binary_impl::Binary<Op>: the elementwise skeleton of the binary family, and binary_impl::apply,
// the body both targets' ops::binary run. An operand may be a tensor (broadcast to the result's
// shape) or a scalar.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/binary_ops.h>
#include <tilefoundry/runtime/common/ops/broadcast.h>
#include <tilefoundry/runtime/common/ops/fast_path.h>
#include <tilefoundry/runtime/common/ops/packed.h>

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

// The elementwise function: op on the common compute type C of the two operands.
template <class Op, class C>
struct on_compute {
  Op const& op;
  template <class X, class Y>
  TILEFOUNDRY_DEVICE auto operator()(X const& x, Y const& y) const {
    return op(static_cast<C>(detail::to_compute(x)), static_cast<C>(detail::to_compute(y)));
  }
};

template <class A, class B>
using compute_of_t = std::common_type_t<detail::compute_t<typename element_type<A>::type>,
                                        detail::compute_t<typename element_type<B>::type>>;

template <class Op>
struct Binary {
  // a and b are already broadcast to out's shape (or scalars).
  template <class A, class B, class Out>
  static TILEFOUNDRY_DEVICE void run(Op const& op, A const& a, B const& b, Out const& out) {
    using D = detail::value_t<Out>;
    on_compute<Op, compute_of_t<A, B>> const f{op};
    int const n = static_cast<int>(cute::size(out));
    detail::store_converted<D>(
        n, [&](int i) -> decltype(auto) { return out(i); },
        [&](int i) { return f(element(a, i), element(b, i)); });
  }
};

// A distributed operand is read through its local view; a scalar is no tensor and passes as is.
template <class X>
TILEFOUNDRY_DEVICE auto entry_operand(X const& x) {
  if constexpr (detail::is_tensor_operand_v<X>) {
    return detail::view_of(x);
  } else {
    return x;
  }
}

template <class Op, class A, class B, class Out, class Fast = detail::no_fast_path>
TILEFOUNDRY_DEVICE void apply(Op const& op, A const& a, B const& b, Out&& out,
                              Fast const& fast = {}) {
  auto const o = detail::view_of(out);
  auto const va = operand(entry_operand(a), o.shape());
  auto const vb = operand(entry_operand(b), o.shape());
  using C = compute_of_t<cute::remove_cvref_t<decltype(va)>, cute::remove_cvref_t<decltype(vb)>>;
  if (fast(on_compute<Op, C>{op}, o, va, vb)) return;
  Binary<Op>::run(op, va, vb, o);
}

}  // namespace binary_impl
}  // namespace ops
}  // namespace tilefoundry

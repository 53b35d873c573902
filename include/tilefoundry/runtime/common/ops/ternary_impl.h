// ternary_impl::Ternary<Op>: the elementwise skeleton of the ternary family (select: torch.where),
// and ternary_impl::apply, the body both targets' ops::ternary run. Each operand may be a tensor
// (broadcast to the result's shape, as in the binary family) or a scalar.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/binary_impl.h>

namespace tilefoundry {
namespace ops {

// out(i) = cond(i) ? a(i) : b(i). The condition is read as bool; a and b in their common compute
// type, so a scalar branch of the operands' storage type stays in that type.
struct select_op {
  template <class T>
  TILEFOUNDRY_DEVICE T operator()(bool cond, T a, T b) const {
    return cond ? a : b;
  }
};

namespace ternary_impl {

template <class Op>
struct Ternary {
  template <class C, class A, class B, class Out>
  static TILEFOUNDRY_DEVICE void run(Op const& op, C const& c, A const& a, B const& b,
                                     Out const& out) {
    using D = detail::value_t<Out>;
    using T = std::common_type_t<detail::compute_t<typename binary_impl::element_type<A>::type>,
                                 detail::compute_t<typename binary_impl::element_type<B>::type>>;
    auto vc = binary_impl::operand(c, out.shape());
    auto va = binary_impl::operand(a, out.shape());
    auto vb = binary_impl::operand(b, out.shape());
    int const n = static_cast<int>(cute::size(out));
    CUTE_UNROLL
    for (int i = 0; i < n; ++i) {
      bool const k = static_cast<bool>(binary_impl::element(vc, i));
      T const x = static_cast<T>(detail::to_compute(binary_impl::element(va, i)));
      T const y = static_cast<T>(detail::to_compute(binary_impl::element(vb, i)));
      out(i) = detail::convert<D>(op(k, x, y));
    }
  }
};

template <class Op, class C, class A, class B, class Out>
TILEFOUNDRY_DEVICE void apply(Op const& op, C const& c, A const& a, B const& b, Out&& out) {
  Ternary<Op>::run(op, binary_impl::entry_operand(c), binary_impl::entry_operand(a),
                   binary_impl::entry_operand(b), detail::view_of(out));
}

}  // namespace ternary_impl
}  // namespace ops
}  // namespace tilefoundry

// Broadcasting an operand to a result shape, the way torch and numpy do it: ranks align at the
// right, a missing mode or a mode of extent 1 is repeated with stride 0. Static extents are
// checked at compile time; a dynamic extent of 1 is detected at run time, and a dynamic extent
// that neither matches nor is 1 is the caller's error (codegen has checked shapes by then).
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/operand.h>

namespace tilefoundry {
namespace ops {
namespace detail {

template <int I, int Offset, class OpShape, class OpStride, class OutShape>
CUTE_HOST_DEVICE auto broadcast_stride(OpShape const& s, OpStride const& d, OutShape const& o) {
  constexpr int j = I - Offset;
  if constexpr (j < 0) {
    return cute::Int<0>{};
  } else {
    using E = cute::remove_cvref_t<decltype(cute::get<j>(s))>;
    using F = cute::remove_cvref_t<decltype(cute::get<I>(o))>;
    if constexpr (cute::is_constant<1, E>::value && !cute::is_constant<1, F>::value) {
      return cute::Int<0>{};
    } else if constexpr (cute::is_static<E>::value && cute::is_static<F>::value) {
      static_assert(E::value == F::value, "ops::binary: operand shapes do not broadcast");
      return cute::get<j>(d);
    } else if constexpr (cute::is_static<E>::value) {
      return cute::get<j>(d);  // a static extent other than 1 must match the result's
    } else {
      return cute::get<j>(s) == 1 ? 0 : static_cast<int>(cute::get<j>(d));
    }
  }
}

template <class OpLayout, class OutShape, int... I>
CUTE_HOST_DEVICE auto broadcast_layout(OpLayout const& l, OutShape const& o,
                                       std::integer_sequence<int, I...>) {
  auto s = cute::wrap(l.shape());
  auto d = cute::wrap(l.stride());
  constexpr int offset = int(sizeof...(I)) - int(cute::tuple_size<decltype(s)>::value);
  static_assert(offset >= 0, "ops::binary: an operand has a higher rank than the result");
  return cute::make_layout(o, cute::make_stride(broadcast_stride<I, offset>(s, d, o)...));
}

// A view of `t` with the result's shape.
template <class T, class OutShape>
CUTE_HOST_DEVICE auto broadcast_to(T const& t, OutShape const& out_shape) {
  auto o = cute::wrap(out_shape);
  constexpr int rank = cute::tuple_size<decltype(o)>::value;
  return cute::make_tensor(
      t.data(), broadcast_layout(t.layout(), o, std::make_integer_sequence<int, rank>{}));
}

}  // namespace detail
}  // namespace ops
}  // namespace tilefoundry

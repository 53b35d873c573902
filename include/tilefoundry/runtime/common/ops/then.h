// ops::then: one elementwise op applied to another's result as it is made, no buffer between them.
// then(first, second)(x...) is second(first(x...)) in the compute type, so a unary, binary or
// ternary entry called with it reads its operands once and stores once: a chain of elementwise
// ops on the CPU target (softmax's subtraction and exponential, a product and its cast) runs as one
// pass over the row where each op would make its own.
#pragma once

#include <tilefoundry/runtime/common/config.h>

namespace tilefoundry {
namespace ops {

/// second(first(x...)): `second` a unary op.
template <class First, class Second>
struct then_op {
  First first;
  Second second;
  template <class... T>
  TILEFOUNDRY_DEVICE auto operator()(T const&... x) const {
    return second(first(x...));
  }
};

/// first, then second on its result.
template <class First, class Second>
TILEFOUNDRY_DEVICE then_op<First, Second> then(First const& first, Second const& second) {
  return {first, second};
}

}  // namespace ops
}  // namespace tilefoundry

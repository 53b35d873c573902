// ops::copy on the CPU target: the identity member of the unary family.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/unary_impl.h>

namespace tilefoundry {
namespace ops {

/// dst(i) = src(i), converting the element type; sizes must match.
template <class Src, class Dst>
inline void copy(Src const& src, Dst&& dst) {
  unary_impl::apply(identity_op{}, src, dst);
}

}  // namespace ops
}  // namespace tilefoundry

// ops::rope on the CPU target. Only the annotation is this target's: the body is
// rope_impl::apply, which the CUDA target's entry runs too.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/rope_impl.h>

namespace tilefoundry {
namespace ops {

/// The rotary family's one entry: out = x * cos + rotate_half(x) * sin over one row of head_dim
/// elements (any strides), computed in Compute; x read through `pro` (as stored, or its row normed:
/// ops::rms_norm_prologue, the q/k norm before the rotation).
template <class Compute, class X, class C, class S, class Out, class Pro = plain_rows>
inline void rope(X const& x, C const& cos, S const& sin, Out&& out, Pro const& pro = {}) {
  rope_impl::apply<Compute>(x, cos, sin, out, pro);
}

}  // namespace ops
}  // namespace tilefoundry

// ops::index_add on the CUDA target: the body is index_add_impl::apply, which the CPU target's
// entry runs too; the CTA's threads share the columns.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/index_add_impl.h>

namespace tilefoundry {
namespace ops {

/// One row of torch.index_add's result: out(d) = x(d) + alpha * src(i, d) for every i with
/// index(i) == at (in order, rounded to out's type after each add); index in [0, extent).
template <class X, class Src, class Index, class Alpha, class Out>
__device__ void index_add(X const& x, Src const& src, Index const& index, Alpha alpha, Out&& out,
                          int64_t at, int64_t extent) {
  index_add_impl::apply(x, src, index, alpha, out, at, extent);
}

}  // namespace ops
}  // namespace tilefoundry

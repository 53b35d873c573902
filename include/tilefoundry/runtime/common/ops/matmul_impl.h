// matmul_impl::apply: the body of ops::matmul, out = a @ b over one CTA's tile, accumulated in Acc.
// Both targets' entries run it, so that the two cannot drift apart in order or rounding.
//
// This is the general tier: any strides (a transposed weight is a view, not a copy), any extents.
// The CTA's threads share the tile's elements (element i of the M x N tile goes to thread
// i mod threads), each a whole dot product over K in Acc, rounded once into out's element type,
// as the evaluator computes torch.matmul in the accumulate dtype and casts the result.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/numeric.h>
#include <tilefoundry/runtime/common/topology.h>

namespace tilefoundry {
namespace ops {
namespace matmul_impl {

/// out(m, n) = sum_k a(m, k) * b(k, n) for the tile's M x N elements: a is M x K, b is K x N.
template <class Acc, class A, class B, class Out>
TILEFOUNDRY_DEVICE void apply(A const& a, B const& b, Out&& out) {
  using T = cute::remove_cvref_t<decltype(out(0, 0))>;
  int64_t const rows = int64_t(cute::size<0>(out));
  int64_t const cols = int64_t(cute::size<1>(out));
  int64_t const depth = int64_t(cute::size<1>(a));
  int64_t const threads = int64_t(program_dim<TopologyScope::thread>());
  for (int64_t i = int64_t(program_id<TopologyScope::thread>()); i < rows * cols; i += threads) {
    int64_t const m = i / cols;
    int64_t const n = i - m * cols;
    Acc acc = Acc(0);
    for (int64_t k = 0; k < depth; ++k) {
      acc += detail::convert<Acc>(a(m, k)) * detail::convert<Acc>(b(k, n));
    }
    out(m, n) = detail::convert<T>(acc);
  }
}

}  // namespace matmul_impl
}  // namespace ops
}  // namespace tilefoundry

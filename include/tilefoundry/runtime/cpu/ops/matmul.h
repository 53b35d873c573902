// ops::matmul on the CPU target. Only the annotation is this target's: the body is
// matmul_impl::apply, which the CUDA target's entry runs too.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/matmul_impl.h>

namespace tilefoundry {
namespace ops {

/// The matmul family's one entry: out = a @ b (a: M x K, b: K x N, out: M x N, any strides),
/// each element a dot product accumulated in Acc and rounded once into out's element type.
template <class Acc, class A, class B, class Out>
inline void matmul(A const& a, B const& b, Out&& out) {
  matmul_impl::apply<Acc>(a, b, out, matmul_impl::store_as_is{}, plain_rows{});
}

/// ... each result passed through an epilogue first: out(m, n) = epilogue(m, n, the dot product in
/// Acc) (the elementwise ops a function applies to the matmul's result, fused: a residual add).
template <class Acc, class A, class B, class Out, class Epi>
inline void matmul(A const& a, B const& b, Out&& out, Epi const& epilogue) {
  matmul_impl::apply<Acc>(a, b, out, epilogue, plain_rows{});
}

/// ... its first operand read through a prologue (matmul_prologue.h): out(m, n) = epilogue(m, n,
/// sum_k prologue(a)(m, k) * b(k, n)) (an RMSNorm before a projection, fused). Pass
/// no_epilogue{} for none.
template <class Acc, class A, class B, class Out, class Epi, class Pro>
inline void matmul(A const& a, B const& b, Out&& out, Epi const& epilogue, Pro const& prologue) {
  matmul_impl::apply<Acc>(a, b, out, epilogue, prologue);
}

/// A pair of products sharing a (b and b1 of one shape): out(m, n) = epilogue(m, n,
/// sum_k prologue(a)(m, k) * b(k, n), sum_k prologue(a)(m, k) * b1(k, n)), a read once for both
/// (silu(x @ gate.T) * (x @ up.T), fused). Pass plain_rows{} for no prologue.
template <class Acc, class A, class B, class B1, class Out, class Epi, class Pro>
inline void matmul(A const& a, B const& b, B1 const& b1, Out&& out, Epi const& epilogue,
                   Pro const& prologue) {
  matmul_impl::apply_pair<Acc>(a, b, b1, out, epilogue, prologue);
}

}  // namespace ops
}  // namespace tilefoundry

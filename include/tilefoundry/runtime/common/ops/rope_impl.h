// rope_impl::apply: the body of ops::rope, one row of head_dim elements rotated by its position's
// cos / sin rows. Both targets' entries run it, so that the two cannot drift apart in rounding.
//
// Rotate-half, as the evaluator computes it in Compute: out = x * cos + rotate_half(x) * sin, where
// rotate_half(x) is (-x[half:], x[:half]). The CTA's threads share the row's pairs (j, j + half),
// each pair read once and both its results written by one thread.
//
// The row is read through a prologue (matmul_prologue.h): as stored (plain_rows), or as the
// rms_norm of the row (rms_norm_rows: Qwen3's q/k norm before the rotation), each element normed
// and rounded as the unfused ops round it, the row's scale from the sum of its squares that the
// CTA's threads add up together (sum_over_row), so the normed row never goes to memory.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/numeric.h>
#include <tilefoundry/runtime/common/ops/matmul_prologue.h>
#include <tilefoundry/runtime/common/topology.h>

namespace tilefoundry {
namespace ops {
namespace rope_impl {

/// The sum of `part` (this thread's share of a row) over the CTA's `threads` threads, in every
/// thread; `whole()` the sum of the whole row, each thread adding all of it itself where the
/// threads cannot exchange partials through registers (more than a warp, or not a power of two).
/// On CUDA a butterfly of shuffles among the CTA's lanes: every lane ends with the same sum (each
/// step adds the same two values in either order).
template <class T, class Whole>
TILEFOUNDRY_DEVICE T sum_over_row(T part, int64_t threads, Whole const& whole) {
  if (threads == 1) return part;
#if defined(__CUDA_ARCH__)
  if (threads <= 32 && (threads & (threads - 1)) == 0) {
    unsigned const lanes = threads == 32 ? 0xffffffffu : (1u << threads) - 1u;
    for (int mask = int(threads) / 2; mask > 0; mask /= 2)
      part += __shfl_xor_sync(lanes, part, mask);
    return part;
  }
#endif
  return whole();
}

/// out(j) = x(j) * cos(j) - x(j + half) * sin(j) and out(j + half) = x(j + half) * cos(j + half)
/// + x(j) * sin(j + half) for j < half = size(x) / 2, in Compute, rounded once into out's type;
/// x's elements read through `pro` (plain_rows: as stored; rms_norm_rows: its row normed).
template <class Compute, class X, class C, class S, class Out, class Pro = plain_rows>
TILEFOUNDRY_DEVICE void apply(X const& x, C const& cos, S const& sin, Out&& out,
                              Pro const& pro = {}) {
  using T = cute::remove_cvref_t<decltype(out(0))>;
  int64_t const half = int64_t(cute::size(x)) / 2;
  int64_t const threads =
      int64_t(program_dim<detail::dependent_level<TopologyScope::thread, Out>>());
  int64_t const first = int64_t(program_id<detail::dependent_level<TopologyScope::thread, Out>>());
  [[maybe_unused]] typename Pro::compute_type scale = 0;
  if constexpr (Pro::normalizes) {  // the row's scale, from the sum of its squares
    using Cd = typename Pro::compute_type;
    Cd part = 0;
    for (int64_t j = first; j < half; j += threads)
      part += pro.square(x(j)) + pro.square(x(j + half));
    Cd const sum = sum_over_row(part, threads, [&] {
      Cd all = 0;
      for (int64_t j = 0; j < half; ++j) all += pro.square(x(j)) + pro.square(x(j + half));
      return all;
    });
    scale = pro.scale(sum, 2 * half);
  }
  auto const read = [&](int64_t j) {
    if constexpr (Pro::normalizes) {
      return detail::convert<Compute>(pro(x(j), scale, j));
    } else {
      return detail::convert<Compute>(x(j));
    }
  };
  for (int64_t j = first; j < half; j += threads) {
    Compute const x1 = read(j);
    Compute const x2 = read(j + half);
    Compute const first = x1 * detail::convert<Compute>(cos(j));
    Compute const second = x2 * detail::convert<Compute>(cos(j + half));
    out(j) = detail::convert<T>(first - x2 * detail::convert<Compute>(sin(j)));
    out(j + half) = detail::convert<T>(second + x1 * detail::convert<Compute>(sin(j + half)));
  }
}

}  // namespace rope_impl
}  // namespace ops
}  // namespace tilefoundry

// The reduce family's split form: a reduction along rows too long for one CTA (a sum, mean,
// maximum, minimum or largest magnitude of the logits a matmul just computed), found in two
// steps, as the arg-reduction family's split form finds positions (arg_split.h). First each CTA
// folds its tile of the rows (M x T) into one value a row, its part; then one CTA folds every
// part of a row into the row's result (a mean then divides by the row's length). Values enter and
// fold as reduce_traits<Op> says (reduce_ops.h: NaN wins a maximum or minimum, as in torch), in
// float: each part is a float, whatever the element type (f32, bf16 or f16).
//
// Both targets run these bodies (TILEFOUNDRY_DEVICE). On the CPU a CTA is one thread; on CUDA
// the CTA's threads stride over a row, fold by shuffles within each warp and by shared memory
// across warps, and thread 0 writes. Every thread of the CTA must make the call.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/numeric.h>
#include <tilefoundry/runtime/common/ops/arg_split.h>
#include <tilefoundry/runtime/common/ops/reduce_ops.h>

#include <cstdint>

namespace tilefoundry {
namespace ops {
namespace reduce_split {

#if defined(__CUDA_ARCH__)
/// The value of the CTA: every thread's `mine` folded, valid in thread 0. The CTA's threads wait
/// at two barriers (the second frees the shared slots for the next row's fold).
template <class Op>
__device__ float cta_fold(float mine) {
  using Traits = detail::reduce_traits<Op>;
  constexpr int kWarp = 32;
  __shared__ float values[32];
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    mine = Traits::combine(mine, __shfl_down_sync(0xffffffffu, mine, offset));
  }
  int const warp = int(threadIdx.x) / kWarp;
  int const warps = (int(blockDim.x) + kWarp - 1) / kWarp;
  if (int(threadIdx.x) % kWarp == 0) values[warp] = mine;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < warps; ++w) mine = Traits::combine(mine, values[w]);
  }
  __syncthreads();
  return mine;
}
#endif

/// Op over at(i) for i in [0, count), from Op's identity: on CUDA each thread folds every
/// blockDim.x-th i from its own, then the CTA's values meet (cta_fold: valid in thread 0).
template <class Op, class At>
TILEFOUNDRY_DEVICE float fold(int64_t count, At const& at) {
  using Traits = detail::reduce_traits<Op>;
  float mine = Traits::template identity<float>();
#if defined(__CUDA_ARCH__)
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) mine = Traits::combine(mine, at(i));
  mine = cta_fold<Op>(mine);
#else
  for (int64_t i = 0; i < count; ++i) mine = Traits::combine(mine, at(i));
#endif
  return mine;
}

/// Each row's part of a CTA's tile (M x T): part_value(m) = Op over the row's T elements, each
/// entering as Op says (a largest magnitude takes |x|). On CUDA the tile is read after a barrier,
/// so that what every thread of the CTA wrote to it (the matmul before) is there.
template <class Op, class Tile, class Values>
TILEFOUNDRY_DEVICE void part(Tile const& tile, Values&& part_value) {
  using Traits = detail::reduce_traits<Op>;
#if defined(__CUDA_ARCH__)
  __syncthreads();
#endif
  int64_t const rows = int64_t(cute::size<0>(tile));
  int64_t const cols = int64_t(cute::size<1>(tile));
  for (int64_t m = 0; m < rows; ++m) {
    float const v = fold<Op>(
        cols, [&](int64_t n) { return Traits::enter(detail::convert<float>(tile(m, n))); });
    if (arg_split::writes()) part_value(m) = v;
  }
}

/// Each row's result from its parts (S x M, part s of row m at (s, m)) of a row of `count`
/// elements: out(m) = Op over the row's S parts, divided by `count` for a mean, rounded once to
/// out's element type.
template <class Op, class Values, class Out>
TILEFOUNDRY_DEVICE void merge(Values const& values, int64_t count, Out&& out) {
  using T = cute::remove_cvref_t<decltype(out(0))>;
  int64_t const parts = int64_t(cute::size<0>(values));
  int64_t const rows = int64_t(cute::size<1>(values));
  for (int64_t m = 0; m < rows; ++m) {
    float v = fold<Op>(parts, [&](int64_t s) { return float(values(s, m)); });
    if constexpr (detail::reduce_traits<Op>::divides) v = v / float(count);
    if (arg_split::writes()) out(m) = detail::convert<T>(v);
  }
}

}  // namespace reduce_split
}  // namespace ops
}  // namespace tilefoundry

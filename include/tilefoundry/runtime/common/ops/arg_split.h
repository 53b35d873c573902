// The arg-reduction family's split form: the position of the element an order picks along rows
// too long for one CTA, found in two steps. First each CTA folds its tile of the rows (M x T, the
// columns from col0: an argmax fused after the matmul that computed the tile, its logits) into
// one (value, position) pair a row, its part; then one CTA merges every part of a row into the
// row's position. Pairs fold by arg_traits<Op>::beats (reduce_arg.h), a total order, so the
// result is torch.argmax's (the first largest, NaN counting as the largest) whatever the grouping.
// Values fold as float: every element type converts to it exactly and in order.
//
// Both targets run these bodies (TILEFOUNDRY_DEVICE). On the CPU a CTA is one thread; on CUDA
// the CTA's threads stride over a row, fold by shuffles within each warp and by shared memory
// across warps, and thread 0 writes. Every thread of the CTA must make the call.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/numeric.h>
#include <tilefoundry/runtime/common/ops/reduce_arg.h>

#include <cstdint>

namespace tilefoundry {
namespace ops {
namespace arg_split {

using Pair = detail::arg_pair<float>;

#if defined(__CUDA_ARCH__)
/// The pair of the CTA: every thread's `mine` folded, valid in thread 0. The CTA's threads wait
/// at two barriers (the second frees the shared slots for the next row's fold).
template <class Op>
__device__ Pair cta_fold(Pair mine) {
  constexpr int kWarp = 32;
  __shared__ float values[32];
  __shared__ long long positions[32];
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    Pair const other{__shfl_down_sync(0xffffffffu, mine.value, offset),
                     static_cast<std::int64_t>(__shfl_down_sync(
                         0xffffffffu, static_cast<long long>(mine.index), offset))};
    mine = detail::arg_combine<Op>(mine, other);
  }
  int const warp = int(threadIdx.x) / kWarp;
  int const warps = (int(blockDim.x) + kWarp - 1) / kWarp;
  if (int(threadIdx.x) % kWarp == 0) {
    values[warp] = mine.value;
    positions[warp] = static_cast<long long>(mine.index);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < warps; ++w) {
      mine = detail::arg_combine<Op>(mine, Pair{values[w], std::int64_t(positions[w])});
    }
  }
  __syncthreads();
  return mine;
}
#endif

/// The pair Op picks among at(i) for i in [0, count): on CUDA each thread folds every blockDim.x-th
/// i from its own, then the CTA's pairs meet (cta_fold: valid in thread 0).
template <class Op, class At>
TILEFOUNDRY_DEVICE Pair fold(int64_t count, At const& at) {
  Pair mine = detail::arg_traits<Op>::template identity<float>();
#if defined(__CUDA_ARCH__)
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x)
    mine = detail::arg_combine<Op>(mine, at(i));
  mine = cta_fold<Op>(mine);
#else
  for (int64_t i = 0; i < count; ++i) mine = detail::arg_combine<Op>(mine, at(i));
#endif
  return mine;
}

/// Whether this thread writes what fold() returns: the CTA's thread 0 (the CPU's one thread).
TILEFOUNDRY_DEVICE bool writes() {
#if defined(__CUDA_ARCH__)
  return threadIdx.x == 0;
#else
  return true;
#endif
}

/// Each row's part of a CTA's tile (M x T, the columns from col0): part_value(m) and
/// part_position(m) the pair Op picks among the row's T elements, at positions col0 + n. On CUDA
/// the tile is read after a barrier, so that what every thread of the CTA wrote to it (the matmul
/// before) is there.
template <class Op, class Tile, class Values, class Positions>
TILEFOUNDRY_DEVICE void part(Tile const& tile, int64_t col0, Values&& part_value,
                             Positions&& part_position) {
#if defined(__CUDA_ARCH__)
  __syncthreads();
#endif
  int64_t const rows = int64_t(cute::size<0>(tile));
  int64_t const cols = int64_t(cute::size<1>(tile));
  for (int64_t m = 0; m < rows; ++m) {
    Pair const p = fold<Op>(cols, [&](int64_t n) {
      return Pair{detail::convert<float>(tile(m, n)), col0 + n};
    });
    if (writes()) {
      part_value(m) = p.value;
      part_position(m) = p.index;
    }
  }
}

/// Each row's position from its parts (values and positions S x M, part s of row m at (s, m)):
/// out(m) = the position of the pair Op picks among the row's S parts (0 for a row of none).
template <class Op, class Values, class Positions, class Out>
TILEFOUNDRY_DEVICE void merge(Values const& values, Positions const& positions, Out&& out) {
  int64_t const parts = int64_t(cute::size<0>(values));
  int64_t const rows = int64_t(cute::size<1>(values));
  for (int64_t m = 0; m < rows; ++m) {
    Pair const p = fold<Op>(parts, [&](int64_t s) {
      return Pair{values(s, m), int64_t(positions(s, m))};
    });
    if (writes()) out(m) = p.index == INT64_MAX ? 0 : p.index;
  }
}

}  // namespace arg_split
}  // namespace ops
}  // namespace tilefoundry

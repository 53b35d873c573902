// What the split forms of a reduction along rows too long for one CTA share (arg_split.h: an
// argmax's (value, position) pairs; reduce_split.h: a sum's, mean's, maximum's... floats): a fold
// of count values by a CTA, and a CTA's pass over the rows of a tile it just wrote.
//
// Both targets run these bodies (TILEFOUNDRY_DEVICE). On the CPU a CTA is one thread; on CUDA the
// CTA's threads stride over the values, fold by shuffles within each warp and by shared memory
// across warps, and thread 0 holds the result (writes()). Every thread of the CTA must make the
// call.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/reduce_arg.h>

#include <cstdint>

namespace tilefoundry {
namespace ops {
namespace split_fold {

#if defined(__CUDA_ARCH__)
/// The value `offset` lanes down the warp (a float, or an arg-reduction's pair: both its halves).
__device__ inline float shuffle_down(float v, int offset) {
  return __shfl_down_sync(0xffffffffu, v, offset);
}
__device__ inline detail::arg_pair<float> shuffle_down(detail::arg_pair<float> p, int offset) {
  return {__shfl_down_sync(0xffffffffu, p.value, offset),
          static_cast<std::int64_t>(
              __shfl_down_sync(0xffffffffu, static_cast<long long>(p.index), offset))};
}

/// The value of the CTA: every thread's `mine` folded by `combine`, valid in thread 0. The CTA's
/// threads wait at two barriers (the second frees the shared slots for the next fold).
template <class T, class Combine>
__device__ T cta_fold(T mine, Combine const& combine) {
  constexpr int kWarp = 32;
  __shared__ T slots[32];
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    mine = combine(mine, shuffle_down(mine, offset));
  }
  int const warp = int(threadIdx.x) / kWarp;
  int const warps = (int(blockDim.x) + kWarp - 1) / kWarp;
  if (int(threadIdx.x) % kWarp == 0) slots[warp] = mine;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < warps; ++w) mine = combine(mine, slots[w]);
  }
  __syncthreads();
  return mine;
}
#endif

/// Values a CUDA thread of fold() reads before it combines any: their loads in flight together, not
/// one wait on memory a value. (Merging greedy decoding's 9496 parts a reduction, Qwen3-1.7B's
/// lm_head on the H200, one at a time took the merge kernel 12.7 us of the step.)
constexpr int kFoldBatch = 8;

/// `identity` and at(i) for i in [0, count) folded by `combine`, valid in thread 0: on CUDA each
/// thread folds every blockDim.x-th i from its own, in order, then the CTA's values meet
/// (cta_fold); at most a warp's worth, warp 0 alone folds them by shuffles (the tile of a GEMV's
/// CTA: no barrier, where cta_fold waits at two).
template <class T, class Combine, class At>
TILEFOUNDRY_DEVICE T fold(T identity, int64_t count, Combine const& combine, At const& at) {
  T mine = identity;
#if defined(__CUDA_ARCH__)
  if (count <= 32) {  // a warp's worth (a GEMV tile's columns): warp 0 folds them, no barrier
    if (threadIdx.x >= 32) return mine;
    mine = int64_t(threadIdx.x) < count ? at(int64_t(threadIdx.x)) : identity;
    for (int offset = 16; offset > 0; offset /= 2) {
      T const other = shuffle_down(mine, offset);
      if (int64_t(threadIdx.x) + offset < count) mine = combine(mine, other);
    }
    return mine;
  }
  int64_t const step = int64_t(blockDim.x);
  for (int64_t i0 = threadIdx.x; i0 < count; i0 += kFoldBatch * step) {
    T v[kFoldBatch];
    CUTE_UNROLL
    for (int j = 0; j < kFoldBatch; ++j) {
      v[j] = i0 + j * step < count ? at(i0 + j * step) : identity;
    }
    CUTE_UNROLL
    for (int j = 0; j < kFoldBatch; ++j) {
      if (i0 + j * step < count) mine = combine(mine, v[j]);
    }
  }
  mine = cta_fold(mine, combine);
#else
  for (int64_t i = 0; i < count; ++i) mine = combine(mine, at(i));
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

/// row(m, cols) for each row m of a CTA's tile (M x T, T = cols). On CUDA the tile is read after a
/// barrier, so that what every thread of the CTA wrote to it (the matmul before) is there.
template <class Tile, class Row>
TILEFOUNDRY_DEVICE void each_row(Tile const& tile, Row const& row) {
#if defined(__CUDA_ARCH__)
  __syncthreads();
#endif
  int64_t const rows = int64_t(cute::size<0>(tile));
  int64_t const cols = int64_t(cute::size<1>(tile));
  for (int64_t m = 0; m < rows; ++m) row(m, cols);
}

}  // namespace split_fold
}  // namespace ops
}  // namespace tilefoundry

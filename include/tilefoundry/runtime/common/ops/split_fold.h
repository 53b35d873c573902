// How the split form of the reductions along rows too long for one CTA (split_reduce.h: an
// argmax's (value, position) pairs, a sum's, mean's, maximum's... floats) folds: several folds of
// count values at once by a CTA, and a CTA's pass over the rows of a tile it just wrote.
//
// Both targets run these bodies (TILEFOUNDRY_DEVICE). On the CPU a CTA is one thread; on CUDA the
// CTA's threads stride over the values, fold by shuffles within each warp and by shared memory
// across warps, and thread 0 holds the results (writes()). Every thread of the CTA must make the
// call.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/reduce_arg.h>

#include <cstddef>
#include <cstdint>
#include <utility>

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
#endif

/// Values a CUDA thread of fold_each() reads before it combines any: their loads in flight
/// together, not one wait on memory a value. (Merging greedy decoding's 9496 parts a reduction,
/// Qwen3-1.7B's lm_head on the H200, one at a time took the merge kernel 12.7 us of the step.)
constexpr int kFoldBatch = 8;

/// One fold of fold_each(): the value so far (`mine`, from `identity`), how two combine, and the
/// i-th value to fold in (at(i)); on CUDA also the values of a batch, read before any combines.
template <class T, class Combine, class At>
struct folding {
  using State = T;
  T identity;
  Combine combine;
  At at;
  T mine = identity;
#if defined(__CUDA_ARCH__)
  T batch[kFoldBatch];

  /// Reads the values i0, i0 + step, ... of this thread's batch (identity past count).
  __device__ void load(int64_t i0, int64_t step, int64_t count) {
    CUTE_UNROLL
    for (int j = 0; j < kFoldBatch; ++j) {
      batch[j] = i0 + j * step < count ? at(i0 + j * step) : identity;
    }
  }
  /// Folds the batch load() read, in order.
  __device__ void fold_batch(int64_t i0, int64_t step, int64_t count) {
    CUTE_UNROLL
    for (int j = 0; j < kFoldBatch; ++j) {
      if (i0 + j * step < count) mine = combine(mine, batch[j]);
    }
  }
  /// Folds in the value `offset` lanes down the warp where `in` (it holds one).
  __device__ void fold_lane(int offset, bool in) {
    T const other = shuffle_down(mine, offset);
    if (in) mine = combine(mine, other);
  }
#endif
};

/// A fold for fold_each(): identity, combine(a, b), at(i).
template <class T, class Combine, class At>
TILEFOUNDRY_DEVICE folding<T, Combine, At> fold_of(T identity, Combine combine, At at) {
  return folding<T, Combine, At>{identity, combine, at};
}

#if defined(__CUDA_ARCH__)
/// The shared slots of fold I of a cta_fold_each(): one per warp.
template <std::size_t I, class T>
__device__ T* warp_slots() {
  __shared__ T slots[32];
  return slots;
}

/// Every thread's `mine` of each fold folded by its combine, valid in thread 0: shuffles within
/// each warp, then one slot a warp in shared memory, which warp 0 folds by shuffles again (a lane
/// a slot: five steps, where thread 0 folding the 32 slots of a 1024-thread CTA one after the
/// other took 31). The CTA's threads wait at two barriers whatever the number of folds (the second
/// frees the slots for the next call).
template <std::size_t... I, class... F>
__device__ void cta_fold_each(std::index_sequence<I...>, F&... f) {
  constexpr int kWarp = 32;
  for (int offset = kWarp / 2; offset > 0; offset /= 2) (f.fold_lane(offset, true), ...);
  int const lane = int(threadIdx.x) % kWarp;
  int const warp = int(threadIdx.x) / kWarp;
  int const warps = (int(blockDim.x) + kWarp - 1) / kWarp;
  if (lane == 0) ((warp_slots<I, typename F::State>()[warp] = f.mine), ...);
  __syncthreads();
  if (warp == 0) {
    ((f.mine = lane < warps ? warp_slots<I, typename F::State>()[lane] : f.identity), ...);
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
      (f.fold_lane(offset, lane + offset < warps), ...);
    }
  }
  __syncthreads();
}
#endif

/// Several folds of count values each at once (the reductions fused after one matmul), each f's
/// at(i) for i in [0, count) folded from its identity by its combine into f.mine, valid in thread
/// 0. On CUDA each thread folds every blockDim.x-th i from its own, every fold's batch read before
/// any combines, then the CTA's values meet (cta_fold_each); at most a warp's worth, warp 0 alone
/// folds them by shuffles (the tile of a GEMV's CTA: no barrier). Every thread of the CTA must
/// make the call.
template <class... F>
TILEFOUNDRY_DEVICE void fold_each(int64_t count, F&... f) {
#if defined(__CUDA_ARCH__)
  int64_t const t = int64_t(threadIdx.x);
  if (count <= 32) {  // a warp's worth (a GEMV tile's columns): warp 0 folds them, no barrier
    if (t >= 32) return;
    ((f.mine = t < count ? f.at(t) : f.identity), ...);
    for (int offset = 16; offset > 0; offset /= 2) (f.fold_lane(offset, t + offset < count), ...);
    return;
  }
  int64_t const step = int64_t(blockDim.x);
  for (int64_t i0 = t; i0 < count; i0 += kFoldBatch * step) {
    (f.load(i0, step, count), ...);
    (f.fold_batch(i0, step, count), ...);
  }
  cta_fold_each(std::index_sequence_for<F...>{}, f...);
#else
  for (int64_t i = 0; i < count; ++i) ((f.mine = f.combine(f.mine, f.at(i))), ...);
#endif
}

/// Whether this thread writes what fold_each() folds: the CTA's thread 0 (the CPU's one thread).
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

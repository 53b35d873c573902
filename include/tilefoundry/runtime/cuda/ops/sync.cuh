// ops::sync on the CUDA target (spec 3.4). Every thread of the CTA may make the call: the
// participant predicate comes from the barrier geometry, and a thread outside it passes through.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/sync_kind.h>
#include <tilefoundry/runtime/common/topology.h>

namespace tilefoundry {
namespace ops {
namespace detail {

// A grid barrier on a two-word counter pair: grid_bar[0] counts the CTAs that have arrived in
// the current round, grid_bar[1] numbers the rounds. The last CTA to arrive resets the count to
// 0 before it opens the next round, so the pair is ready for the next barrier, and the next
// launch, without being cleared again: zero it once before its first use (spec 3.4).
__device__ __forceinline__ void grid_barrier(unsigned int* grid_bar) {
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
    unsigned int const ctas = gridDim.x * gridDim.y * gridDim.z;
    unsigned int volatile* round = grid_bar + 1;
    unsigned int const mine = *round;  // read before arriving: the round cannot move before then
    __threadfence();                   // this CTA's writes before its arrival
    if (atomicAdd(grid_bar, 1u) == ctas - 1) {
      atomicExch(grid_bar, 0u);
      __threadfence();
      atomicAdd(grid_bar + 1, 1u);
    } else {
      while (*round == mine) __nanosleep(64);
    }
    __threadfence();  // other CTAs' writes before this CTA reads on
  }
  __syncthreads();
}

}  // namespace detail

/**
 * @brief Mesh-scoped barrier.
 * @tparam Kind barrier kind: cta, warp, warp_masked, named or grid
 * @tparam Base first thread of a named barrier (a multiple of 32)
 * @tparam Count threads in a named barrier (a positive multiple of 32)
 * @tparam Mask lanes of a masked warp barrier
 * @tparam BarId hardware barrier of a named barrier, 1..15 (0 is __syncthreads')
 * @param grid_bar the grid barrier's zero-initialised two-word counter pair
 */
template <SyncKind Kind, int Base = 0, int Count = 0, unsigned Mask = 0u, int BarId = 0>
__device__ void sync(unsigned int* grid_bar = nullptr) {
  if constexpr (Kind == SyncKind::cta) {
    __syncthreads();
  } else if constexpr (Kind == SyncKind::warp) {
    __syncwarp();
  } else if constexpr (Kind == SyncKind::warp_masked) {
    static_assert(Mask != 0u, "ops::sync<warp_masked>: Mask names no lane");
    unsigned int const lane = program_id<TopologyScope::thread>() & 31u;
    if ((Mask >> lane) & 1u) __syncwarp(Mask);
  } else if constexpr (Kind == SyncKind::named) {
    static_assert(BarId >= 1 && BarId <= 15, "ops::sync<named>: BarId is 1..15");
    static_assert(Count > 0 && Count % 32 == 0,
                  "ops::sync<named>: Count is a positive multiple of 32");
    static_assert(Base >= 0 && Base % 32 == 0, "ops::sync<named>: Base is a multiple of 32");
    int const tid = program_id<TopologyScope::thread>();
    if (tid >= Base && tid < Base + Count) {
      asm volatile("bar.sync %0, %1;" ::"n"(BarId), "n"(Count) : "memory");
    }
  } else {
    static_assert(Kind == SyncKind::grid, "ops::sync: unknown SyncKind");
    detail::grid_barrier(grid_bar);
  }
}

}  // namespace ops
}  // namespace tilefoundry

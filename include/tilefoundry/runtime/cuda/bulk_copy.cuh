// Hopper's bulk copy (the TMA's one-dimensional form, sm_90 on) from global into shared memory,
// completed on an mbarrier: what a kernel streaming a region of memory through a ring of shared
// memory stages needs. A copy moves a multiple of 16 bytes between 16-byte aligned addresses; a
// barrier's phase completes when every byte it was told to expect has landed (no thread waits on
// the load itself). Used by ops::matmul's streamed tier (ops/matmul_stream.cuh), which calls these
// only where it is built for sm_90 or later.
#pragma once

#include <tilefoundry/runtime/common/config.h>

#include <cstdint>

namespace tilefoundry {
namespace bulk {

/// The shared-memory address of `p` (a pointer into shared memory), as the copy instructions take
/// it.
__device__ __forceinline__ uint32_t smem_address(void const* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/// Makes `bar` a barrier whose phase completes on `arrivals` arrivals (and the bytes announced).
/// Call from one thread, then fence_init() and a CTA barrier before anyone uses it.
__device__ __forceinline__ void init(uint64_t* bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_address(bar)), "r"(arrivals)
               : "memory");
}

/// Makes initialised barriers visible to the copy engine (the async proxy).
__device__ __forceinline__ void fence_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n\tfence.proxy.async.shared::cta;" ::
                   : "memory");
}

/// An L2 policy for data read once: its lines are the first to go.
__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

/// Arrives on `bar`, announcing that `bytes` will land (the copies started after it, together).
__device__ __forceinline__ void expect(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_address(bar)),
               "r"(bytes)
               : "memory");
}

/// Copies `bytes` from `src` (global) to `dst` (shared), completing them on `bar` (which expect()
/// told to await them); both addresses 16-byte aligned, bytes a multiple of 16.
__device__ __forceinline__ void copy(void* dst, void const* src, uint32_t bytes, uint64_t* bar,
                                     uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1], %2, [%3], %4;" ::"r"(smem_address(dst)),
      "l"(src), "r"(bytes), "r"(smem_address(bar)), "l"(policy)
      : "memory");
}

/// expect() and copy() of one region: `bytes` from `src` to `dst`, completed on `bar`.
__device__ __forceinline__ void load(void* dst, void const* src, uint32_t bytes, uint64_t* bar,
                                     uint64_t policy) {
  expect(bar, bytes);
  copy(dst, src, bytes, bar, policy);
}

/// Arrives on `bar` (one of the arrivals its phase awaits), releasing this thread's earlier writes
/// to whoever waits on the phase.
__device__ __forceinline__ void arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_address(bar)) : "memory");
}

/// Waits until the phase of `bar` with parity `parity` (0, 1, 0, ... for its uses) completed.
__device__ __forceinline__ void wait(uint64_t* bar, uint32_t parity) {
  uint32_t const b = smem_address(bar);
  uint32_t done = 0;
  while (!done) {
    asm volatile(
        "{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done)
        : "r"(b), "r"(parity)
        : "memory");
  }
}

}  // namespace bulk
}  // namespace tilefoundry

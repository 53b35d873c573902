// Hopper's bulk copy (the TMA's one-dimensional form) from global into shared memory, completed on
// an mbarrier: what a kernel streaming a contiguous region through a shared-memory ring needs. A
// copy moves a multiple of 16 bytes between 16-byte aligned addresses; the barrier's phase
// completes when every byte it was told to expect has landed (no thread waits on the load itself).
#pragma once

#include <cstdint>

namespace tilefoundry {
namespace engine {
namespace bulk {

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

/// Arrives on `bar`, announcing `bytes` to land, and copies them from `src` (global) to `dst`
/// (shared); both 16-byte aligned, bytes a multiple of 16.
__device__ __forceinline__ void load(void* dst, void const* src, uint32_t bytes, uint64_t* bar,
                                     uint64_t policy) {
  uint32_t const b = smem_address(bar);
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(bytes)
               : "memory");
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1], %2, [%3], %4;" ::"r"(smem_address(dst)),
      "l"(src), "r"(bytes), "r"(b), "l"(policy)
      : "memory");
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
}  // namespace engine
}  // namespace tilefoundry

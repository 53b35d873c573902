// Thread-block clusters (sm_90 and later): consecutive CTAs a launch groups (host::CudaLaunch::
// start_in_clusters), which run at the same time, may wait for each other at the cluster's barrier
// and read each other's shared memory (distributed shared memory). Used by ops::attention (a key
// head's slices merged in their cluster) and ops::matmul's tensor-core tier (a tile's K split over
// the two CTAs of a cluster). Built for an older architecture, a CTA is a cluster of one: the
// barrier does nothing and no peer is read.
#pragma once

#include <tilefoundry/runtime/common/config.h>

#include <cstdint>
#include <type_traits>

namespace tilefoundry {
namespace cluster {

/// The CTAs of this CTA's thread-block cluster (1 where the launch made none).
__device__ __forceinline__ unsigned ctas() {
  unsigned n = 1;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
#endif
  return n;
}

/// This CTA's rank in its cluster (0 where the launch made none).
__device__ __forceinline__ unsigned rank() {
  unsigned r = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
#endif
  return r;
}

/// Waits until every thread of this CTA's cluster has arrived here; what they wrote before is then
/// visible to the cluster's threads (release on arrival, acquire on leaving: cluster scope). Every
/// thread of the cluster calls it, whole warps at a time.
__device__ __forceinline__ void barrier() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "barrier.cluster.arrive.release.aligned;\n\t"
      "barrier.cluster.wait.acquire.aligned;" ::
          : "memory");
#endif
}

/// The first half of barrier(), without its ordering of memory: every thread of the cluster calls
/// it, then wait() before touching a peer's shared memory, which every CTA of the cluster has then
/// started (a store into a CTA's memory before it has started is undefined). Between the two a
/// thread may run anything but another arrival.
__device__ __forceinline__ void arrive() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
#endif
}

/// The second half: waits until every thread of the cluster has arrived.
__device__ __forceinline__ void wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
#endif
}

/// The address, in the cluster's shared window, of `p` (this CTA's shared memory) in the cluster's
/// CTA `peer`: the same offset in its shared memory.
__device__ __forceinline__ unsigned peer_address(void const* p, unsigned peer) {
  unsigned remote = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  unsigned const local = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(peer));
#else
  (void)p;
  (void)peer;
#endif
  return remote;
}

/// The float at `p` (an address of this CTA's shared memory) in the cluster's CTA `peer`.
__device__ __forceinline__ float peer_float(float const* p, unsigned peer) {
  float v = 0.0f;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(peer_address(p, peer)));
#else
  (void)p;
  (void)peer;
#endif
  return v;
}

/// Makes `bar` (an mbarrier of this CTA's shared memory) wait for `bytes` that peers store into
/// this CTA with store_async (its first phase completes once they have all landed), visible to the
/// cluster's CTAs by the cluster's barrier that follows (arrive() ... wait()). One thread calls it.
__device__ __forceinline__ void expect_bytes(uint64_t* bar, unsigned bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  unsigned const at = static_cast<unsigned>(__cvta_generic_to_shared(bar));
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(at) : "memory");
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(at), "r"(bytes)
               : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#else
  (void)bar;
  (void)bytes;
#endif
}

/// Stores `v` (a float4 or a float) at `address` in the cluster's shared window (peer_address:
/// another CTA's shared memory) and counts its bytes on the mbarrier at `bar` there (peer_address
/// of an expect_bytes barrier): no fence and no cluster barrier; the CTA that waits on the mbarrier
/// sees the stores once their bytes are all counted (wait_bytes).
template <class V>
__device__ __forceinline__ void store_async(unsigned address, V const& v, unsigned bar) {
  static_assert(std::is_same_v<V, float4> || std::is_same_v<V, float>, "a float4 or a float");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (std::is_same_v<V, float4>) {
    asm volatile(
        "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, "
        "[%5];" ::"r"(address),
        "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(bar)
        : "memory");
  } else {
    asm volatile(
        "st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [%0], %1, [%2];" ::"r"(address),
        "f"(v), "r"(bar)
        : "memory");
  }
#else
  (void)address;
  (void)v;
  (void)bar;
#endif
}

/// Waits until the expect_bytes barrier `bar` of this CTA has counted every byte it expects.
__device__ __forceinline__ void wait_bytes(uint64_t* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  unsigned const at = static_cast<unsigned>(__cvta_generic_to_shared(bar));
  unsigned done = 0;
  while (!done) {
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done)
        : "r"(at)
        : "memory");
  }
#else
  (void)bar;
#endif
}

}  // namespace cluster
}  // namespace tilefoundry

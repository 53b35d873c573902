// Thread-block clusters (sm_90 and later): consecutive CTAs a launch groups (host::CudaLaunch::
// start_in_clusters), which run at the same time, may wait for each other at the cluster's barrier
// and read each other's shared memory (distributed shared memory). Used by ops::attention (a key
// head's slices merged in their cluster) and ops::matmul's tensor-core tier (a tile's K split over
// the two CTAs of a cluster). Built for an older architecture, a CTA is a cluster of one: the
// barrier does nothing and no peer is read.
#pragma once

#include <tilefoundry/runtime/common/config.h>

#include <cstdint>

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

/// Stores `v` at `address` in the cluster's shared window (peer_address: another CTA's shared
/// memory); store_float4 says more.
__device__ __forceinline__ void store_float(unsigned address, float v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(address), "f"(v) : "memory");
#else
  (void)address;
  (void)v;
#endif
}

/// Stores `v` at `address` in the cluster's shared window (peer_address: another CTA's shared
/// memory). The store does not wait; the cluster's barrier after it makes it visible to the CTA
/// whose memory it is.
__device__ __forceinline__ void store_float4(unsigned address, float4 v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(address), "f"(v.x),
               "f"(v.y), "f"(v.z), "f"(v.w)
               : "memory");
#else
  (void)address;
  (void)v;
#endif
}

}  // namespace cluster
}  // namespace tilefoundry

// Programmatic dependent launch (Hopper, sm_90 and later): a kernel launched with it may start
// while the kernel before it on the stream is still finishing, so its launch and the previous
// kernel's tail overlap (a GPU-side gap of a microsecond or two between dependent kernels
// otherwise, much of a decode step's small kernels).
//
// A kernel so launched calls wait_for_earlier_kernels() before it reads anything: the call returns
// once the kernel before it has completed and its writes are visible (the whole grid, not a
// trigger: a kernel reads whatever any earlier kernel wrote), and then lets the kernel after it
// start the same way. Its CTAs have all started by then, so the next kernel's early CTAs never
// take an SM one of its own still needs. Launched without the attribute, or built for an older
// architecture, the call does nothing. The host half is host::CudaLaunch::start.
#pragma once

#include <tilefoundry/runtime/common/config.h>

namespace tilefoundry {

/// Waits for the kernel before this one on the stream to complete (its writes visible), then lets
/// the kernel after this one begin launching.
__device__ __forceinline__ void wait_for_earlier_kernels() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

}  // namespace tilefoundry

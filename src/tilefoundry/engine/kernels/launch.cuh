// Launching a kernel from an entry: on the caller's stream (the one tvm-ffi took from torch's
// current stream, also while torch captures a CUDA graph), on the tensors' device, with
// Programmatic Dependent Launch allowed unless it was switched off (set_pdl).
#pragma once

#include <cuda_runtime.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/extra/cuda/device_guard.h>
#include <tvm/ffi/tvm_ffi.h>

#include <atomic>
#include <utility>

namespace tilefoundry {
namespace engine {

/// Whether launches allow Programmatic Dependent Launch (on by default; see common.cuh).
inline std::atomic<bool>& pdl_enabled() {
  static std::atomic<bool> on{true};
  return on;
}

/// The number of streaming multiprocessors of device `id`, read once per device.
inline int sm_count(int id) {
  constexpr int kDevices = 64;
  static std::atomic<int> counts[kDevices] = {};
  if (id < 0 || id >= kDevices) {
    int n = 0;
    TVM_FFI_CHECK_CUDA_ERROR(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, id));
    return n;
  }
  int n = counts[id].load(std::memory_order_relaxed);
  if (n == 0) {
    TVM_FFI_CHECK_CUDA_ERROR(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, id));
    counts[id].store(n, std::memory_order_relaxed);
  }
  return n;
}

/// Launches kernel<<<grid, block, smem>>>(args...) on device `id`'s current stream (as tvm-ffi
/// reports it); a refused launch raises RuntimeError naming the entry.
template <class... Params, class... Actual>
void launch(char const* entry, int id, void (*kernel)(Params...), dim3 grid, dim3 block,
            size_t smem, Actual&&... args) {
  tvm::ffi::CUDADeviceGuard guard(id);
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(kDLCUDA, id));
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = pdl_enabled().load(std::memory_order_relaxed) ? 1 : 0;
  cudaError_t const err = cudaLaunchKernelEx(&config, kernel, std::forward<Actual>(args)...);
  if (err != cudaSuccess) {
    TVM_FFI_THROW(RuntimeError) << entry << ": the kernel launch failed: " << cudaGetErrorName(err)
                                << " (" << cudaGetErrorString(err) << ")";
  }
}

}  // namespace engine
}  // namespace tilefoundry

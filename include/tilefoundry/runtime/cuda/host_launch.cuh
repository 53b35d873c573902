// The CUDA half of a generated host entry (host code of a CUDA translation unit that exports
// entries, -DTILEFOUNDRY_HOST_ENTRY): the device its tensors sit on must exist, the kernel is
// launched on the caller's current stream for that device, and a launch that fails is reported.
//
// - CudaArgChecker refuses what ArgChecker refuses; a tensor that is not on a CUDA device, on a
//   machine with no CUDA device at all, is refused by saying that no device is present.
// - CudaLaunch makes the tensors' device current for the launch (the caller's is restored
//   after), checks that it exists, and hands out the stream: the one the caller set through
//   tvm-ffi (TVMFFIEnvGetStream, which tvm-ffi fills from torch's current stream on every call
//   passing a CUDA tensor). When the caller's stream is the legacy default (null) stream, the
//   launch goes to the per-thread default stream instead: the null stream is never launched on,
//   and the legacy stream synchronises with the per-thread one both ways, so the kernel is still
//   ordered after the caller's earlier work and before its later work.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/host_entry.h>

#include <cuda_runtime_api.h>
#include <tvm/ffi/extra/c_env_api.h>

#include <cstddef>
#include <cstdint>

namespace tilefoundry {
namespace host {
namespace detail {

/// How many CUDA devices this process sees; 0, with the runtime's reason in `why`, when none.
inline int cuda_device_count(cudaError_t* why) {
  int n = 0;
  cudaError_t const e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();  // the query's error is an answer, not a failure of the next call
    *why = e;
    return 0;
  }
  *why = n > 0 ? cudaSuccess : cudaErrorNoDevice;
  return n;
}

}  // namespace detail

/// The argument checks of an entry compiled for a CUDA target.
class CudaArgChecker : public ArgChecker {
 public:
  /// `target` names what the entry was compiled for, as messages give it.
  CudaArgChecker(char const* entry, char const* target) : ArgChecker(entry), target_(target) {}

  /// As ArgChecker::device; a tensor elsewhere than on a CUDA device, on a machine without one,
  /// is refused by saying that no CUDA device is present.
  void device(TensorView const& t, char const* param, DLDeviceType device_type, char const* label) {
    if (t.device().device_type != device_type) {
      cudaError_t why = cudaSuccess;
      if (detail::cuda_device_count(&why) == 0) {
        TVM_FFI_THROW(RuntimeError)
            << entry() << ": no CUDA device is present here (the CUDA runtime says: "
            << cudaGetErrorString(why) << "); this entry was compiled for " << target_
            << " and runs on a CUDA GPU (argument " << param << " is on " << device_name(t.device())
            << ")";
      }
    }
    ArgChecker::device(t, param, device_type, label);
  }

  char const* target() const { return target_; }

 private:
  char const* target_;
};

/// One launch of a kernel: its device made current, its stream, and the check of the launch.
class CudaLaunch {
 public:
  /// The device is the one every tensor `check` saw sits on (checked by then).
  explicit CudaLaunch(CudaArgChecker const& check) : entry_(check.entry()) {
    device_ = check.device_index() < 0 ? 0 : check.device_index();
    cudaError_t why = cudaSuccess;
    int const count = detail::cuda_device_count(&why);
    if (count == 0) {
      TVM_FFI_THROW(RuntimeError) << entry_ << ": no CUDA device is present here (the CUDA runtime "
                                  << "says: " << cudaGetErrorString(why)
                                  << "); this entry was compiled for " << check.target()
                                  << " and runs on a CUDA GPU";
    }
    if (device_ >= count) {
      TVM_FFI_THROW(ValueError) << entry_ << ": the tensors are on cuda:" << device_
                                << ", but this process sees " << count << " CUDA device"
                                << (count == 1 ? "" : "s");
    }
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device_) fail_on(cudaSetDevice(device_), "making the tensors' device current");
    auto const env = static_cast<cudaStream_t>(TVMFFIEnvGetStream(kDLCUDA, device_));
    stream_ = env != nullptr && env != cudaStreamLegacy ? env : cudaStreamPerThread;
  }

  CudaLaunch(CudaLaunch const&) = delete;
  CudaLaunch& operator=(CudaLaunch const&) = delete;

  ~CudaLaunch() {
    if (previous_ >= 0 && previous_ != device_) cudaSetDevice(previous_);
  }

  /// The stream to launch on: the caller's, never the null stream.
  cudaStream_t stream() const { return stream_; }

  /// A grid of `ctas` CTAs along x (at most 2^31 - 1).
  unsigned grid(int64_t ctas) const {
    if (ctas < 0 || ctas > 2147483647) {
      TVM_FFI_THROW(ValueError) << entry_ << ": this call needs " << ctas
                                << " CTAs, beyond a CUDA grid's 2^31 - 1";
    }
    return static_cast<unsigned>(ctas);
  }

  /// Lets `kernel` take `bytes` of dynamic shared memory per CTA (beyond the default 48 KiB
  /// only where the device allows it; refused otherwise, saying what needs it). The limit is only
  /// ever raised: a kernel several entries launch (codegen/unit.py's shared kernels), or one entry
  /// with calls of other extents, keeps what an earlier launch needed, which a CUDA graph that
  /// captured that launch may replay after this call.
  template <class Kernel>
  void dynamic_shared_memory(Kernel* kernel, std::size_t bytes, char const* what) {
    if (bytes <= 48 * 1024) return;
    cudaFuncAttributes attrs{};
    fail_on(cudaFuncGetAttributes(&attrs, kernel), "reading the kernel's attributes");
    if (bytes <= static_cast<std::size_t>(attrs.maxDynamicSharedSizeBytes)) return;
    int limit = 0;
    fail_on(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device_),
            "reading the device's shared memory limit");
    if (bytes + attrs.sharedSizeBytes > static_cast<std::size_t>(limit)) {
      TVM_FFI_THROW(ValueError) << entry_ << ": this call needs " << bytes + attrs.sharedSizeBytes
                                << " bytes of shared memory per CTA (" << what
                                << "), more than the " << limit << " a CTA of cuda:" << device_
                                << " may have";
    }
    fail_on(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(bytes)),
            "raising the kernel's dynamic shared memory limit");
  }

  /// Reports a launch the runtime refused (a bad configuration, no kernel image for this GPU).
  void launched() const { fail_on(cudaGetLastError(), "launching the kernel"); }

  /// Launches `kernel` over `ctas` CTAs of `threads` threads with `shared_bytes` of dynamic shared
  /// memory on the stream, as a programmatic dependent launch where the device has it (compute
  /// capability 9.0 and later: the kernel may start while the one before it finishes, and calls
  /// wait_for_earlier_kernels() before reading anything), and reports a refused launch.
  template <class... Params, class... Args>
  void start(void (*kernel)(Params...), unsigned ctas, unsigned threads, std::size_t shared_bytes,
             Args... args) const {
    LaunchConfig launch(*this, ctas, threads, shared_bytes, capability() >= 9);
    fail_on(cudaLaunchKernelEx(&launch.config, kernel, static_cast<Params>(args)...),
            "launching the kernel");
  }

  /// ... in thread-block clusters of `cluster` consecutive CTAs (compute capability 9.0 and later;
  /// `ctas` a multiple of it), each cluster's CTAs running at once and able to wait for each other.
  /// More than the portable 8 where the device allows it; refused otherwise, saying so.
  template <class... Params, class... Args>
  void start_in_clusters(void (*kernel)(Params...), unsigned ctas, unsigned cluster,
                         unsigned threads, std::size_t shared_bytes, Args... args) const {
    int const major = capability();
    if (major < 9) {
      TVM_FFI_THROW(RuntimeError) << entry_ << ": its kernel runs in thread-block clusters of "
                                  << cluster << " CTAs, which cuda:" << device_
                                  << " (compute capability " << major
                                  << ".x) does not have; build it for this GPU's architecture";
    }
    if (cluster > 8) {
      fail_on(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1),
              "allowing clusters of more than 8 CTAs");
    }
    LaunchConfig launch(*this, ctas, threads, shared_bytes, true);
    launch.add(cudaLaunchAttributeClusterDimension).clusterDim = {cluster, 1, 1};
    cudaError_t const e = cudaLaunchKernelEx(&launch.config, kernel, static_cast<Params>(args)...);
    if (e != cudaSuccess) {
      cudaGetLastError();
      int fits = 0;
      if (cudaOccupancyMaxActiveClusters(&fits, kernel, &launch.config) == cudaSuccess &&
          fits < 1) {
        TVM_FFI_THROW(RuntimeError) << entry_ << ": no cluster of " << cluster << " CTAs of "
                                    << threads << " threads of its kernel fits on cuda:" << device_
                                    << " (" << cudaGetErrorName(e) << ")";
      }
      fail_on(e, "launching the kernel");
    }
  }

 private:
  /// A launch's configuration on the stream, with its attributes (the programmatic dependent
  /// launch's where asked, and any added).
  struct LaunchConfig {
    cudaLaunchConfig_t config{};
    cudaLaunchAttribute attrs[2]{};

    LaunchConfig(CudaLaunch const& on, unsigned ctas, unsigned threads, std::size_t shared_bytes,
                 bool dependent) {
      config.gridDim = dim3(ctas);
      config.blockDim = dim3(threads);
      config.dynamicSmemBytes = shared_bytes;
      config.stream = on.stream_;
      config.attrs = attrs;
      if (dependent)
        add(cudaLaunchAttributeProgrammaticStreamSerialization)
            .programmaticStreamSerializationAllowed = 1;
    }
    LaunchConfig(LaunchConfig const&) = delete;  // config.attrs points into this one
    LaunchConfig& operator=(LaunchConfig const&) = delete;

    /// The value of a new attribute `id`, to be set by the caller.
    cudaLaunchAttributeValue& add(cudaLaunchAttributeID id) {
      cudaLaunchAttribute& a = attrs[config.numAttrs++];
      a.id = id;
      return a.val;
    }
  };

  /// The device's compute capability, its major number.
  int capability() const {
    int major = 0;
    fail_on(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device_),
            "reading the device's compute capability");
    return major;
  }

  void fail_on(cudaError_t e, char const* doing) const {
    if (e != cudaSuccess) {
      cudaGetLastError();
      TVM_FFI_THROW(RuntimeError) << entry_ << ": " << doing << " on cuda:" << device_
                                  << " failed: " << cudaGetErrorName(e) << " ("
                                  << cudaGetErrorString(e) << ")";
    }
  }

  char const* entry_;
  int device_ = 0;
  int previous_ = -1;
  cudaStream_t stream_ = nullptr;
};

/// Global memory of `count` elements for one call of a staged entry: allocated on the caller's
/// stream and freed on it when the entry returns (stream-ordered, so a CUDA graph capturing the
/// call captures both), the memory between the stages that write and read it.
template <class T>
class DeviceScratch {
 public:
  DeviceScratch(CudaArgChecker const& check, int64_t count)
      : launch_(check), entry_(check.entry()) {
    if (count <= 0) return;
    std::size_t const bytes = static_cast<std::size_t>(count) * sizeof(T);
    void* p = nullptr;
    cudaError_t const e = cudaMallocAsync(&p, bytes, launch_.stream());
    if (e != cudaSuccess) {
      cudaGetLastError();
      TVM_FFI_THROW(RuntimeError) << entry_ << ": allocating " << bytes
                                  << " bytes between its stages failed: " << cudaGetErrorName(e)
                                  << " (" << cudaGetErrorString(e) << ")";
    }
    data_ = static_cast<T*>(p);
  }

  DeviceScratch(DeviceScratch const&) = delete;
  DeviceScratch& operator=(DeviceScratch const&) = delete;

  ~DeviceScratch() {
    if (data_ != nullptr) cudaFreeAsync(data_, launch_.stream());
  }

  T* data() const { return data_; }

 private:
  CudaLaunch launch_;
  char const* entry_;
  T* data_ = nullptr;
};

}  // namespace host
}  // namespace tilefoundry

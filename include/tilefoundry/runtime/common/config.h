// Annotations shared by every runtime header. The target is fixed by runtime.h before this is read.
//
// Every other header under runtime/ includes this one as its first include, so a translation
// unit that includes any runtime subheader without going through <tilefoundry/runtime.h> stops
// at the #error below before anything else is read (spec 2). tests/cpp proves it header by header.
#pragma once

#if !defined(TILEFOUNDRY_RUNTIME_UMBRELLA)
#error \
    "include <tilefoundry/runtime.h>; the runtime's subheaders are not included directly (spec 2)"
#endif

#include <cute/tensor_impl.hpp>

// Generated code spells infinite and NaN float literals INFINITY and NAN, and the least integers
// INT8_MIN / INT32_MIN / INT64_MIN: macros that expand to constants on both compilers, where
// std::numeric_limits' functions are host functions nvcc refuses in a __global__ function.
#include <cmath>
#include <cstdint>

// Op entries, their impl functors and op tags run on the device under the CUDA target (spec 3,
// "Annotation convention"); under the CPU target the same code is ordinary inline host code.
#if defined(TILEFOUNDRY_TARGET_CUDA)
#define TILEFOUNDRY_DEVICE __device__ __forceinline__
#else
#define TILEFOUNDRY_DEVICE inline
#endif

// Op-body code a kernel carries for inputs it may never see (another tier, another row count):
// on the device a function of its own, not inlined, so that the path a kernel runs lies together
// in its instructions and the ones it does not run stay out of its way. A decode step's kernels
// each run once a layer, their instructions fetched cold every time: with its other tiers
// inlined, the compiled attention (183 KB of code) cost a Qwen3-1.7B decode step on the H200
// 2049 us against 1851 with them out of line (context 1024; ops::attention). On the host, inline.
#if defined(__CUDACC__)
#define TILEFOUNDRY_DEVICE_OUTLINED __device__ __noinline__
#else
#define TILEFOUNDRY_DEVICE_OUTLINED inline
#endif

// Host-device code that is not a tensor view or layout helper: scalar conversions, program
// queries. Spec 3 reserves CUTE_HOST_DEVICE for the view / layout helpers that are genuinely
// host-compilable (local(), make_shard_tensor, tilefoundry::copy and the layout arithmetic behind
// them), so that CUTE_HOST_DEVICE on a declaration says "a view helper, usable from the host" and
// nothing else. A helper those views call but which is no view itself (detail::convert under
// tilefoundry::copy, program_id under Mesh::local_index) must still compile for both sides; it
// takes this project annotation instead, which reads the same to the compiler and keeps the two
// kinds apart to a reader, to a grep, and to tests/cpp/host_device_annotation.cpp. Code that only
// op bodies reach takes TILEFOUNDRY_DEVICE.
#if defined(__CUDACC__)
#define TILEFOUNDRY_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define TILEFOUNDRY_HOST_DEVICE inline
#endif

// Program queries back the host-device view helpers (local(), Mesh::local_index).
#define TILEFOUNDRY_PROGRAM_QUERY TILEFOUNDRY_HOST_DEVICE

// A namespace-scope function object usable from host and device code (tilefoundry::copy). nvcc's
// device pass needs the object in device memory, where a namespace-scope constexpr object has
// internal linkage; the host pass and g++ see an ordinary inline variable.
#if defined(__CUDA_ARCH__)
#define TILEFOUNDRY_GLOBAL_CONSTANT __device__ constexpr
#else
#define TILEFOUNDRY_GLOBAL_CONSTANT inline constexpr
#endif

// A loop whose iterations are vector lanes (a CPU tier's loop over one vector of values): OpenMP's
// simd where the build has OpenMP (the CPU target's builds do), else nothing (the compiler's own
// vectoriser decides; an unknown pragma would warn).
#if defined(_OPENMP)
#define TILEFOUNDRY_SIMD_LOOP _Pragma("omp simd")
#else
#define TILEFOUNDRY_SIMD_LOOP
#endif

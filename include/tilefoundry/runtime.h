// The one header generated code includes. It picks the target runtime from the build-injected
// macro; generated code never includes a target subheader itself (spec 2).
#pragma once

// Lets the runtime's own headers tell this path from a direct include of a target subheader.
#define TILEFOUNDRY_RUNTIME_UMBRELLA 1

#if defined(TILEFOUNDRY_TARGET_CUDA) && defined(TILEFOUNDRY_TARGET_CPU)
#error \
    "tilefoundry/runtime.h: both TILEFOUNDRY_TARGET_CUDA and TILEFOUNDRY_TARGET_CPU are defined; define exactly one"
#elif !defined(TILEFOUNDRY_TARGET_CUDA) && !defined(TILEFOUNDRY_TARGET_CPU)
#error \
    "tilefoundry/runtime.h: define exactly one of TILEFOUNDRY_TARGET_CUDA or TILEFOUNDRY_TARGET_CPU (-D on the compiler line)"
#elif defined(TILEFOUNDRY_TARGET_CUDA)
#if !defined(__CUDACC__)
#error "tilefoundry/runtime.h: TILEFOUNDRY_TARGET_CUDA needs a CUDA compiler (nvcc)"
#endif
#include <tilefoundry/runtime/cuda/runtime.cuh>
#else
#include <tilefoundry/runtime/cpu/runtime.h>
#endif

// A translation unit that exports host entries through tvm-ffi (what codegen emits) also gets the
// argument checks those entries run; the build defines the macro and puts tvm-ffi on the path.
#if defined(TILEFOUNDRY_HOST_ENTRY)
#include <tilefoundry/runtime/common/host_entry.h>
#if defined(TILEFOUNDRY_TARGET_CUDA)
#include <tilefoundry/runtime/cuda/host_launch.cuh>
#endif
#endif

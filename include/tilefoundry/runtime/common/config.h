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

// Op entries, their impl functors and op tags run on the device under the CUDA target (spec 3,
// "Annotation convention"); under the CPU target the same code is ordinary inline host code.
#if defined(TILEFOUNDRY_TARGET_CUDA)
#define TILEFOUNDRY_DEVICE __device__ __forceinline__
#else
#define TILEFOUNDRY_DEVICE inline
#endif

// Program queries back the host-device view helpers (local(), Mesh::local_index).
#define TILEFOUNDRY_PROGRAM_QUERY CUTE_HOST_DEVICE

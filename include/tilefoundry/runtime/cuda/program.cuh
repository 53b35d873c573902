// Program queries on the CUDA target: the cta level is the grid, the thread level the block.
// Ids are linearised x-fastest, the order in which CUDA numbers warps and schedules blocks.
// They are host-device so that the view helpers built on them (Mesh::local_index, local()) stay
// host-device as the spec asks; host code of a CUDA translation unit runs outside any launch and
// sees itself as the single instance of every level (id 0, launch-provided extent 1), as host
// code outside cpu::launch does on the CPU target.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/topology.h>

namespace tilefoundry {
namespace detail {

template <TopologyScope T>
TILEFOUNDRY_HOST_DEVICE dim3 launch_extent() {
  static_assert(T == TopologyScope::cta || T == TopologyScope::thread,
                "program queries: scope_count is not a level");
#if defined(__CUDA_ARCH__)
  if constexpr (T == TopologyScope::cta) {
    return gridDim;
  } else {
    return blockDim;
  }
#else
  return dim3(1, 1, 1);
#endif
}

template <TopologyScope T>
TILEFOUNDRY_HOST_DEVICE uint3 launch_index() {
#if defined(__CUDA_ARCH__)
  if constexpr (T == TopologyScope::cta) {
    return blockIdx;
  } else {
    return threadIdx;
  }
#else
  return uint3{0, 0, 0};
#endif
}

}  // namespace detail

template <TopologyScope T>
TILEFOUNDRY_PROGRAM_QUERY auto program_shape() noexcept {
  if constexpr (detail::has_static_shape<T>::value) {
    return typename static_program_shape<T>::type{};
  } else {
    dim3 const e = detail::launch_extent<T>();
    return cute::make_shape(static_cast<int>(e.x), static_cast<int>(e.y), static_cast<int>(e.z));
  }
}

template <TopologyScope T>
TILEFOUNDRY_PROGRAM_QUERY auto program_dim() noexcept {
  return cute::size(program_shape<T>());
}

// A translation unit whose launches are all one-dimensional, grids and blocks along x alone, says
// so by defining TILEFOUNDRY_LINEAR_LAUNCH before it includes the runtime (generated code does: its
// host entries launch <<<ctas, threads>>>); program_id then reads the x index alone, with no
// linearisation over y and z before a kernel's first address. An id is below 2^31 (a grid holds at
// most 2^31 - 1 CTAs along x, a block 1024 threads), and the mask says so to the compiler: it then
// divides ids (a mesh's coordinates) by shifts, without signed fix-ups.
template <TopologyScope T>
TILEFOUNDRY_PROGRAM_QUERY auto program_id() noexcept {
  uint3 const i = detail::launch_index<T>();
#if defined(TILEFOUNDRY_LINEAR_LAUNCH)
  unsigned int const id = i.x;
#else
  dim3 const e = detail::launch_extent<T>();
  unsigned int const id = i.x + e.x * (i.y + e.y * i.z);
#endif
  return static_cast<int>(id & 0x7fffffffu);
}

}  // namespace tilefoundry

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

template <TopologyScope T>
TILEFOUNDRY_PROGRAM_QUERY auto program_id() noexcept {
  dim3 const e = detail::launch_extent<T>();
  uint3 const i = detail::launch_index<T>();
  return static_cast<int>(i.x + e.x * (i.y + e.y * i.z));
}

}  // namespace tilefoundry

// Spec 3 reserves CUTE_HOST_DEVICE for tensor-view / layout helpers; host-device code that is no
// view takes TILEFOUNDRY_HOST_DEVICE, and op-body helpers TILEFOUNDRY_DEVICE (config.h).
//
// This file reads the runtime with CUTE_HOST_DEVICE redefined to mark whatever the runtime
// declares with it as deprecated (CuTe itself is read first, with its own definition), then uses
// the non-view helpers. Compiled with -Werror, a use of one that is declared CUTE_HOST_DEVICE
// fails the build. CASE_VIEW_HELPER uses local(), which must stay CUTE_HOST_DEVICE: CMakeLists.txt
// expects that refusal, which proves the redefinition reaches the runtime's declarations. The
// same file is compiled by g++ for the CPU target and by nvcc for the CUDA target.
#include <cute/tensor.hpp>

#undef CUTE_HOST_DEVICE
#if defined(__CUDACC__)
#define CUTE_HOST_DEVICE \
  __attribute__((deprecated("declared CUTE_HOST_DEVICE"))) __forceinline__ __host__ __device__
#else
#define CUTE_HOST_DEVICE __attribute__((deprecated("declared CUTE_HOST_DEVICE"))) inline
#endif

#include <tilefoundry/runtime.h>

namespace tf = tilefoundry;
using TS = tf::TopologyScope;

// Device code under CUDA, where element() is device-only like the op body that uses it. Inline
// and unused: the front end checks it, and no code is generated for it.
#if defined(TILEFOUNDRY_TARGET_CUDA)
#define TF_TEST_QUALIFIER __device__
#else
#define TF_TEST_QUALIFIER
#endif

inline TF_TEST_QUALIFIER int uses_helpers_that_are_no_views(float const* p) {
#if defined(CASE_VIEW_HELPER)
  auto layout = cute::make_layout(cute::make_shape(cute::Int<4>{}));
  auto mesh = tf::make_mesh<TS::cta>(cute::make_layout(cute::make_shape(1)));
  auto t =
      tf::make_shard_tensor(cute::make_tensor(p, layout), layout,
                            tf::make_shard_layout(layout, cute::make_tuple(tf::shard::B{}), mesh));
  return int(tf::local(t)(0));
#else
  // numeric.h: scalar conversions
  float const c = tf::detail::convert<float>(cutlass::half_t(1.5f));
  float const d = tf::detail::to_compute(cutlass::bfloat16_t(2.0f));
  // binary_impl.h: the scalar-or-element accessor of the binary op body
  float const e = tf::ops::binary_impl::element(*p, 0);
  // program queries and the static extent behind them
  long const n = tf::detail::static_count<TS::thread>();
  int const id = int(tf::program_id<TS::cta>()) + int(tf::program_dim<TS::cta>()) +
                 int(cute::size(tf::program_shape<TS::thread>()));
#if defined(TILEFOUNDRY_TARGET_CUDA)
  int const launch =
      int(tf::detail::launch_extent<TS::cta>().x + tf::detail::launch_index<TS::cta>().x);
#else
  int const launch = 0;
#endif
  return int(c + d + e) + int(n) + id + launch;
#endif
}

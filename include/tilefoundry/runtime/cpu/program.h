// Program queries on the CPU target: CTAs are the iterations of a parallel loop run by
// cpu::launch, and the thread level has extent 1.
#pragma once

#include <tilefoundry/runtime/common/config.h>

#include <cassert>

#include <tilefoundry/runtime/common/topology.h>

// The thread level is static 1 on this target, whatever the translation unit declares; generated
// code states it as on every target, TILEFOUNDRY_STATIC_PROGRAM_SHAPE(thread, 1), and any other
// extent is refused there (topology.h).
template <>
struct tilefoundry::static_program_shape<tilefoundry::TopologyScope::thread> {
  using type = cute::Shape<cute::Int<1>>;
};
template <>
struct tilefoundry::target_fixed_extent<tilefoundry::TopologyScope::thread>
    : std::integral_constant<long, 1> {};

namespace tilefoundry {
namespace cpu {

struct cta_context {
  int id = 0;
  int count = 1;
};

// Each loop iteration runs on one OpenMP thread, so the current CTA is per host thread. Outside
// launch() the host is one CTA of one.
inline thread_local cta_context current_cta;

/// Runs body() once per CTA, CTAs spread over the OpenMP threads (serially without OpenMP, and
/// without waking the thread team for a single CTA).
template <class Body>
void launch(int num_ctas, Body&& body) {
  constexpr TopologyScope cta = detail::dependent_level<TopologyScope::cta, Body>;
  if constexpr (detail::has_static_shape<cta>::value) {
    assert(num_ctas == detail::static_count<cta>() &&
           "cpu::launch: CTA count differs from the static program shape");
  }
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) if (num_ctas > 1)
#endif
  for (int i = 0; i < num_ctas; ++i) {
    cta_context const saved = current_cta;
    current_cta = cta_context{i, num_ctas};
    body();
    current_cta = saved;
  }
}

}  // namespace cpu

template <TopologyScope T>
TILEFOUNDRY_PROGRAM_QUERY auto program_shape() noexcept {
  static_assert(T != TopologyScope::scope_count, "program_shape: scope_count is not a level");
  if constexpr (detail::has_static_shape<T>::value) {
    return typename static_program_shape<T>::type{};
  } else {
    return cute::make_shape(cpu::current_cta.count);
  }
}

template <TopologyScope T>
TILEFOUNDRY_PROGRAM_QUERY auto program_dim() noexcept {
  return cute::size(program_shape<T>());
}

template <TopologyScope T>
TILEFOUNDRY_PROGRAM_QUERY auto program_id() noexcept {
  static_assert(T != TopologyScope::scope_count, "program_id: scope_count is not a level");
  if constexpr (T == TopologyScope::thread) {
    return cute::Int<0>{};
  } else {
    return cpu::current_cta.id;
  }
}

}  // namespace tilefoundry

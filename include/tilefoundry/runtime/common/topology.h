// Program topology levels and the compile-time description of their extents (spec 2.1, 2.2).
#pragma once

#include <tilefoundry/runtime/common/config.h>

namespace tilefoundry {

/**
 * @brief A fixed enumeration of program topology levels.
 */
enum class TopologyScope {
  cta,          ///< maps to blockIdx
  thread,       ///< maps to threadIdx
  scope_count,  ///< a sentinel
};

// How a level's extent becomes static: the emission rule (spec 2.2) is that generated code
// declares, with TILEFOUNDRY_STATIC_PROGRAM_SHAPE, every level whose extent it knows at compile
// time; the declaration specialises declared_program_shape with `type` a cute::Shape of cute::Int.
// A level left undeclared is launch-provided: program_dim reads it from the launch at run time
// and no constexpr program_shape exists for it. A CUDA engineer writes the same numbers into
// <<<grid, block>>>; keeping them in a trait, rather than macros, lets one translation unit hold
// several kernels that agree on them.
template <TopologyScope T>
struct declared_program_shape {};

// The static shape the runtime reads: what the translation unit declared, unless the target fixes
// the level itself (the CPU target's thread level is always 1: cpu/program.h specialises this).
template <TopologyScope T>
struct static_program_shape : declared_program_shape<T> {};

// The one extent a target runs a level at, or -1 where the translation unit chooses. A
// declaration must agree with it, so that generated code states the thread level the same way on
// every target (TILEFOUNDRY_STATIC_PROGRAM_SHAPE(thread, 1) on the CPU).
template <TopologyScope T>
struct target_fixed_extent : std::integral_constant<long, -1> {};

/**
 * @brief Shape of topology level T (e.g. program_shape<cta>() -> grid dims).
 * @tparam T the topology level
 */
template <TopologyScope T>
TILEFOUNDRY_PROGRAM_QUERY auto program_shape() noexcept;

/**
 * @brief Size of topology level T.
 * @tparam T the topology level
 */
template <TopologyScope T>
TILEFOUNDRY_PROGRAM_QUERY auto program_dim() noexcept;

/**
 * @brief Linearized scalar runtime id of T (current execution instance).
 * @tparam T the topology level
 */
template <TopologyScope T>
TILEFOUNDRY_PROGRAM_QUERY auto program_id() noexcept;

namespace detail {

// Names a level dependently inside a template, so that its static shape is looked up when the
// template is instantiated (after generated code has declared it), not when the header is read.
template <TopologyScope T, class Dependent>
constexpr TopologyScope dependent_level = T;

template <int... Extents>
using int_shape = cute::Shape<cute::Int<Extents>...>;

template <TopologyScope T, int... Extents>
constexpr bool target_accepts_extent() {
  constexpr long fixed = target_fixed_extent<T>::value;
  return fixed < 0 || (1L * ... * Extents) == fixed;
}

template <TopologyScope T, class = void>
struct has_static_shape : std::false_type {};
template <TopologyScope T>
struct has_static_shape<T, std::void_t<typename static_program_shape<T>::type>> : std::true_type {};

// The level's device count when it is static, else -1.
template <TopologyScope T>
TILEFOUNDRY_HOST_DEVICE constexpr long static_count() {
  if constexpr (has_static_shape<T>::value) {
    return decltype(cute::size(typename static_program_shape<T>::type{}))::value;
  } else {
    return -1;
  }
}

}  // namespace detail
}  // namespace tilefoundry

// Generated code (and tests) state a static level in one line, at namespace scope, before the
// first kernel that uses it: TILEFOUNDRY_STATIC_PROGRAM_SHAPE(thread, 128); A level the target
// fixes may be stated too, at the target's extent only (the CPU target: thread 1).
#define TILEFOUNDRY_STATIC_PROGRAM_SHAPE(level, ...)                                        \
  template <>                                                                               \
  struct tilefoundry::declared_program_shape<tilefoundry::TopologyScope::level> {           \
    using type = ::tilefoundry::detail::int_shape<__VA_ARGS__>;                             \
  };                                                                                        \
  static_assert(                                                                            \
      ::tilefoundry::detail::target_accepts_extent<::tilefoundry::TopologyScope::level,     \
                                                   __VA_ARGS__>(),                          \
      "TILEFOUNDRY_STATIC_PROGRAM_SHAPE(" #level ", " #__VA_ARGS__                          \
      "): this target fixes the extent of that level (the CPU target runs each CTA on one " \
      "host thread, so its thread level is 1); state the target's extent or leave it out")

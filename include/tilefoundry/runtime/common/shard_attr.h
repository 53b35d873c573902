// Compile-time shard attributes (spec 2.5), one per mesh axis of a ShardLayout, and the traits
// the runtime reads them through.
#pragma once

#include <tilefoundry/runtime/common/config.h>

#include <type_traits>

namespace tilefoundry {
namespace shard {

template <int Axis>
struct S {};  // Split: mesh axis m walks canonical layout axis Axis
struct B {};  // Broadcast: every instance along m sees the whole tensor
template <class Reduction>
struct P {};        // Partial: the full value is the Reduction-combination of the instances' values
struct Dynamic {};  // data-dependent; must be resolved before local()

}  // namespace shard

namespace detail {

template <class A>
struct split_axis : std::integral_constant<int, -1> {};
template <int K>
struct split_axis<shard::S<K>> : std::integral_constant<int, K> {};

template <class A>
constexpr bool is_split_v = split_axis<A>::value >= 0;
template <class A>
constexpr bool is_broadcast_v = std::is_same_v<A, shard::B>;
template <class A>
constexpr bool is_dynamic_v = std::is_same_v<A, shard::Dynamic>;

template <class A>
struct partial_reduction {
  static constexpr bool value = false;
  using type = void;
};
template <class R>
struct partial_reduction<shard::P<R>> {
  static constexpr bool value = true;
  using type = R;
};
template <class A>
constexpr bool is_partial_v = partial_reduction<A>::value;

}  // namespace detail
}  // namespace tilefoundry

// ShardLayout (spec 2.4): the canonical layout of a distributed tensor, one shard attribute per
// mesh axis, and the mesh it is spread over.
//
// What the spec's formulas imply, stated here because the shard spec it cites is not ours: a
// split is expressed in the canonical layout by a mode of its own whose extent equals the mesh
// axis's extent, and whose stride is the distance between two instances' pieces (0 where each
// instance holds its piece in its own storage, e.g. registers). Blocked and cyclic distributions
// are the same rule with that mode placed outside or inside the per-instance modes.
#pragma once

#include <tilefoundry/runtime/common/config.h>

namespace tilefoundry {

/// Every element of the canonical layout exists (the Bound of an unbounded ShardLayout).
struct no_bound {};

/**
 * @brief A plain layout / attrs / mesh aggregate.
 *
 * Bound, where given (make_shard_layout's fourth argument, an int or cute::Int), says how many
 * elements of the canonical layout exist, counted in its colexicographic order: the layout is
 * padded past them so that its split modes match the mesh axes (a row of 4095 elements over 256
 * threads: 16 elements a thread, the last 1 of them padding). An instance's view (local()) then
 * holds only its existing elements, a prefix of its local view cut in the last canonical mode,
 * which must not be split; the bound is therefore a whole number of the canonical extents inside
 * the innermost split mode (the row's vector). No op reads, writes or reduces the padding.
 */
template <class Layout, class Attrs, class Mesh, class Bound = no_bound>
struct ShardLayout {
  Layout layout;  ///< the underlying CuTe layout
  Attrs attrs;    ///< shard attributes, ordered by mesh axis
  Mesh mesh;      ///< the bound device domain
  Bound bound;    ///< elements of the canonical layout that exist (no_bound: all of them)
};

template <class Layout, class Attrs, class Mesh>
CUTE_HOST_DEVICE constexpr auto make_shard_layout(Layout const& layout, Attrs const& attrs,
                                                  Mesh const& mesh) {
  return ShardLayout<Layout, Attrs, Mesh>{layout, attrs, mesh, no_bound{}};
}

/// A ShardLayout of which only the first `bound` canonical elements exist (see ShardLayout).
template <class Layout, class Attrs, class Mesh, class Bound>
CUTE_HOST_DEVICE constexpr auto make_shard_layout(Layout const& layout, Attrs const& attrs,
                                                  Mesh const& mesh, Bound const& bound) {
  return ShardLayout<Layout, Attrs, Mesh, Bound>{layout, attrs, mesh, bound};
}

template <class T>
struct is_shard_layout : std::false_type {};
template <class L, class A, class M, class B>
struct is_shard_layout<ShardLayout<L, A, M, B>> : std::true_type {};

/// Whether a ShardLayout type pads its canonical layout past a bound.
template <class T>
struct is_bounded_layout : std::false_type {};
template <class L, class A, class M, class B>
struct is_bounded_layout<ShardLayout<L, A, M, B>>
    : std::bool_constant<!std::is_same_v<B, no_bound>> {};

}  // namespace tilefoundry

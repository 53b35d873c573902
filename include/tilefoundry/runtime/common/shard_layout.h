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

/**
 * @brief A plain layout / attrs / mesh aggregate.
 */
template <class Layout, class Attrs, class Mesh>
struct ShardLayout {
  Layout layout;  ///< the underlying CuTe layout
  Attrs attrs;    ///< shard attributes, ordered by mesh axis
  Mesh mesh;      ///< the bound device domain
};

template <class Layout, class Attrs, class Mesh>
CUTE_HOST_DEVICE constexpr auto make_shard_layout(Layout const& layout, Attrs const& attrs,
                                                  Mesh const& mesh) {
  return ShardLayout<Layout, Attrs, Mesh>{layout, attrs, mesh};
}

template <class T>
struct is_shard_layout : std::false_type {};
template <class L, class A, class M>
struct is_shard_layout<ShardLayout<L, A, M>> : std::true_type {};

}  // namespace tilefoundry

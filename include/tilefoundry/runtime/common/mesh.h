// Mesh (spec 2.3): a CuTe layout whose axes map onto program topology levels.
//
// Choices where the spec is silent, made as a CUDA engineer would expect them:
// - The axes-to-topology rule needs each level's device count. Every level except the first one
//   listed must therefore have a static extent (static_program_shape); the first level takes
//   whatever axes remain, so a launch-provided CTA count works when cta comes first. When the
//   counts and extents are static, a mismatch is a compile error.
// - A level's axes linearise that level's own program_id. Their strides are taken relative to
//   the smallest stride among them (axes of extent 1 ignored), so a mesh may be written either
//   per level, (4,32):(1,1), or as one compact layout over the whole mesh, (4,32):(32,1) or
//   (4,32):(1,4); all three give cta = axis 0 and thread = axis 1.
// - A level with device count 1 takes no axes (the greedy rule is satisfied before consuming).
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/topology.h>

namespace tilefoundry {
namespace detail {

template <class X>
constexpr long static_value_or_dynamic() {
  if constexpr (cute::is_static<X>::value) {
    return static_cast<long>(X::value);
  } else {
    return -1;
  }
}

template <class Shape, int... I>
constexpr cute::array<long, sizeof...(I)> static_extents(std::integer_sequence<int, I...>) {
  return {{static_value_or_dynamic<cute::remove_cvref_t<cute::tuple_element_t<I, Shape>>>()...}};
}

enum class mesh_plan_error { none, dynamic_count, dynamic_extent, no_match, first_mismatch };

template <std::size_t N>
struct mesh_plan {
  cute::array<int, N + 1> bound{};  // topology t owns mesh axes [bound[t], bound[t + 1])
  mesh_plan_error error = mesh_plan_error::none;
};

// The spec's greedy rule: from the last topology backwards, consume trailing axes until their
// product equals the topology's device count; the first topology keeps what remains.
template <std::size_t R, std::size_t N>
constexpr mesh_plan<N> plan_mesh(cute::array<long, R> extent, cute::array<long, N> count) {
  mesh_plan<N> plan;
  int end = static_cast<int>(R);
  plan.bound[N] = end;
  for (int t = static_cast<int>(N) - 1; t >= 1; --t) {
    if (count[t] < 0) {
      plan.error = mesh_plan_error::dynamic_count;
      return plan;
    }
    long product = 1;
    while (product != count[t]) {
      if (end == 0 || product > count[t]) {
        plan.error = mesh_plan_error::no_match;
        return plan;
      }
      if (extent[end - 1] < 0) {
        plan.error = mesh_plan_error::dynamic_extent;
        return plan;
      }
      product *= extent[--end];
    }
    plan.bound[t] = end;
  }
  plan.bound[0] = 0;
  if (N > 0 && count[0] >= 0) {
    long product = 1;
    bool all_static = true;
    for (int a = 0; a < end; ++a) {
      all_static = all_static && extent[a] >= 0;
      product *= extent[a] < 0 ? 1 : extent[a];
    }
    if (all_static && product != count[0]) plan.error = mesh_plan_error::first_mismatch;
  }
  return plan;
}

struct no_stride_yet {};

template <class A, class B>
CUTE_HOST_DEVICE constexpr auto min_of(A const& a, B const& b) {
  if constexpr (std::is_same_v<A, no_stride_yet>) {
    return b;
  } else if constexpr (cute::is_static<A>::value && cute::is_static<B>::value) {
    return cute::Int<(A::value < B::value ? A::value : B::value)>{};
  } else {
    return a < b ? static_cast<int>(a) : static_cast<int>(b);
  }
}

// Smallest stride among the modes [I, E) whose extent is not a static 1.
template <int I, int E, class Shape, class Stride, class Acc>
CUTE_HOST_DEVICE constexpr auto group_unit(Shape const& s, Stride const& d, Acc const& acc) {
  if constexpr (I == E) {
    if constexpr (std::is_same_v<Acc, no_stride_yet>) {
      return cute::Int<1>{};
    } else {
      return acc;
    }
  } else if constexpr (cute::is_constant<1,
                                         cute::remove_cvref_t<decltype(cute::get<I>(s))>>::value) {
    return group_unit<I + 1, E>(s, d, acc);
  } else {
    return group_unit<I + 1, E>(s, d, min_of(acc, cute::get<I>(d)));
  }
}

// The sub-coordinate of one topology level: idx2crd over that level's axes, strides relative
// to the level.
template <int B, int E, class Shape, class Stride, class Id>
CUTE_HOST_DEVICE constexpr auto group_coord(Shape const& s, Stride const& d, Id const& id) {
  if constexpr (B == E) {
    return cute::tuple<>{};
  } else {
    auto unit = group_unit<B, E>(s, d, no_stride_yet{});
    auto strides = cute::transform(cute::take<B, E>(d), [&](auto x) { return x / unit; });
    if constexpr (E == B + 1 &&
                  cute::is_constant<1,
                                    cute::remove_cvref_t<decltype(cute::get<0>(strides))>>::value) {
      // The level's one axis spans its device count, so the id is the coordinate: no modulo
      // (a division when the extent is launch-provided).
      return cute::make_tuple(id);
    } else {
      return cute::idx2crd(id, cute::take<B, E>(s), strides);
    }
  }
}

// The axes-to-topology grouping of a mesh shape for given device counts (-1: launch-provided),
// and the coordinate it yields. Mesh instantiates it with the target's counts; it is separate so
// the rule can be exercised with any counts.
template <class ShapeT, long... Counts>
struct mesh_grouping {
  static constexpr int rank = cute::tuple_size<ShapeT>::value;
  static constexpr std::size_t levels = sizeof...(Counts);
  static constexpr auto plan =
      plan_mesh<rank, levels>(static_extents<ShapeT>(std::make_integer_sequence<int, rank>{}),
                              cute::array<long, levels>{{Counts...}});
  static_assert(plan.error != mesh_plan_error::dynamic_count,
                "Mesh: every topology after the first needs a static device count "
                "(TILEFOUNDRY_STATIC_PROGRAM_SHAPE)");
  static_assert(plan.error != mesh_plan_error::dynamic_extent,
                "Mesh: axes matched to a later topology need static extents");
  static_assert(plan.error != mesh_plan_error::no_match,
                "Mesh: trailing mesh axes do not multiply to a topology's device count");
  static_assert(plan.error != mesh_plan_error::first_mismatch,
                "Mesh: the first topology's axes do not multiply to its device count");

  template <std::size_t T>
  static constexpr int bound = plan.bound[T];

  /// Which level (index into the counts) owns mesh axis m.
  static constexpr int level_of_axis(int m) {
    int t = 0;
    while (t + 1 < static_cast<int>(levels) && plan.bound[t + 1] <= m) ++t;
    return t;
  }

  /// Full mesh coordinate of the instance whose per-level ids are `ids`.
  template <class Shape, class Stride, class Ids>
  CUTE_HOST_DEVICE static auto coord(Shape const& s, Stride const& d, Ids const& ids) {
    return coord_impl(s, d, ids, std::make_index_sequence<levels>{});
  }

 private:
  template <class Shape, class Stride, class Ids, std::size_t... T>
  CUTE_HOST_DEVICE static auto coord_impl(Shape const& s, Stride const& d, Ids const& ids,
                                          std::index_sequence<T...>) {
    return cute::tuple_cat(group_coord<bound<T>, bound<T + 1>>(s, d, cute::get<T>(ids))...);
  }
};

}  // namespace detail

/**
 * @brief A device mesh: a CuTe layout whose axes map to program topology levels.
 */
template <class MeshLayout, TopologyScope... Topos>
struct Mesh {
  static_assert(sizeof...(Topos) >= 1, "Mesh: name at least one topology level");

  MeshLayout mesh_layout;  ///< a CuTe-compatible layout type
  static constexpr auto topologies = cute::make_tuple(Topos...);

  using shape_type = cute::remove_cvref_t<decltype(cute::wrap(MeshLayout{}.shape()))>;
  using stride_type = cute::remove_cvref_t<decltype(cute::wrap(MeshLayout{}.stride()))>;
  static constexpr int rank = cute::tuple_size<shape_type>::value;
  static constexpr std::size_t levels = sizeof...(Topos);
  static constexpr cute::array<TopologyScope, levels> topology_list{{Topos...}};

  using grouping = detail::mesh_grouping<shape_type, detail::static_count<Topos>()...>;
  static constexpr auto plan = grouping::plan;

  /// Which topology level (index into topologies) owns mesh axis m.
  static constexpr int level_of_axis(int m) { return grouping::level_of_axis(m); }

  CUTE_HOST_DEVICE auto shape() const { return cute::wrap(mesh_layout.shape()); }
  CUTE_HOST_DEVICE auto stride() const { return cute::wrap(mesh_layout.stride()); }

  /// Full mesh coordinate of the instance whose per-level ids (in topologies order) are `ids`.
  template <class Ids>
  CUTE_HOST_DEVICE auto coord_of(Ids const& ids) const noexcept {
    return grouping::coord(shape(), stride(), ids);
  }

  /// Full mesh coordinate for this execution instance.
  CUTE_HOST_DEVICE auto local_index() const noexcept {
    return coord_of(cute::make_tuple(program_id<Topos>()...));
  }
};

template <TopologyScope... Topos, class MeshLayout>
CUTE_HOST_DEVICE constexpr auto make_mesh(MeshLayout const& layout) {
  return Mesh<MeshLayout, Topos...>{layout};
}

template <class T>
struct is_mesh : std::false_type {};
template <class L, TopologyScope... Ts>
struct is_mesh<Mesh<L, Ts...>> : std::true_type {};

}  // namespace tilefoundry

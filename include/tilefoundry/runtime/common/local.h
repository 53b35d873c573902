// local() and shard_partition (spec 2.10, 3.3): the view one execution instance owns, of a
// ShardTensor or of a cute::Tensor whose layout is a ShardLayout (spec 2.9).
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/aligned_ptr.h>
#include <tilefoundry/runtime/common/mesh.h>
#include <tilefoundry/runtime/common/shard_attr.h>
#include <tilefoundry/runtime/common/shard_tensor.h>

namespace tilefoundry {
namespace detail {

template <class Attrs>
constexpr int attr_count = cute::tuple_size<Attrs>::value;

// The mesh axis splitting canonical axis K, or -1.
template <class Attrs, int K, int M = 0>
CUTE_HOST_DEVICE constexpr int mesh_axis_splitting() {
  if constexpr (M == attr_count<Attrs>) {
    return -1;
  } else if constexpr (split_axis<cute::remove_cvref_t<cute::tuple_element_t<M, Attrs>>>::value ==
                       K) {
    static_assert(mesh_axis_splitting<Attrs, K, M + 1>() < 0,
                  "ShardLayout: two mesh axes split the same canonical axis");
    return M;
  } else {
    return mesh_axis_splitting<Attrs, K, M + 1>();
  }
}

template <class SL, int K>
CUTE_HOST_DEVICE constexpr auto local_extent(SL const& sl) {
  using Attrs = decltype(sl.attrs);
  constexpr int m = mesh_axis_splitting<Attrs, K>();
  if constexpr (m < 0) {
    return cute::get<K>(cute::wrap(sl.layout.shape()));
  } else {
    using Extent = cute::remove_cvref_t<decltype(cute::get<K>(cute::wrap(sl.layout.shape())))>;
    using MeshExtent = cute::remove_cvref_t<decltype(cute::get<m>(sl.mesh.shape()))>;
    if constexpr (cute::is_static<Extent>::value && cute::is_static<MeshExtent>::value) {
      static_assert(
          Extent::value == MeshExtent::value,
          "ShardLayout: a split canonical mode's extent must equal its mesh axis's extent");
    }
    return cute::Int<1>{};
  }
}

template <class SL, int... K>
CUTE_HOST_DEVICE constexpr auto local_shape(SL const& sl, std::integer_sequence<int, K...>) {
  return cute::make_shape(local_extent<SL, K>(sl)...);
}

template <class SL, class Coord, int... M>
CUTE_HOST_DEVICE auto local_offset(SL const& sl, Coord const& coord,
                                   std::integer_sequence<int, M...>) {
  auto stride = cute::wrap(sl.layout.stride());
  auto term = [&](auto m) {
    using A = cute::remove_cvref_t<cute::tuple_element_t<decltype(m)::value, decltype(sl.attrs)>>;
    static_assert(!is_dynamic_v<A>,
                  "local(): a Dynamic shard attribute must be resolved before local()");
    if constexpr (is_split_v<A>) {
      return cute::get<decltype(m)::value>(coord) * cute::get<split_axis<A>::value>(stride);
    } else {
      return cute::Int<0>{};  // Broadcast and Partial contribute nothing
    }
  };
  return (cute::Int<0>{} + ... + term(cute::Int<M>{}));
}

}  // namespace detail

/// The local shape of a shard layout: each split canonical mode becomes a static 1, so views of
/// register tensors keep fully static layouts even when the mesh extent is launch-provided.
template <class L, class A, class M, class B>
CUTE_HOST_DEVICE constexpr auto shard_layout_local_shape(ShardLayout<L, A, M, B> const& sl) {
  constexpr int rank = cute::tuple_size<decltype(cute::wrap(sl.layout.shape()))>::value;
  return detail::local_shape(sl, std::make_integer_sequence<int, rank>{});
}

namespace detail {

// Whether every split mode's stride is static and a whole number of Bytes / Elem elements, so
// that an instance's view starts as aligned as the whole tensor.
template <int Bytes, int Elem, class L, class Attrs, int... M>
CUTE_HOST_DEVICE constexpr bool splits_keep_alignment(std::integer_sequence<int, M...>) {
  using Stride = cute::remove_cvref_t<decltype(cute::wrap(std::declval<L const&>().stride()))>;
  auto keeps = [](auto m) {
    using A = cute::remove_cvref_t<cute::tuple_element_t<decltype(m)::value, Attrs>>;
    if constexpr (is_split_v<A>) {
      using D = cute::remove_cvref_t<cute::tuple_element_t<split_axis<A>::value, Stride>>;
      if constexpr (cute::is_static<D>::value) {
        return (long(D::value) * Elem) % Bytes == 0;
      } else {
        return false;
      }
    } else {
      return true;
    }
  };
  return (true && ... && keeps(cute::Int<M>{}));
}

// Whether an instance's view of a tensor over Iterator, sharded by ShardLayout<L, A, M>, keeps the
// alignment Iterator promises (false where it promises none).
template <class Iterator, class L, class A>
CUTE_HOST_DEVICE constexpr bool view_keeps_promise() {
  constexpr int bytes = promised_alignment_v<Iterator>;
  if constexpr (bytes > 0) {
    constexpr int elem = int(sizeof(typename cute::remove_cvref_t<Iterator>::value_type));
    return splits_keep_alignment<bytes, elem, L, A>(
        std::make_integer_sequence<int, attr_count<A>>{});
  } else {
    return false;
  }
}

// The canonical (colexicographic, compact) stride of every mode of a shape.
template <class Shape, int... K>
CUTE_HOST_DEVICE constexpr cute::array<long, sizeof...(K)> canonical_strides(
    Shape const& s, std::integer_sequence<int, K...>) {
  cute::array<long, sizeof...(K)> out{{long(cute::get<K>(s))...}};
  long acc = 1;
  for (std::size_t k = 0; k < sizeof...(K); ++k) {
    long const e = out[k];
    out[k] = acc;
    acc *= e;
  }
  return out;
}

/// How many elements of its local view the instance at `coord` holds under a bounded shard
/// layout: the local elements whose canonical (colexicographic) index is below the bound. Along
/// the local view's order the canonical index only grows, so they are a prefix: per unsplit mode,
/// outermost first, the whole digits below what is left of the bound, then the partial digit's
/// elements one mode further in.
template <class L, class A, class M, class B, class Coord>
CUTE_HOST_DEVICE long bounded_count(ShardLayout<L, A, M, B> const& sl, Coord const& coord) {
  auto const shape = cute::wrap(sl.layout.shape());
  constexpr int rank = cute::tuple_size<decltype(shape)>::value;
  auto const cs = canonical_strides(shape, std::make_integer_sequence<int, rank>{});
  cute::array<long, rank> extent{};
  cute::array<bool, rank> split{};
  long base = 0;
  cute::for_each(cute::make_int_sequence<rank>{}, [&](auto k) {
    constexpr int m = mesh_axis_splitting<A, decltype(k)::value>();
    extent[k] = long(cute::get<decltype(k)::value>(shape));
    if constexpr (m >= 0) {
      split[k] = true;
      base += long(cute::get<m>(coord)) * cs[k];
    }
  });
  long rem = long(sl.bound) - base;
  long inner = 1;  // elements of the local view inside mode k
  cute::array<long, rank> inside{};
  for (int k = 0; k < rank; ++k) {
    inside[k] = inner;
    if (!split[k]) inner *= extent[k];
  }
  long count = 0;
  for (int k = rank - 1; k >= 0 && rem > 0; --k) {
    if (split[k]) continue;
    long const whole = rem / cs[k] < extent[k] ? rem / cs[k] : extent[k];
    count += whole * inside[k];
    if (whole == extent[k]) return count;
    rem -= whole * cs[k];
  }
  return rem > 0 ? count + 1 : count;
}

// The local layout of an instance: the split modes static 1s, and under a bounded shard layout the
// last mode cut to the instance's existing elements.
template <class L, class A, class M, class B, class Coord>
CUTE_HOST_DEVICE auto local_layout_of(ShardLayout<L, A, M, B> const& sl, Coord const& coord) {
  auto const shape = shard_layout_local_shape(sl);
  auto const stride = cute::wrap(sl.layout.stride());
  if constexpr (std::is_same_v<B, no_bound>) {
    (void)coord;
    return cute::make_layout(shape, stride);
  } else {
    constexpr int rank = cute::tuple_size<decltype(shape)>::value;
    static_assert(mesh_axis_splitting<A, rank - 1>() < 0,
                  "ShardLayout: a bound cuts the last canonical mode, which no mesh axis splits");
    auto const inner = cute::size(cute::take<0, rank - 1>(shape));
    int const outer = int(bounded_count(sl, coord) / long(inner));
    return cute::make_layout(cute::replace<rank - 1>(shape, outer), stride);
  }
}

template <class Iterator, class L, class A, class M, class B>
CUTE_HOST_DEVICE auto project(Iterator base, ShardLayout<L, A, M, B> const& sl) {
  static_assert(attr_count<A> == M::rank, "ShardLayout: one shard attribute per mesh axis");
  auto coord = sl.mesh.local_index();
  auto offset = local_offset(sl, coord, std::make_integer_sequence<int, attr_count<A>>{});
  auto local_layout = local_layout_of(sl, coord);
  if constexpr (view_keeps_promise<Iterator, L, A>()) {
    // every split offset is a whole number of the promised alignment: the view keeps it
    return cute::make_tensor(aligned_like<Iterator>(cute::raw_pointer_cast(base + offset)),
                             local_layout);
  } else {
    return cute::make_tensor(base + offset, local_layout);
  }
}

}  // namespace detail

/**
 * @brief Project t to this execution instance's local view.
 * @param t the shard tensor to project
 */
template <class E, class GL, class SL>
CUTE_HOST_DEVICE auto local(ShardTensor<E, GL, SL> const& t) noexcept {
  return detail::project(t.engine.data(), t.shard_layout);
}

// A shard tensor that owns its storage (a register fragment) projects to a writable view.
template <class E, class GL, class SL>
CUTE_HOST_DEVICE auto local(ShardTensor<E, GL, SL>& t) noexcept {
  return detail::project(t.engine.data(), t.shard_layout);
}

// A cute::Tensor whose layout is a ShardLayout is distributed (spec 2.9): its engine is what the
// current instance holds, its layout the canonical one, so it projects by the same formula.
template <class E, class L, class A, class M, class B>
CUTE_HOST_DEVICE auto local(cute::Tensor<E, ShardLayout<L, A, M, B>> const& t) noexcept {
  return detail::project(t.data(), t.layout());
}

template <class E, class L, class A, class M, class B>
CUTE_HOST_DEVICE auto local(cute::Tensor<E, ShardLayout<L, A, M, B>>& t) noexcept {
  return detail::project(t.data(), t.layout());
}

/**
 * @brief Project tensor to the current device coordinate's local view.
 * @param tensor a tensor whose layout() is a ShardLayout
 */
template <class Tensor>
CUTE_HOST_DEVICE auto shard_partition(Tensor const& tensor) {
  static_assert(is_shard_layout<cute::remove_cvref_t<decltype(tensor.layout())>>::value,
                "shard_partition: tensor.layout() must be a ShardLayout");
  return local(tensor);
}

}  // namespace tilefoundry

// Wide accesses for copies: when a mode is contiguous in both views (static stride 1), its
// extent divides into vectors, every other stride is a whole number of vectors and both base
// pointers are aligned, the copy moves Bytes-wide words instead of elements. The static
// conditions are decided at compile time, the alignment (and dynamic strides) at run time.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/operand.h>

namespace tilefoundry {
namespace ops {
namespace detail {

template <int Bytes>
struct vector_word;
template <>
struct vector_word<16> {
  using type = uint4;
};
template <>
struct vector_word<8> {
  using type = uint2;
};
template <>
struct vector_word<4> {
  using type = unsigned int;
};

template <class L>
using flat_t = decltype(cute::flatten(std::declval<L>()));

template <class L, int I>
using mode_shape_t =
    cute::remove_cvref_t<decltype(cute::get<I>(cute::wrap(std::declval<L>().shape())))>;
template <class L, int I>
using mode_stride_t =
    cute::remove_cvref_t<decltype(cute::get<I>(cute::wrap(std::declval<L>().stride())))>;

template <class L>
constexpr int flat_rank = cute::tuple_size<decltype(cute::wrap(std::declval<L>().shape()))>::value;

// Mode I of both flat layouts is contiguous and splits into vectors of V elements.
template <int V, class FA, class FB, int I>
CUTE_HOST_DEVICE constexpr bool carries_vectors() {
  using SA = mode_shape_t<FA, I>;
  using SB = mode_shape_t<FB, I>;
  if constexpr (cute::is_constant<1, mode_stride_t<FA, I>>::value &&
                cute::is_constant<1, mode_stride_t<FB, I>>::value && cute::is_static<SA>::value &&
                cute::is_static<SB>::value) {
    return SA::value == SB::value && SA::value % V == 0;
  } else {
    return false;
  }
}

// Mode I can step from vector to vector: a static stride must be a nonzero multiple of V (a
// dynamic one is checked at run time); a mode of extent 1 never steps.
template <int V, class F, int I>
CUTE_HOST_DEVICE constexpr bool steps_by_vectors() {
  using S = mode_shape_t<F, I>;
  using D = mode_stride_t<F, I>;
  if constexpr (cute::is_constant<1, S>::value || !cute::is_static<D>::value) {
    return true;
  } else {
    return D::value != 0 && D::value % V == 0;
  }
}

template <int V, class FA, class FB, int Mode, int... I>
CUTE_HOST_DEVICE constexpr bool others_step(std::integer_sequence<int, I...>) {
  return (((I == Mode) || (steps_by_vectors<V, FA, I>() && steps_by_vectors<V, FB, I>())) && ...);
}

template <int V, class FA, class FB, int... I>
CUTE_HOST_DEVICE constexpr int find_vector_mode(std::integer_sequence<int, I...> seq) {
  int mode = -1;
  ((mode =
        (mode < 0 && carries_vectors<V, FA, FB, I>() && others_step<V, FA, FB, I>(seq)) ? I : mode),
   ...);
  return mode;
}

// The mode that carries V-element vectors in both a and b, or -1.
template <int V, class LA, class LB>
CUTE_HOST_DEVICE constexpr int vector_mode() {
  using FA = flat_t<LA>;
  using FB = flat_t<LB>;
  if constexpr (flat_rank<FA> != flat_rank<FB>) {
    return -1;
  } else {
    return find_vector_mode<V, FA, FB>(std::make_integer_sequence<int, flat_rank<FA>>{});
  }
}

template <int V, int Mode, int I, class F>
CUTE_HOST_DEVICE auto vector_extent(F const& f) {
  if constexpr (I == Mode) {
    return cute::get<I>(cute::wrap(f.shape())) / cute::Int<V>{};
  } else {
    return cute::get<I>(cute::wrap(f.shape()));
  }
}

template <int V, int Mode, int I, class F>
CUTE_HOST_DEVICE auto vector_stride(F const& f) {
  if constexpr (I == Mode) {
    return cute::Int<1>{};
  } else {
    return cute::get<I>(cute::wrap(f.stride())) / cute::Int<V>{};
  }
}

template <int V, class F, int... I>
CUTE_HOST_DEVICE bool dynamic_strides_step(F const& f, std::integer_sequence<int, I...>) {
  auto ok = [&](auto i) {
    using D = mode_stride_t<F, decltype(i)::value>;
    if constexpr (cute::is_static<D>::value) {
      return true;
    } else {
      return cute::get<decltype(i)::value>(cute::wrap(f.stride())) % V == 0;
    }
  };
  return (ok(cute::Int<I>{}) && ...);
}

// View t (flat) as vectors of V elements carried by Mode, as Word.
template <int V, int Mode, class Word, class T, int... I>
CUTE_HOST_DEVICE auto as_vectors(T const& t, std::integer_sequence<int, I...>) {
  auto f = cute::flatten(t.layout());
  auto layout = cute::make_layout(cute::make_shape(vector_extent<V, Mode, I>(f)...),
                                  cute::make_stride(vector_stride<V, Mode, I>(f)...));
  return cute::make_tensor(cute::recast_ptr<Word>(plain_iterator(t.data())), layout);
}

// Calls f(src_vectors, dst_vectors) and returns true when a and b can move as Bytes-wide words.
template <int Bytes, class S, class D, class F>
__device__ __forceinline__ bool with_vectors(S const& s, D const& d, F&& f) {
  using TS = value_t<S>;
  using TD = value_t<D>;
  if constexpr (!std::is_same_v<TS, TD> || Bytes % sizeof(TS) != 0 || Bytes / sizeof(TS) < 2) {
    return false;
  } else {
    constexpr int V = Bytes / sizeof(TS);
    using LS = decltype(s.layout());
    using LD = decltype(d.layout());
    constexpr int mode = vector_mode<V, LS, LD>();
    if constexpr (mode < 0) {
      return false;
    } else {
      using Seq = std::make_integer_sequence<int, flat_rank<flat_t<LS>>>;
      auto fs = cute::flatten(s.layout());
      auto fd = cute::flatten(d.layout());
      if (!aligned_to<Bytes>(s.data()) || !aligned_to<Bytes>(d.data()) ||
          !dynamic_strides_step<V>(fs, Seq{}) || !dynamic_strides_step<V>(fd, Seq{})) {
        return false;
      }
      using Word = typename vector_word<Bytes>::type;
      f(as_vectors<V, mode, Word>(s, Seq{}), as_vectors<V, mode, Word>(d, Seq{}));
      return true;
    }
  }
}

}  // namespace detail
}  // namespace ops
}  // namespace tilefoundry

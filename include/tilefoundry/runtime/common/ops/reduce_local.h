// The thread-local part of every reduce tier: each thread folds the elements it holds along the
// reduced modes, one accumulator per kept element (the plain tier is exactly this).
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/reduce_plan.h>

#include <cstring>

namespace tilefoundry {
namespace ops {
namespace detail {

template <class L, int... K>
CUTE_HOST_DEVICE constexpr auto select_modes(L const& l, std::integer_sequence<int, K...>) {
  if constexpr (sizeof...(K) == 0) {
    return cute::Layout<cute::_1, cute::_0>{};
  } else {
    auto s = cute::wrap(l.shape());
    auto d = cute::wrap(l.stride());
    return cute::make_layout(cute::make_shape(cute::get<K>(s)...),
                             cute::make_stride(cute::get<K>(d)...));
  }
}

template <class Split, class View>
CUTE_HOST_DEVICE constexpr auto kept_layout(View const& v) {
  return select_modes(v.layout(), typename Split::kept{});
}

template <class Split, class View>
CUTE_HOST_DEVICE constexpr auto reduced_layout(View const& v) {
  return select_modes(v.layout(), typename Split::reduced{});
}

// The dst layout indexed by the kept linear index j.
template <class Plan, class View>
CUTE_HOST_DEVICE constexpr auto dst_kept_layout(View const& v) {
  if constexpr (Plan::keepdim) {
    return select_modes(v.layout(), typename Plan::split::kept{});
  } else {
    return v.layout();
  }
}

// How many independent partial results a thread's fold keeps. On the CPU target one thread folds
// a whole row (thousands of elements): a single accumulator is a chain of dependent additions the
// compiler may not reorder, so the fold keeps fold_lanes partials (a max or min fold_chains
// vectors of the register's width, fold_vectors), combined at the end. A GPU thread folds a
// handful of elements and keeps one.
#if defined(TILEFOUNDRY_TARGET_CPU)
constexpr int fold_lanes = 16;
constexpr int fold_chains = 4;
#else
constexpr int fold_lanes = 1;
constexpr int fold_chains = 1;
#endif

#if defined(TILEFOUNDRY_TARGET_CPU)
// p = max(p, x) or min(p, x) on vectors of partials, keeping a NaN once it holds one and taking a
// NaN it meets, as nan_max / nan_min. By reference: a vector's passing ABI depends on the
// instruction set.
template <combine_kind Kind, class Lanes>
inline void combine_lanes(Lanes& p, Lanes const& x) {
  if constexpr (Kind == combine_kind::min) {
    p = ((x < p) | (x != x)) ? x : p;  // masks combined bit by bit: || on vectors goes lane by lane
  } else {
    p = ((p < x) | (x != x)) ? x : p;
  }
}

// Bytes of the widest vector register the build's instruction set has: GCC expands a vector
// operation wider than that piecewise, element by element (a 64-byte select on AVX2 became 16
// scalar compares: a softmax's max took 8 ms of its 25 at 2048 x 4096 on two AVX2 cores).
#if defined(__AVX512F__)
constexpr int vector_bytes = 64;
#elif defined(__AVX__)
constexpr int vector_bytes = 32;
#else
constexpr int vector_bytes = 16;
#endif

// The CPU fold of a max, min or absmax of get(r), get(r + 1), ... up to n in whole vectors (r
// advances past them; fold_entered). The compiler vectorises a sum over an array of partials but
// not a max or min, a fold of selects, which on GCC vectors of the register's width it does;
// fold_chains of them, so that one select's latency does not hold up the next (the result is the
// same in any order).
template <class T, class Acc, class Get>
inline Acc fold_vectors(Get const& get, int n, int& r) {
  constexpr int L = vector_bytes / int(sizeof(Acc)) > 0 ? vector_bytes / int(sizeof(Acc)) : 1;
  using Lanes [[gnu::vector_size(L * sizeof(Acc))]] = Acc;
  // at a long: with an int, GCC loads the last of the four vectors below element by element
  auto const load = [&](long at) {
    Acc lanes[L];
    for (int l = 0; l < L; ++l) lanes[l] = get(at + l);
    Lanes x;
    std::memcpy(&x, lanes, sizeof x);
    return x;
  };
  Lanes part[fold_chains];
  for (int q = 0; q < fold_chains; ++q) part[q] = Lanes{} + T::template identity<Acc>();
  for (; r + L * fold_chains <= n; r += L * fold_chains) {
    // unrolled: GCC keeps the partials in memory otherwise (a load and a store each)
    Lanes x[fold_chains];
#pragma GCC unroll 4
    for (int q = 0; q < fold_chains; ++q) x[q] = load(r + q * L);
#pragma GCC unroll 4
    for (int q = 0; q < fold_chains; ++q) combine_lanes<T::kind>(part[q], x[q]);
  }
  for (; r + L <= n; r += L) combine_lanes<T::kind>(part[0], load(r));
  Acc acc = T::template identity<Acc>();
  for (int q = 0; q < fold_chains; ++q) {
    for (int l = 0; l < L; ++l) acc = T::combine(acc, Acc(part[q][l]));
  }
  return acc;
}
#endif

// The fold of get(0), get(1), ..., get(n - 1), each an element already entered (T::enter) in the
// accumulator type Acc, called in that order: on the CPU a max or min in vectors (fold_vectors),
// anything else in fold_lanes partials combined in order, then the rest one by one. The order is
// the reduction's: ops::fold (cpu/ops/fold.h) folds the results an elementwise call stores through
// it too, so that it gives what ops::reduce over them gives.
template <class T, class Acc, class Get>
TILEFOUNDRY_DEVICE Acc fold_entered(Get const& get, int n) {
  int r = 0;
  Acc acc = T::template identity<Acc>();
#if defined(TILEFOUNDRY_TARGET_CPU)
  if constexpr (T::kind != combine_kind::sum && std::is_arithmetic_v<Acc> &&
                !std::is_same_v<Acc, bool>) {
    acc = fold_vectors<T, Acc>(get, n, r);
  } else
#endif
      if constexpr (fold_lanes > 1) {
    Acc part[fold_lanes];
    for (int l = 0; l < fold_lanes; ++l) part[l] = T::template identity<Acc>();
    for (; r + fold_lanes <= n; r += fold_lanes) {
      for (int l = 0; l < fold_lanes; ++l) part[l] = T::combine(part[l], get(r + l));
    }
    for (int l = 0; l < fold_lanes; ++l) acc = T::combine(acc, part[l]);
  }
  CUTE_UNROLL
  for (; r < n; ++r) acc = T::combine(acc, get(r));
  return acc;
}

// Fold of the elements of kept index j, in the accumulator type Acc.
template <class Op, class Acc, class Split, class SrcView>
TILEFOUNDRY_DEVICE Acc fold_local(SrcView const& src, int j) {
  using T = reduce_traits<Op>;
  auto const base = src.data() + kept_layout<Split>(src)(j);
  auto const red = reduced_layout<Split>(src);
  // (an int or a long index: fold_vectors reads at a long)
  auto const get = [&](auto i) { return T::enter(static_cast<Acc>(to_compute(base[red(i)]))); };
  return fold_entered<T, Acc>(get, int(cute::size(red)));
}

// Number of elements a mean divides by: the product of the reduced modes' extents in the
// operand's full (canonical, for a ShardTensor) shape.
template <class Split, class Shape>
CUTE_HOST_DEVICE auto reduced_count(Shape const& shape) {
  auto s = cute::wrap(shape);
  return cute::size(select_modes(cute::make_layout(s), typename Split::reduced{}));
}

template <class Src>
CUTE_HOST_DEVICE auto full_shape(Src const& src) {
  if constexpr (is_distributed_v<Src>) {
    return shard_layout_of(src).layout.shape();
  } else {
    return src.shape();
  }
}

// The count of a source as reduce calls it: under a bounded shard layout (shard_layout.h) only the
// existing elements count, the bound over the kept modes' extents (a bounded source's kept modes
// are whole; a row reduced to one value keeps none).
template <class Split, class Src>
CUTE_HOST_DEVICE auto reduced_count_of(Src const& src) {
  if constexpr (is_distributed_v<Src>) {
    if constexpr (is_bounded_layout<shard_layout_t<Src>>::value) {
      auto const& sl = shard_layout_of(src);
      auto const kept = cute::size(
          select_modes(cute::make_layout(cute::wrap(sl.layout.shape())), typename Split::kept{}));
      return long(sl.bound) / long(kept);
    } else {
      return reduced_count<Split>(full_shape(src));
    }
  } else {
    return reduced_count<Split>(full_shape(src));
  }
}

template <class Op, class Acc, class Count>
TILEFOUNDRY_DEVICE Acc finish(Acc acc, Count const& count) {
  if constexpr (reduce_traits<Op>::divides) {
    return acc / static_cast<Acc>(count);
  } else {
    (void)count;
    return acc;
  }
}

template <class View>
constexpr bool is_rmem_view_v =
    cute::is_rmem<cute::remove_cvref_t<decltype(std::declval<View>().data())>>::value;

}  // namespace detail
}  // namespace ops
}  // namespace tilefoundry

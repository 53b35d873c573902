// ops::copy on the CUDA target. Between two memory (gmem / smem) views of one element type it
// moves 16-, 8- or 4-byte words when the views allow it (vector.cuh), bit for bit; a small static
// copy loads every word before storing any, so all its loads are in flight together. Any other
// copy, converting ones (bf16 -> float) and those into or out of registers included, is the
// unary family's identity, with its 16-byte vector path (common/ops/vector_groups.h).
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/unary_impl.h>
#include <tilefoundry/runtime/cuda/ops/vector.cuh>
#include <tilefoundry/runtime/common/ops/vector_groups.h>

namespace tilefoundry {
namespace ops {
namespace detail {

inline constexpr int kMaxStagedWords = 32;

template <class S, class D>
__device__ __forceinline__ void copy_words(S const& s, D const& d) {
  using Size = decltype(cute::size(d));
  if constexpr (cute::is_static<Size>::value && Size::value <= kMaxStagedWords) {
    value_t<S> staged[Size::value];
    CUTE_UNROLL
    for (int i = 0; i < Size::value; ++i) staged[i] = s(i);
    CUTE_UNROLL
    for (int i = 0; i < Size::value; ++i) d(i) = staged[i];
  } else {
    for (int i = 0; i < int(cute::size(d)); ++i) d(i) = s(i);
  }
}

template <class V>
constexpr bool is_memory_view_v =
    !cute::is_rmem<cute::remove_cvref_t<decltype(std::declval<V const&>().data())>>::value;

}  // namespace detail

/// dst(i) = src(i), converting the element type; sizes must match.
template <class Src, class Dst>
__device__ void copy(Src const& src, Dst&& dst) {
  auto const s = detail::view_of(src);
  auto const d = detail::view_of(dst);
  if constexpr (detail::is_memory_view_v<decltype(s)> && detail::is_memory_view_v<decltype(d)>) {
    auto words = [](auto const& vs, auto const& vd) { detail::copy_words(vs, vd); };
    if (detail::with_vectors<16>(s, d, words)) return;
    if (detail::with_vectors<8>(s, d, words)) return;
    if (detail::with_vectors<4>(s, d, words)) return;
  }
  unary_impl::apply(identity_op{}, s, d, detail::vector_path{});
}

}  // namespace ops
}  // namespace tilefoundry

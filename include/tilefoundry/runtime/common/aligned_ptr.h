// aligned_gmem_ptr<T, Bytes>: a global-memory iterator that carries, in its type, the promise that
// the address it holds is a multiple of Bytes. Generated code makes one where the host entry has
// checked the promise (check.aligned) and the row offset keeps it; the 16-byte vector path
// (vector_groups.h) then skips its run-time alignment check, and with it the element-by-element
// fallback, for the views it moves.
//
// The promise holds for this address only: an offset (operator+, so every CuTe slice) gives a
// plain cute::gmem_ptr. local() / shard_partition keep it for an instance's view where every split
// stride is static and a whole number of Bytes (local.h), which is what makes it reach the ops.
#pragma once

#include <tilefoundry/runtime/common/config.h>

#include <cstdint>

namespace tilefoundry {

template <class T, int Bytes>
struct aligned_gmem_ptr : cute::iter_adaptor<T*, aligned_gmem_ptr<T, Bytes>> {
  static_assert(Bytes > 0 && (Bytes & (Bytes - 1)) == 0,
                "aligned_gmem_ptr: the alignment is a power of two");
  static_assert(Bytes % sizeof(T) == 0, "aligned_gmem_ptr: the alignment is whole elements");
  static constexpr int alignment = Bytes;
  using cute::iter_adaptor<T*, aligned_gmem_ptr<T, Bytes>>::iter_adaptor;

  // An offset may leave the alignment: the result is an ordinary global-memory pointer.
  template <class Index>
  CUTE_HOST_DEVICE constexpr auto operator+(Index const& i) const {
    return cute::make_gmem_ptr(this->ptr_ + i);
  }
};

/// The global-memory iterator at p, promising that p is a multiple of Bytes (the caller checked).
template <int Bytes, class T>
CUTE_HOST_DEVICE constexpr auto make_aligned_gmem_ptr(T* p) {
  return aligned_gmem_ptr<T, Bytes>{p};
}

/// The alignment in bytes an iterator type promises (0: none).
template <class It>
struct promised_alignment : std::integral_constant<int, 0> {};
template <class T, int Bytes>
struct promised_alignment<aligned_gmem_ptr<T, Bytes>> : std::integral_constant<int, Bytes> {};
template <class It>
constexpr int promised_alignment_v = promised_alignment<cute::remove_cvref_t<It>>::value;

}  // namespace tilefoundry

namespace cute {
// Residency: it is global memory, as cute::gmem_ptr is.
template <class T, int Bytes>
struct is_gmem<tilefoundry::aligned_gmem_ptr<T, Bytes>> : true_type {};
}  // namespace cute

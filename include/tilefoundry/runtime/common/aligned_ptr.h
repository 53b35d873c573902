// aligned_gmem_ptr<T, Bytes> / aligned_smem_ptr<T, Bytes>: a global- or shared-memory iterator that
// carries, in its type, the promise that the address it holds is a multiple of Bytes. Generated
// code makes a global one where the host entry has checked the promise (check.aligned) and the row
// offset keeps it, and a shared one over a __shared__ array it declared with that alignment; the
// 16-byte vector path (vector_groups.h) then skips its run-time alignment check, and with it the
// element-by-element fallback, for the views it moves.
//
// The promise holds for this address only: an offset (operator+, so every CuTe slice) gives a
// plain cute::gmem_ptr / smem_ptr. local() / shard_partition keep it for an instance's view where
// every split stride is static and a whole number of Bytes (local.h), which is what makes it reach
// the ops.
#pragma once

#include <tilefoundry/runtime/common/config.h>

#include <cstdint>

namespace tilefoundry {
namespace detail {

// The memory an aligned iterator points into, and CuTe's plain iterator for it.
struct gmem_space {
  template <class T>
  CUTE_HOST_DEVICE static constexpr auto plain(T* p) {
    return cute::make_gmem_ptr(p);
  }
};
struct smem_space {
  template <class T>
  CUTE_HOST_DEVICE static constexpr auto plain(T* p) {
    return cute::make_smem_ptr(p);
  }
};

}  // namespace detail

template <class T, int Bytes, class Space>
struct aligned_ptr : cute::iter_adaptor<T*, aligned_ptr<T, Bytes, Space>> {
  static_assert(Bytes > 0 && (Bytes & (Bytes - 1)) == 0,
                "aligned_ptr: the alignment is a power of two");
  static_assert(Bytes % sizeof(T) == 0, "aligned_ptr: the alignment is whole elements");
  static constexpr int alignment = Bytes;
  using space = Space;
  using cute::iter_adaptor<T*, aligned_ptr<T, Bytes, Space>>::iter_adaptor;

  // An offset may leave the alignment: the result is an ordinary pointer of the same memory.
  template <class Index>
  CUTE_HOST_DEVICE constexpr auto operator+(Index const& i) const {
    return Space::plain(this->ptr_ + i);
  }
};

template <class T, int Bytes>
using aligned_gmem_ptr = aligned_ptr<T, Bytes, detail::gmem_space>;
template <class T, int Bytes>
using aligned_smem_ptr = aligned_ptr<T, Bytes, detail::smem_space>;

/// The global-memory iterator at p, promising that p is a multiple of Bytes (the caller checked).
template <int Bytes, class T>
CUTE_HOST_DEVICE constexpr auto make_aligned_gmem_ptr(T* p) {
  return aligned_gmem_ptr<T, Bytes>{p};
}

/// The shared-memory iterator at p, promising that p is a multiple of Bytes (an array declared so).
template <int Bytes, class T>
CUTE_HOST_DEVICE constexpr auto make_aligned_smem_ptr(T* p) {
  return aligned_smem_ptr<T, Bytes>{p};
}

/// The alignment in bytes an iterator type promises (0: none).
template <class It>
struct promised_alignment : std::integral_constant<int, 0> {};
template <class T, int Bytes, class Space>
struct promised_alignment<aligned_ptr<T, Bytes, Space>> : std::integral_constant<int, Bytes> {};
template <class It>
constexpr int promised_alignment_v = promised_alignment<cute::remove_cvref_t<It>>::value;

namespace detail {

/// An iterator of the same memory at p (raw), promising Bytes as `It` does: what local() gives an
/// instance's view of an aligned tensor whose splits keep the alignment.
template <class It, class T>
CUTE_HOST_DEVICE constexpr auto aligned_like(T* p) {
  using I = cute::remove_cvref_t<It>;
  return aligned_ptr<T, I::alignment, typename I::space>{p};
}

/// CuTe's plain iterator over the memory `it` points to (an aligned iterator loses its promise;
/// CuTe's own algorithms, recast_ptr among them, know the plain ones only).
template <class It>
CUTE_HOST_DEVICE constexpr auto plain_iterator(It const& it) {
  constexpr int promised = promised_alignment_v<It>;
  if constexpr (promised > 0) {
    return cute::remove_cvref_t<It>::space::plain(cute::raw_pointer_cast(it));
  } else {
    return it;
  }
}

/// Whether `it` points to a multiple of Bytes: known from its type where it promises as much, else
/// tested on the address.
template <int Bytes, class It>
CUTE_HOST_DEVICE bool aligned_to(It const& it) {
  if constexpr (promised_alignment_v<It> >= Bytes) {
    return true;
  } else {
    return reinterpret_cast<std::uintptr_t>(cute::raw_pointer_cast(it)) % Bytes == 0;
  }
}

}  // namespace detail
}  // namespace tilefoundry

namespace cute {
// Residency: global or shared memory, as cute::gmem_ptr and cute::smem_ptr are.
template <class T, int Bytes>
struct is_gmem<tilefoundry::aligned_ptr<T, Bytes, tilefoundry::detail::gmem_space>> : true_type {};
template <class T, int Bytes>
struct is_smem<tilefoundry::aligned_ptr<T, Bytes, tilefoundry::detail::smem_space>> : true_type {};
}  // namespace cute

// ops::copy_async on the CUDA target (spec 3.6). The fast path stages a gmem source into an smem
// destination with cp.async: 16-byte cp.async.cg when both views allow 16-byte words (vector.cuh),
// else 8- or 4-byte cp.async.ca. What cannot move in words of 4 bytes or more, any other pair of
// residencies, and every copy below sm_80 (no cp.async there) is a plain synchronous copy, which
// is already complete when cp_async_wait returns.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/cuda/ops/copy.cuh>
#include <tilefoundry/runtime/cuda/ops/vector.cuh>

namespace tilefoundry {
namespace ops {
namespace detail {

template <int Bytes>
__device__ __forceinline__ void cp_async_word(void* smem, void const* gmem) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned int const s = static_cast<unsigned int>(__cvta_generic_to_shared(smem));
  if constexpr (Bytes == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(s), "l"(gmem), "n"(Bytes)
                 : "memory");
  }
#else
  (void)smem;
  (void)gmem;
#endif
}

template <int Bytes, class S, class D>
__device__ __forceinline__ bool cp_async_words(S const& s, D const& d) {
  return with_vectors<Bytes>(s, d, [](auto const& vs, auto const& vd) {
    CUTE_UNROLL
    for (int i = 0; i < int(cute::size(vd)); ++i) {
      cp_async_word<Bytes>(cute::raw_pointer_cast(&vd(i)), cute::raw_pointer_cast(&vs(i)));
    }
  });
}

// The plain path; also what every architecture below sm_80 runs.
template <class S, class D>
__device__ __forceinline__ void copy_async_plain(S const& src, D&& dst) {
  ops::copy(src, dst);
}

}  // namespace detail

/**
 * @brief Async staging copy; fast path stages a gmem source into an smem destination.
 * @param src per-thread projected source operand
 * @param dst per-thread projected destination operand
 */
template <class TSrc, class TDst>
__device__ void copy_async(TSrc const& src, TDst&& dst) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  auto const s = detail::view_of(src);
  auto const d = detail::view_of(dst);
  if constexpr (cute::is_gmem<cute::remove_cvref_t<decltype(s.data())>>::value &&
                cute::is_smem<cute::remove_cvref_t<decltype(d.data())>>::value) {
    if (detail::cp_async_words<16>(s, d)) return;
    if (detail::cp_async_words<8>(s, d)) return;
    if (detail::cp_async_words<4>(s, d)) return;
  }
#endif
  detail::copy_async_plain(src, dst);
}

/// Closes the group of copy_async calls issued so far by this thread.
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

/// Waits until at most N committed groups of this thread are still in flight. Other threads'
/// copies need a barrier (ops::sync) on top, as with any shared-memory write.
template <int N = 0>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

}  // namespace ops
}  // namespace tilefoundry

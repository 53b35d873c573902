// Element types: the type arithmetic runs in, and conversions between storage types.
#pragma once

#include <tilefoundry/runtime/common/config.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace tilefoundry {
namespace detail {

// 16-bit floats are stored narrow and computed in float, as every CUDA kernel does.
template <class T>
struct compute_type {
  using type = T;
};
template <>
struct compute_type<cutlass::half_t> {
  using type = float;
};
template <>
struct compute_type<cutlass::bfloat16_t> {
  using type = float;
};
template <>
struct compute_type<__half> {
  using type = float;
};
template <>
struct compute_type<__nv_bfloat16> {
  using type = float;
};
// CuTe stores bool register tensors bit-packed; their elements read as subbyte references, which
// compute as the type they refer to.
template <class T>
struct compute_type<cute::subbyte_reference<T>> : compute_type<cute::remove_cv_t<T>> {};
template <class T>
using compute_t = typename compute_type<cute::remove_cvref_t<T>>::type;

// Scalar conversions, not views, hence TILEFOUNDRY_HOST_DEVICE rather than CUTE_HOST_DEVICE
// (config.h): convert also runs on the host under tilefoundry::copy.
template <class D, class S>
TILEFOUNDRY_HOST_DEVICE constexpr D convert(S const& s) {
  if constexpr (std::is_same_v<D, S>) {
    return s;
  } else {
    return static_cast<D>(static_cast<compute_t<S>>(s));
  }
}

/// Position `i`, read on the device, clamped into [0, n): generated code indexes a table (an
/// embedding's rows, rotary rows, a cache) through it, so that a position outside the table never
/// reaches memory outside it (the evaluator refuses such a position; the CPU entry checks them).
TILEFOUNDRY_HOST_DEVICE constexpr int64_t index_in(int64_t i, int64_t n) {
  return i < 0 ? 0 : (i >= n ? n - 1 : i);
}

template <class T>
TILEFOUNDRY_HOST_DEVICE constexpr compute_t<T> to_compute(T const& x) {
  return static_cast<compute_t<T>>(x);
}

template <class Tensor>
using value_t = cute::remove_cvref_t<typename cute::remove_cvref_t<Tensor>::value_type>;

}  // namespace detail
}  // namespace tilefoundry

// Element types: the type arithmetic runs in, and conversions between storage types.
#pragma once

#include <tilefoundry/runtime/common/config.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

namespace tilefoundry {
namespace detail {

/// The 8-bit floats the compiler stores (CUTLASS's e4m3 and e5m2).
template <class T>
constexpr bool fp8_v =
    std::is_same_v<T, cutlass::float_e4m3_t> || std::is_same_v<T, cutlass::float_e5m2_t>;
/// The floats stored narrow and computed in float, as every CUDA kernel does: 16-bit and 8-bit.
template <class T>
constexpr bool narrow_float_v =
    std::is_same_v<T, cutlass::half_t> || std::is_same_v<T, cutlass::bfloat16_t> ||
    std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16> || fp8_v<T>;

template <class T>
struct compute_type {
  using type = std::conditional_t<narrow_float_v<T>, float, T>;
};
// CuTe stores bool register tensors bit-packed; their elements read as subbyte references, which
// compute as the type they refer to.
template <class T>
struct compute_type<cute::subbyte_reference<T>> : compute_type<cute::remove_cv_t<T>> {};
template <class T>
using compute_t = typename compute_type<cute::remove_cvref_t<T>>::type;

/// A float rounded to an 8-bit float D as torch rounds it (`Tensor.to`): to nearest even; NaN to
/// the NaN 0x7f with x's sign; past the largest finite value by half a step or more, e4m3fn (which
/// has no infinity) that NaN and e5m2 an infinity of x's sign. CUTLASS's own conversion saturates
/// there (448, 57344), which the evaluator's torch does not.
template <class D>
TILEFOUNDRY_HOST_DEVICE D fp8_of(float x) {
  constexpr bool e4m3 = std::is_same_v<D, cutlass::float_e4m3_t>;
  constexpr float past = e4m3 ? 464.0f : 61440.0f;  // the tie at 464 rounds down to 448 (even)
  uint32_t bits = 0;
  memcpy(&bits, &x, sizeof bits);
  uint8_t const sign = uint8_t((bits >> 24) & 0x80u);
  float const magnitude = x < 0.0f ? -x : x;
  if (x != x || (e4m3 && magnitude > past)) return D::bitcast(uint8_t(sign | 0x7f));
  if (!e4m3 && magnitude >= past) return D::bitcast(uint8_t(sign | 0x7c));
  return D(x);
}

// Scalar conversions, not views, hence TILEFOUNDRY_HOST_DEVICE rather than CUTE_HOST_DEVICE
// (config.h): convert also runs on the host under tilefoundry::copy.
template <class D, class S>
TILEFOUNDRY_HOST_DEVICE constexpr D convert(S const& s) {
  if constexpr (std::is_same_v<D, S>) {
    return s;
  } else if constexpr (fp8_v<D>) {
    return fp8_of<D>(float(static_cast<compute_t<S>>(s)));
  } else {
    return static_cast<D>(static_cast<compute_t<S>>(s));
  }
}

/// Position `i`, read on the device from argument `param`, into a table of `n` rows (`what`: an
/// embedding's rows, rotary rows, a cache's): generated code indexes the table through it. A
/// position outside [0, n) never reaches memory: the CPU entry refuses it before its kernel runs
/// (host::ArgChecker::positions), and a CUDA kernel, which cannot raise, prints the position and
/// the table and stops (a trap: the launch, or the graph replaying it, fails, as a device-side
/// assert fails torch's embedding), where clamping it would compute with another row in silence.
TILEFOUNDRY_HOST_DEVICE int64_t index_in(int64_t i, int64_t n, char const* param,
                                         char const* what) {
  if (i < 0 || i >= n) {
#if defined(__CUDA_ARCH__)
    printf(
        "tilefoundry: argument %s holds the position %lld, outside the %lld %s it indexes; the "
        "kernel stops (pass positions in [0, %lld))\n",
        param, static_cast<long long>(i), static_cast<long long>(n), what,
        static_cast<long long>(n));
    __trap();
#else
    (void)param;
    (void)what;
#endif
    return i < 0 ? 0 : n - 1;
  }
  return i;
}

/// Whether a row's position `i` (read on the device: a cache row at cur_pos + its index) lies
/// below `n`, where no valid call puts a row at or past `n` (`what` says which rows and why): the
/// CPU entry refuses such a call before its kernel runs (host::ArgChecker::cache_write), and a CUDA
/// kernel prints the row and stops (a trap, as index_in) rather than skipping the row in silence.
TILEFOUNDRY_HOST_DEVICE bool row_within(int64_t i, int64_t n, char const* what) {
  if (i < n) return true;
#if defined(__CUDA_ARCH__)
  printf("tilefoundry: %s (a row at %lld; its last row is %lld); the kernel stops\n", what,
         static_cast<long long>(i), static_cast<long long>(n - 1));
  __trap();
#else
  (void)what;
#endif
  return false;
}

template <class T>
TILEFOUNDRY_HOST_DEVICE constexpr compute_t<T> to_compute(T const& x) {
  return static_cast<compute_t<T>>(x);
}

template <class Tensor>
using value_t = cute::remove_cvref_t<typename cute::remove_cvref_t<Tensor>::value_type>;

/// Whether mode I of Tensor's layout has unit stride known at compile time (the rows an op may read
/// in 16-byte words or hand to a vectorised loop).
template <int I, class Tensor>
constexpr bool unit_stride_v =
    cute::is_constant<1, decltype(cute::stride<I>(
                             std::declval<cute::remove_cvref_t<Tensor> const&>().layout()))>::value;

}  // namespace detail
}  // namespace tilefoundry

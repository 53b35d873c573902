// Scalar math in the compute type, spelled once for device and host compilation.
#pragma once

#include <tilefoundry/runtime/common/config.h>

#include <cmath>
#include <limits>

namespace tilefoundry {
namespace ops {
namespace detail {

TILEFOUNDRY_DEVICE float exp_(float x) { return ::expf(x); }
TILEFOUNDRY_DEVICE double exp_(double x) { return ::exp(x); }
TILEFOUNDRY_DEVICE float log_(float x) { return ::logf(x); }
TILEFOUNDRY_DEVICE double log_(double x) { return ::log(x); }
TILEFOUNDRY_DEVICE float sqrt_(float x) { return ::sqrtf(x); }
TILEFOUNDRY_DEVICE double sqrt_(double x) { return ::sqrt(x); }
TILEFOUNDRY_DEVICE float tanh_(float x) { return ::tanhf(x); }
TILEFOUNDRY_DEVICE double tanh_(double x) { return ::tanh(x); }
TILEFOUNDRY_DEVICE float erf_(float x) { return ::erff(x); }
TILEFOUNDRY_DEVICE double erf_(double x) { return ::erf(x); }
TILEFOUNDRY_DEVICE float pow_(float x, float y) { return ::powf(x, y); }
TILEFOUNDRY_DEVICE double pow_(double x, double y) { return ::pow(x, y); }
#if defined(__CUDA_ARCH__)
TILEFOUNDRY_DEVICE float rsqrt_(float x) { return ::rsqrtf(x); }
TILEFOUNDRY_DEVICE double rsqrt_(double x) { return ::rsqrt(x); }
#else
TILEFOUNDRY_DEVICE float rsqrt_(float x) { return 1.0f / ::sqrtf(x); }
TILEFOUNDRY_DEVICE double rsqrt_(double x) { return 1.0 / ::sqrt(x); }
#endif

// 1 / x for x >= 1 (or +inf, or NaN): a logistic's denominator. On the device one reciprocal
// instruction (__fdividef: within 2 ulp there, 0 for x > 2^126 where 1 / x is below 1.2e-38) in
// place of an IEEE division, whose range checks and out-of-line slow path cost ten times more
// per element; elsewhere the division.
#if defined(__CUDA_ARCH__)
TILEFOUNDRY_DEVICE float rcp_at_least_one_(float x) { return ::__fdividef(1.0f, x); }
#else
TILEFOUNDRY_DEVICE float rcp_at_least_one_(float x) { return 1.0f / x; }
#endif
TILEFOUNDRY_DEVICE double rcp_at_least_one_(double x) { return 1.0 / x; }

// NaN wins, as in torch.maximum / torch.amax: a when a is NaN, else b when b is NaN or wins. One
// selection, not a branch per test (the device compiler keeps early returns as branches).
template <class T>
TILEFOUNDRY_DEVICE T nan_max(T a, T b) {
  return (a == a && (b != b || a < b)) ? b : a;
}
template <class T>
TILEFOUNDRY_DEVICE T nan_min(T a, T b) {
  return (a == a && (b != b || b < a)) ? b : a;
}

// Evaluated at class scope, so device code reads them as the constants they are.
template <class T>
struct extreme {
  static constexpr T high = std::numeric_limits<T>::has_infinity
                                ? std::numeric_limits<T>::infinity()
                                : std::numeric_limits<T>::max();
  static constexpr T low = std::numeric_limits<T>::has_infinity
                               ? -std::numeric_limits<T>::infinity()
                               : std::numeric_limits<T>::lowest();
};

template <class T>
TILEFOUNDRY_DEVICE T highest() {
  return extreme<T>::high;
}
template <class T>
TILEFOUNDRY_DEVICE T lowest() {
  return extreme<T>::low;
}

template <class T>
constexpr bool is_float_compute_v = std::is_floating_point_v<T>;

}  // namespace detail
}  // namespace ops
}  // namespace tilefoundry

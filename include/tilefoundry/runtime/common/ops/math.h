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
// instruction (rcp.approx.ftz: within 1 ulp there, 0 for x > 2^126 where 1 / x is below 1.2e-38)
// in place of an IEEE division, whose range checks and out-of-line slow path cost ten times more
// per element; no denormal can reach it, so flushing them costs nothing. Elsewhere the division.
#if defined(__CUDA_ARCH__)
TILEFOUNDRY_DEVICE float rcp_at_least_one_(float x) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
#else
TILEFOUNDRY_DEVICE float rcp_at_least_one_(float x) { return 1.0f / x; }
#endif
TILEFOUNDRY_DEVICE double rcp_at_least_one_(double x) { return 1.0 / x; }

// e^x for a value that is rounded to a 16-bit float before anything else reads it (or feeds only
// such values): on the device the hardware's base-2 exponential of x * log2(e) (two instructions;
// relative error below 2^-21 + |x| * 2^-24, ample under a 16-bit rounding's 2^-9; a result below
// 2^-126 flushed to zero), in place of expf's eight-instruction range reduction. Elsewhere exp_.
#if defined(__CUDA_ARCH__)
TILEFOUNDRY_DEVICE float exp_rounded_(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x * 1.4426950408889634f));
  return r;
}
#else
TILEFOUNDRY_DEVICE float exp_rounded_(float x) { return exp_(x); }
#endif
TILEFOUNDRY_DEVICE double exp_rounded_(double x) { return exp_(x); }

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

// The combine of a max / min reduction: NaN wins, as in nan_max / nan_min, but which of +0 and -0
// wins is left open (a reduction's order decides that anyway, and differs between targets). On
// sm_80 and later that is one instruction (max.NaN: FMNMX.NAN), where nan_max's selection compiles
// to three dependent ones per element; a row's max is a chain of them (softmax's first reduction).
template <class T>
TILEFOUNDRY_DEVICE T fold_max(T a, T b) {
  return nan_max(a, b);
}
template <class T>
TILEFOUNDRY_DEVICE T fold_min(T a, T b) {
  return nan_min(a, b);
}
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
TILEFOUNDRY_DEVICE float fold_max(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
TILEFOUNDRY_DEVICE float fold_min(float a, float b) {
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
#endif

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

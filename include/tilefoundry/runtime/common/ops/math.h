// Scalar math in the compute type, spelled once for device and host compilation.
#pragma once

#include <tilefoundry/runtime/common/config.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace tilefoundry {
namespace ops {
namespace detail {

#if defined(__CUDA_ARCH__)
TILEFOUNDRY_DEVICE float exp_(float x) { return ::expf(x); }
#else
// a * b + c, fused where the instruction set has it (the build's -ffp-contract=off fuses nothing).
TILEFOUNDRY_DEVICE float fma_(float a, float b, float c) {
#if defined(__FMA__)
  return __builtin_fmaf(a, b, c);
#else
  return a * b + c;
#endif
}
// e^x on the host, branch-free so that the compiler vectorises it: expf is a call per element, most
// of the time of a softmax or a SwiGLU on the CPU. Within 0.91 ulp of e^x over the whole range with
// FMA, 0.98 without (checked for every float; torch's vectorised exp is within 1 ulp, glibc's expf
// 0.5), subnormal results included. A softmax's loop of it is bound by the vector instructions it
// issues (four a cycle), so each one fewer counts. x = n ln2 + r with n = rint(x log2 e), read from
// the mantissa of x log2 e + 1.5 * 2^23 (no float-to-int conversion: defined for any x); ln2 in two
// parts (n ln2_hi is exact); e^r = 1 + r (1 + r q(r)) on |r| <= ln2 / 2 (1 + r + r^2 q(r) without
// FMA, where rounding 1 + r q costs accuracy), q of degree 4 fitted to the relative error of e^r
// (3e-9; the Taylor terms to r^7 it replaces left 5e-9 with one instruction more); times 2^n as two
// exact powers of two, 2^(a / 2 - 127) and 2^(a - a / 2 - 127) with a = n + 254, so that results
// down to 2^-149 round as subnormals do. x is raised to -104 first, where e^x rounds to 0 through
// that same arithmetic (NaN passes through); above 88.8 the result is +inf (e^x overflows from
// 88.73 on, through the arithmetic up to 88.8). The two bounds are tested apart, the first on x and
// the second on the result, so that each vectorises as one compare and one select (GCC merges two
// selects of one value into a three-way select of six mask instructions).
TILEFOUNDRY_DEVICE float exp_(float x) {
  float const c = x < -104.0f ? -104.0f : x;  // NaN stays NaN
  float const shifted = fma_(c, 1.44269504088896341f, 12582912.0f);
  float const n = shifted - 12582912.0f;
  std::uint32_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  std::uint32_t const a = bits - (0x4b400000u - 254u);  // n + 254, n = bits - 0x4b400000
  std::uint32_t const lo = (a >> 1) << 23;
  std::uint32_t const hi = (a << 23) - lo;  // (a - a / 2) << 23
  float const r = fma_(n, -1.428606765330187e-06f, fma_(n, -0.693145751953125f, c));
  float q = fma_(r, 1.381459297e-03f, 8.368708193e-03f);
  q = fma_(q, r, 4.166838899e-02f);
  q = fma_(q, r, 1.666652113e-01f);
  q = fma_(q, r, 4.999999404e-01f);
#if defined(__FMA__)
  float const p = fma_(fma_(q, r, 1.0f), r, 1.0f);
#else
  float const p = fma_(q, r * r, r) + 1.0f;
#endif
  float lo_scale, hi_scale;
  std::memcpy(&lo_scale, &lo, sizeof lo_scale);
  std::memcpy(&hi_scale, &hi, sizeof hi_scale);
  float const e = p * lo_scale * hi_scale;
  return x > 88.8f ? std::numeric_limits<float>::infinity() : e;
}
#endif
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
TILEFOUNDRY_DEVICE float exp2_(float x) { return ::exp2f(x); }
TILEFOUNDRY_DEVICE double exp2_(double x) { return ::exp2(x); }
TILEFOUNDRY_DEVICE float log2_(float x) { return ::log2f(x); }
TILEFOUNDRY_DEVICE double log2_(double x) { return ::log2(x); }
TILEFOUNDRY_DEVICE float log1p_(float x) { return ::log1pf(x); }
TILEFOUNDRY_DEVICE double log1p_(double x) { return ::log1p(x); }
TILEFOUNDRY_DEVICE float floor_(float x) { return ::floorf(x); }
TILEFOUNDRY_DEVICE double floor_(double x) { return ::floor(x); }
TILEFOUNDRY_DEVICE float ceil_(float x) { return ::ceilf(x); }
TILEFOUNDRY_DEVICE double ceil_(double x) { return ::ceil(x); }
// The nearest integer, ties to even (the default rounding mode), as torch.round.
TILEFOUNDRY_DEVICE float rint_(float x) { return ::rintf(x); }
TILEFOUNDRY_DEVICE double rint_(double x) { return ::rint(x); }
TILEFOUNDRY_DEVICE float fmod_(float x, float y) { return ::fmodf(x, y); }
TILEFOUNDRY_DEVICE double fmod_(double x, double y) { return ::fmod(x, y); }
TILEFOUNDRY_DEVICE float copysign_(float x, float y) { return ::copysignf(x, y); }
TILEFOUNDRY_DEVICE double copysign_(double x, double y) { return ::copysign(x, y); }
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
// 2^-126 flushed to zero), in place of expf's eight-instruction range reduction.
#if defined(__CUDA_ARCH__)
TILEFOUNDRY_DEVICE float exp_rounded_(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x * 1.4426950408889634f));
  return r;
}
#else
// On the host exp_'s reduction with a degree-5 polynomial (relative error below 2^-18) and one
// power-of-two scale, 2^(n - 1) times 2 p(r): as on the device, a result below 2^-126 is flushed to
// zero (x is raised to -87.3, where that scale is 0); above 88.8 the result is +inf (e^x overflows
// from 88.73 on, through the arithmetic up to 88.8); NaN passes through. The bounds are tested
// apart, as in exp_ (the results are those of clamping x to [-87.3, 88.8], for every float).
TILEFOUNDRY_DEVICE float exp_rounded_(float x) {
  float const c = x < -87.3f ? -87.3f : x;  // NaN stays NaN
  float const shifted = fma_(c, 1.44269504088896341f, 12582912.0f);
  float const n = shifted - 12582912.0f;
  std::uint32_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  std::uint32_t const scale_bits = (bits - 0x4b400000u + 126u) << 23;  // 2^(n + 1)
  float scale;
  std::memcpy(&scale, &scale_bits, sizeof scale);
  float const r = fma_(n, -1.428606765330187e-06f, fma_(n, -0.693145751953125f, c));
  float p = fma_(r, 2.0f / 120, 2.0f / 24);
  p = fma_(p, r, 2.0f / 6);
  p = fma_(p, r, 1.0f);
  p = fma_(p, r, 2.0f);
  p = fma_(p, r, 2.0f);
  float const e = p * scale;
  return x > 88.8f ? std::numeric_limits<float>::infinity() : e;
}
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

// torch.floor_divide and torch.remainder (the remainder takes the divisor's sign). Floats follow
// torch's div_floor_floating: a / b for b == 0 (inf or NaN, as IEEE), else the floor of the exact
// quotient through fmod (which is exact), so that a result is an integer even where a / b rounds
// up to one. Integers: torch raises ZeroDivisionError for a zero divisor, which a kernel cannot, so
// x // 0 and x % 0 are defined as 0 (numpy's convention) and never trap; the lowest value // -1
// wraps to itself (two's complement, as torch gives) instead of trapping, its remainder is 0.
template <class T>
TILEFOUNDRY_DEVICE T floor_divide(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    static_assert(std::is_signed_v<T>, "floor_div_op: signed integers or floating point");
    if (b == T(0)) return T(0);
    if (b == T(-1)) {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(U(0) - static_cast<U>(a)));
    }
    T const q = a / b;
    return (a % b != T(0) && ((a < T(0)) != (b < T(0)))) ? T(q - T(1)) : q;
  } else {
    if (b == T(0)) return a / b;
    T const m = fmod_(a, b);
    T d = (a - m) / b;
    if (m != T(0) && ((b < T(0)) != (m < T(0)))) d -= T(1);
    if (d == T(0)) return copysign_(T(0), a / b);
    T f = floor_(d);
    if (d - f > T(0.5)) f += T(1);
    return f;
  }
}

template <class T>
TILEFOUNDRY_DEVICE T remainder(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    static_assert(std::is_signed_v<T>, "mod_op: signed integers or floating point");
    if (b == T(0) || b == T(-1)) return T(0);
    T const r = a % b;
    return (r != T(0) && ((r < T(0)) != (b < T(0)))) ? T(r + b) : r;
  } else {
    T const r = fmod_(a, b);
    return (r != T(0) && ((r < T(0)) != (b < T(0)))) ? T(r + b) : r;
  }
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

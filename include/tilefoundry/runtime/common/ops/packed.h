// One group of consecutive elements in memory, moved as 16-byte words and converted to and from
// float: float as it is, bf16 and f16 two at a time. On the device the pairs go through the packed
// conversions (__bfloat1622float2 / __floats2bfloat162_rn, __half22float2 / __floats2half2_rn:
// one instruction converts two elements); host code, which the CPU tests run, converts each
// element as the scalar path does. Both round to nearest even, so a result does not depend on
// which path produced it.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/numeric.h>

#include <cstdint>
#include <cstring>

namespace tilefoundry {
namespace ops {
namespace detail {

// Element types a group converts word by word; others take the scalar path.
enum class packed_kind { none, f32, bf16, f16 };

template <class T>
struct packed_type : std::integral_constant<packed_kind, packed_kind::none> {};
template <>
struct packed_type<float> : std::integral_constant<packed_kind, packed_kind::f32> {};
template <>
struct packed_type<cutlass::bfloat16_t> : std::integral_constant<packed_kind, packed_kind::bf16> {};
template <>
struct packed_type<__nv_bfloat16> : std::integral_constant<packed_kind, packed_kind::bf16> {};
template <>
struct packed_type<cutlass::half_t> : std::integral_constant<packed_kind, packed_kind::f16> {};
template <>
struct packed_type<__half> : std::integral_constant<packed_kind, packed_kind::f16> {};

template <class T>
constexpr packed_kind packed_kind_v = packed_type<cute::remove_cvref_t<T>>::value;
template <class T>
constexpr bool is_packed_v = packed_kind_v<T> != packed_kind::none;

struct word4 {
  std::uint32_t u[4];
};

template <class To, class From>
TILEFOUNDRY_DEVICE To bits_as(From const& from) {
  static_assert(sizeof(To) == sizeof(From), "bits_as: sizes differ");
  To to;
  std::memcpy(&to, &from, sizeof(To));
  return to;
}

TILEFOUNDRY_DEVICE word4 load_word(void const* p) {
#if defined(__CUDA_ARCH__)
  uint4 const v = *static_cast<uint4 const*>(p);
  return word4{{v.x, v.y, v.z, v.w}};
#else
  word4 w;
  std::memcpy(&w, p, sizeof(w));
  return w;
#endif
}

/// A word of data streamed once (a weight row a decode step reads once, far more than L2 holds):
/// on CUDA (sm_80 on) not kept in L1, asked of L2 in 256-byte lines, through the non-coherent path
/// (the data must not change while the kernel runs). The asm is volatile so that it stays after
/// the kernel's wait for the kernel before it (wait_for_earlier_kernels, volatile too), which may
/// have written the data. Before sm_80 and on the CPU, load_word.
TILEFOUNDRY_DEVICE word4 load_word_streamed(void const* p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  word4 w;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(w.u[0]), "=r"(w.u[1]), "=r"(w.u[2]), "=r"(w.u[3])
               : "l"(p));
  return w;
#else
  return load_word(p);
#endif
}

// Global: p is in global memory. There the word goes out as one st.global.v4: NVVM may split a
// uint4 assignment into four 4-byte stores where a thread stores a single word.
template <bool Global = false>
TILEFOUNDRY_DEVICE void store_word(void* p, word4 const& w) {
#if defined(__CUDA_ARCH__)
  if constexpr (Global) {
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(w.u[0]), "r"(w.u[1]),
                 "r"(w.u[2]), "r"(w.u[3])
                 : "memory");
  } else {
    *static_cast<uint4*>(p) = make_uint4(w.u[0], w.u[1], w.u[2], w.u[3]);
  }
#else
  std::memcpy(p, &w, sizeof(w));
#endif
}

// Two 16-bit elements of one 32-bit word (the lower-addressed one in the low half) as floats.
template <packed_kind K>
TILEFOUNDRY_DEVICE void unpack_pair(std::uint32_t w, float& lo, float& hi) {
#if defined(__CUDA_ARCH__)
  if constexpr (K == packed_kind::bf16) {
    float2 const f = __bfloat1622float2(bits_as<__nv_bfloat162>(w));
    lo = f.x;
    hi = f.y;
  } else {
    float2 const f = __half22float2(bits_as<__half2>(w));
    lo = f.x;
    hi = f.y;
  }
#else
  using T = std::conditional_t<K == packed_kind::bf16, cutlass::bfloat16_t, cutlass::half_t>;
  lo = float(T::bitcast(static_cast<std::uint16_t>(w & 0xffffu)));
  hi = float(T::bitcast(static_cast<std::uint16_t>(w >> 16)));
#endif
}

#if !defined(__CUDA_ARCH__)
// The bf16 bits of f rounded to nearest, ties to even, every NaN 0x7fff: the bits
// cutlass::bfloat16_t(f) has (checked for all 2^32 floats), without its branches, so that a loop of
// them vectorises.
TILEFOUNDRY_DEVICE std::uint32_t bf16_bits_rn(float f) {
  std::uint32_t const s = bits_as<std::uint32_t>(f);
  std::uint32_t const rounded = (s + 0x7fffu + ((s >> 16) & 1u)) >> 16;
  return (s & 0x7fffffffu) > 0x7f800000u ? 0x7fffu : rounded;
}
#endif

template <packed_kind K>
TILEFOUNDRY_DEVICE std::uint32_t pack_pair(float lo, float hi) {
#if defined(__CUDA_ARCH__)
  if constexpr (K == packed_kind::bf16) {
    return bits_as<std::uint32_t>(__floats2bfloat162_rn(lo, hi));
  } else {
    return bits_as<std::uint32_t>(__floats2half2_rn(lo, hi));
  }
#else
  if constexpr (K == packed_kind::bf16) {
    return bf16_bits_rn(lo) | (bf16_bits_rn(hi) << 16);
  } else {
    return std::uint32_t(cutlass::half_t(lo).raw()) |
           (std::uint32_t(cutlass::half_t(hi).raw()) << 16);
  }
#endif
}

/// at(i) = convert<D>(value(i)) for every i < n, at(i) a D&. Where D is a 16-bit float, value gives
/// floats and n is even, two at a time: one packed conversion, each half rounded as the scalar
/// conversion rounds it (on sm_90 the scalar cvt.rn.bf16.f32 is a quarter-rate instruction).
template <class D, class At, class Value>
TILEFOUNDRY_DEVICE void store_converted(int n, At const& at, Value const& value) {
  constexpr packed_kind K = packed_kind_v<D>;
  if constexpr ((K == packed_kind::bf16 || K == packed_kind::f16) &&
                std::is_same_v<std::invoke_result_t<Value const&, int>, float>) {
    if (n % 2 == 0) {
      CUTE_UNROLL
      for (int i = 0; i < n; i += 2) {
        std::uint32_t const w = pack_pair<K>(value(i), value(i + 1));
        at(i) = bits_as<D>(static_cast<std::uint16_t>(w & 0xffffu));
        at(i + 1) = bits_as<D>(static_cast<std::uint16_t>(w >> 16));
      }
      return;
    }
  }
  CUTE_UNROLL
  for (int i = 0; i < n; ++i) at(i) = convert<D>(value(i));
}

/// The N elements of type T in one 16-byte word (N * sizeof(T) == 16), as floats.
template <class T, int N>
TILEFOUNDRY_DEVICE void unpack_word(word4 const& w, float (&out)[N]) {
  constexpr packed_kind K = packed_kind_v<T>;
  static_assert(K != packed_kind::none && N * sizeof(T) == 16, "not one packed word");
  CUTE_UNROLL
  for (int i = 0; i < 4; ++i) {
    if constexpr (K == packed_kind::f32) {
      out[i] = bits_as<float>(w.u[i]);
    } else {
      unpack_pair<K>(w.u[i], out[2 * i], out[2 * i + 1]);
    }
  }
}

/// The N elements of type T at p (16-byte aligned, N * sizeof(T) a multiple of 16), as floats.
template <class T, int N>
TILEFOUNDRY_DEVICE void load_group(T const* p, float (&out)[N]) {
  constexpr packed_kind K = packed_kind_v<T>;
  static_assert(K != packed_kind::none && (N * sizeof(T)) % 16 == 0, "not a packed group");
  constexpr int per_word = int(16 / sizeof(T));
  CUTE_UNROLL
  for (int k = 0; k < N / per_word; ++k) {
    unpack_word<T>(load_word(p + k * per_word),
                   *reinterpret_cast<float(*)[per_word]>(out + k * per_word));
  }
}

/// Stores N floats as the N elements of type T at p (16-byte aligned, N * sizeof(T) a multiple of
/// 16), rounding to nearest even.
template <bool Global = false, class T, int N>
TILEFOUNDRY_DEVICE void store_group(T* p, float const (&in)[N]) {
  constexpr packed_kind K = packed_kind_v<T>;
  static_assert(K != packed_kind::none && (N * sizeof(T)) % 16 == 0, "not a packed group");
  constexpr int per_word = int(16 / sizeof(T));
  CUTE_UNROLL
  for (int k = 0; k < N / per_word; ++k) {
    word4 w;
    CUTE_UNROLL
    for (int i = 0; i < 4; ++i) {
      if constexpr (K == packed_kind::f32) {
        w.u[i] = bits_as<std::uint32_t>(in[4 * k + i]);
      } else {
        w.u[i] = pack_pair<K>(in[8 * k + 2 * i], in[8 * k + 2 * i + 1]);
      }
    }
    store_word<Global>(p + k * per_word, w);
  }
}

}  // namespace detail
}  // namespace ops
}  // namespace tilefoundry

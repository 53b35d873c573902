// Matmul epilogues that read tensors at the element they make (a residual, a bias). The generated
// code writes one as ops::reading(f, t...): called as epi(m, n, acc...) (every tier), it is
// f(acc..., t(m, n)...); and where a tier makes W consecutive elements of a row at once (the GEMM
// tier's 16-byte words of out, cuda/ops/matmul_gmma.cuh), word<W>(m, n, acc, out) makes elements
// (m, n) .. (m, n + W - 1) with each tensor's W elements read in 16-byte loads where they are
// contiguous along n and aligned, one load where an epilogue read element by element made W.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/numeric.h>
#include <tilefoundry/runtime/common/ops/packed.h>

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

namespace tilefoundry {
namespace ops {

/// W consecutive elements of a row of a tensor.
template <class E, int W>
struct row_values {
  E v[W];
};

/// t(m, n), t(m, n + 1), ... t(m, n + W - 1): in 16-byte loads where the row is contiguous there
/// and its start 16-byte aligned, else one element at a time.
template <int W, class Tensor>
TILEFOUNDRY_DEVICE auto read_row(Tensor const& t, int64_t m, int64_t n) {
  using E = cute::remove_cvref_t<decltype(t(0, 0))>;
  row_values<E, W> r;
  constexpr int kBytes = W * int(sizeof(E));
  if constexpr (kBytes % 16 == 0 && std::is_trivially_copyable_v<E>) {
    auto const* const p = reinterpret_cast<unsigned char const*>(&t(m, n));
    if (int64_t(cute::stride<1>(t)) == 1 && (reinterpret_cast<uintptr_t>(p) & 15) == 0) {
      for (int w = 0; w < kBytes / 16; ++w) {
        detail::word4 const x = detail::load_word(p + 16 * w);
        std::memcpy(reinterpret_cast<unsigned char*>(r.v) + 16 * w, &x, 16);
      }
      return r;
    }
  }
  for (int e = 0; e < W; ++e) r.v[e] = t(m, n + e);
  return r;
}

/// An epilogue f of the sums (one, or a pair's two) and of the tensors' elements at (m, n).
template <class F, class... Reads>
struct reading {
  F f;
  cute::tuple<Reads...> reads;

  /// f(acc..., t(m, n)...) for the element (m, n).
  template <class... Acc>
  TILEFOUNDRY_DEVICE auto operator()(int64_t m, int64_t n, Acc... acc) const
      -> decltype(std::declval<F const&>()(acc..., std::declval<Reads const&>()(m, n)...)) {
    return at(m, n, std::index_sequence_for<Reads...>{}, acc...);
  }

  /// out[e] = f(acc[e], t(m, n + e)...) rounded into T, for e < W (a single product's sums).
  template <int W, class T>
  TILEFOUNDRY_DEVICE void word(int64_t m, int64_t n, float const (&acc)[W], T (&out)[W]) const {
    words(m, n, out, std::index_sequence_for<Reads...>{}, acc);
  }

  /// out[e] = f(acc[e], second[e], t(m, n + e)...) rounded into T, for e < W (a pair's two sums:
  /// silu(gate) * up, read at the GEMM tier's words).
  template <int W, class T>
  TILEFOUNDRY_DEVICE void word(int64_t m, int64_t n, float const (&acc)[W],
                               float const (&second)[W], T (&out)[W]) const {
    words(m, n, out, std::index_sequence_for<Reads...>{}, acc, second);
  }

 private:
  template <std::size_t... I, class... Acc>
  TILEFOUNDRY_DEVICE auto at(int64_t m, int64_t n, std::index_sequence<I...>, Acc... acc) const {
    return f(acc..., cute::get<I>(reads)(m, n)...);
  }

  /// out[e] = f(sums[e]..., t(m, n + e)...) rounded into T (each of `sums` W floats).
  template <int W, class T, std::size_t... I, class... Sums>
  TILEFOUNDRY_DEVICE void words(int64_t m, int64_t n, T (&out)[W], std::index_sequence<I...>,
                                Sums const&... sums) const {
    auto const rows = cute::make_tuple(read_row<W>(cute::get<I>(reads), m, n)...);
    for (int e = 0; e < W; ++e)
      out[e] = ::tilefoundry::detail::convert<T>(f(sums[e]..., cute::get<I>(rows).v[e]...));
  }
};

/// The epilogue f of the sums and of the tensors' elements at each (m, n) (reading).
template <class F, class... Reads>
TILEFOUNDRY_DEVICE reading<F, Reads...> reads_at(F f, Reads const&... t) {
  return reading<F, Reads...>{f, cute::make_tuple(t...)};
}

/// Whether Epi is a reading epilogue (it makes words: reading::word).
template <class Epi>
struct is_reading : std::false_type {};
template <class F, class... Reads>
struct is_reading<reading<F, Reads...>> : std::true_type {};
template <class Epi>
constexpr bool is_reading_v = is_reading<cute::remove_cvref_t<Epi>>::value;

}  // namespace ops
}  // namespace tilefoundry

// Matmul prologues: how ops::matmul reads its first operand. The plain one reads it as stored; a
// norm's reads rms_norm(x, g, eps) of each of its rows, computed as each element is read, so the
// normed rows never go to memory (the RMSNorm before a projection, fused into it).
#pragma once

#include <tilefoundry/runtime/common/aligned_ptr.h>
#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/numeric.h>
#include <tilefoundry/runtime/common/ops/binary_ops.h>
#include <tilefoundry/runtime/common/ops/math.h>
#include <tilefoundry/runtime/common/ops/packed.h>
#include <tilefoundry/runtime/common/ops/scalar.h>

#include <cstdint>
#include <utility>

namespace tilefoundry {
namespace ops {

/// The first operand of a matmul read as it is stored.
struct plain_rows {
  static constexpr bool normalizes = false;
  using compute_type = float;
};

/// The first operand of a matmul read as rms_norm(x, g, eps) of each of its rows (x the operand,
/// g the norm's weight of K elements), each element as the unfused ops compute it: in Cd, x times
/// 1 / sqrt(mean(x^2) + eps) of its row, rounded to g's type, times g(k) in g's type, rounded to
/// H (the normed rows' type).
template <class Cd, class H, class G>
struct rms_norm_rows {
  static constexpr bool normalizes = true;
  using compute_type = Cd;
  using W = cute::remove_cvref_t<decltype(std::declval<G const&>()(0))>;

  G g;
  Cd eps;

  /// x(k)^2 in Cd: one term of the row's sum of squares.
  template <class X>
  TILEFOUNDRY_DEVICE Cd square(X const& x) const {
    Cd const v = detail::convert<Cd>(x);
    return v * v;
  }

  /// The row's scale, 1 / sqrt(mean + eps), from the sum of its `depth` squares.
  TILEFOUNDRY_DEVICE Cd scale(Cd sum_of_squares, int64_t depth) const {
    return detail::rsqrt_(sum_of_squares / static_cast<Cd>(depth) + eps);
  }

  /// Element k of the normed row, given the row's scale.
  template <class X>
  TILEFOUNDRY_DEVICE H operator()(X const& x, Cd scale, int64_t k) const {
    W const rounded = detail::convert<W>(detail::convert<Cd>(x) * scale);
    return detail::convert<H>(scalar::binary<W>(mul_op{}, rounded, g(k)));
  }

  /// True when g can be read 16 bytes at a time at every group's start: contiguous, its base
  /// aligned, and a group of g's elements a whole number of 16-byte words (see group()).
  template <int N>
  TILEFOUNDRY_DEVICE bool groups_aligned() const {
    if constexpr (detail::is_packed_v<W> && (N * sizeof(W)) % 16 == 0 &&
                  cute::is_constant<1, decltype(cute::stride<0>(
                                           std::declval<G const&>().layout()))>::value) {
      // known from the type where g's iterator promises it (generated code's aligned rows)
      return detail::aligned_to<16>(g.data());
    } else {
      return false;
    }
  }

  /// g's elements k .. k + N - 1, as floats, for group(): one 16-byte load per word where
  /// `aligned` (groups_aligned<N>(), k a multiple of N); nothing where not (group() then reads
  /// them one at a time). A caller may issue it with its other loads, before the row's scale is
  /// known, so that the weights do not make a round trip of their own after it.
  template <int N>
  TILEFOUNDRY_DEVICE void weights(float (&gs)[N], int64_t k, bool aligned) const {
    if constexpr (detail::is_packed_v<W> && (N * sizeof(W)) % 16 == 0) {
      if (aligned) detail::load_group(&g(k), gs);
    }
  }

  /// Elements k .. k + N - 1 of the normed row, in place of xs (the row's elements, as floats, each
  /// computed as operator() computes it), g's elements taken from gs (weights()) where `aligned`
  /// and read one at a time otherwise.
  template <int N>
  TILEFOUNDRY_DEVICE void group(float (&xs)[N], float const (&gs)[N], Cd scale, int64_t k,
                                bool aligned) const {
    CUTE_UNROLL
    for (int i = 0; i < N; ++i) {
      W const gk = aligned ? detail::convert<W>(gs[i]) : W(g(k + i));
      W const rounded = detail::convert<W>(detail::convert<Cd>(xs[i]) * scale);
      xs[i] = detail::convert<float>(detail::convert<H>(scalar::binary<W>(mul_op{}, rounded, gk)));
    }
  }

  /// ... g's elements read here.
  template <int N>
  TILEFOUNDRY_DEVICE void group(float (&xs)[N], Cd scale, int64_t k, bool aligned) const {
    float gs[N] = {};
    weights(gs, k, aligned);
    group(xs, gs, scale, k, aligned);
  }
};

/// rms_norm(x, g, eps) of the matmul's first operand's rows (H: the normed rows' element type).
template <class Cd, class H, class G>
TILEFOUNDRY_DEVICE rms_norm_rows<Cd, H, G> rms_norm_prologue(G const& g, Cd eps) {
  return rms_norm_rows<Cd, H, G>{g, eps};
}

}  // namespace ops
}  // namespace tilefoundry

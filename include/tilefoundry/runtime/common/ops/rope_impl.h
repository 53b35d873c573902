// rope_impl::apply: the body of ops::rope, one row of head_dim elements rotated by its position's
// cos / sin rows. Both targets' entries run it, so that the two cannot drift apart in rounding.
//
// Rotate-half, as the evaluator computes it in Compute: out = x * cos + rotate_half(x) * sin, where
// rotate_half(x) is (-x[half:], x[:half]). The CTA's threads share the row's pairs (j, j + half),
// each pair read once and both its results written by one thread.
//
// The row is read through a prologue (matmul_prologue.h): as stored (plain_rows), or as the
// rms_norm of the row (rms_norm_rows: Qwen3's q/k norm before the rotation), each element normed
// and rounded as the unfused ops round it, the row's scale from the sum of its squares that the
// CTA's threads add up together (sum_over_row), so the normed row never goes to memory.
#pragma once

#include <tilefoundry/runtime/common/aligned_ptr.h>
#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/numeric.h>
#include <tilefoundry/runtime/common/ops/matmul_prologue.h>
#include <tilefoundry/runtime/common/ops/packed.h>
#include <tilefoundry/runtime/common/topology.h>

#include <cstdint>
#include <type_traits>
#include <utility>

namespace tilefoundry {
namespace ops {
namespace rope_impl {

/// The sum of `part` (this thread's share of a row) over the CTA's `threads` threads, in every
/// thread; `whole()` the sum of the whole row, each thread adding all of it itself where the
/// threads cannot exchange partials through registers (more than a warp, or not a power of two).
/// On CUDA a butterfly of shuffles among the CTA's lanes: every lane ends with the same sum (each
/// step adds the same two values in either order).
template <class T, class Whole>
TILEFOUNDRY_DEVICE T sum_over_row(T part, int64_t threads, Whole const& whole) {
  if (threads == 1) return part;
#if defined(__CUDA_ARCH__)
  if (threads <= 32 && (threads & (threads - 1)) == 0) {
    unsigned const lanes = threads == 32 ? 0xffffffffu : (1u << threads) - 1u;
    CUTE_UNROLL
    for (int mask = 16; mask > 0; mask /= 2) {  // unrolled: no loop between the loads and the sum
      if (mask < threads) part += __shfl_xor_sync(lanes, part, mask);
    }
    return part;
  }
#endif
  return whole();
}

/// Whether `Out` is a view of global memory: its words then go out as one 16-byte store each.
template <class Out>
constexpr bool in_gmem =
    cute::is_gmem<cute::remove_cvref_t<decltype(std::declval<Out&>().data())>>::value;

/// Whether rows of these operands can be read and written in 16-byte words: one packed element
/// type (bf16, f16, f32), each a row of unit stride known at compile time, computed in float.
template <class Compute, class X, class C, class S, class Out>
constexpr bool words_v = std::is_same_v<Compute, float>&& detail::is_packed_v<detail::value_t<X>>&&
    std::is_same_v<detail::value_t<X>, detail::value_t<C>>&&
        std::is_same_v<detail::value_t<X>, detail::value_t<S>>&&
            std::is_same_v<detail::value_t<X>, detail::value_t<Out>>&& detail::unit_stride_v<0, X>&&
                detail::unit_stride_v<0, C>&& detail::unit_stride_v<0, S>&&
                    detail::unit_stride_v<0, Out>;

/// A thread's words of one group of a row (elements j .. j + V - 1 and j + half ..), as floats.
template <int V>
struct word_group {
  float x1[V], x2[V], c1[V], c2[V], s1[V], s2[V], g1[V], g2[V];  // g: a norm's weights
};

/// apply() a 16-byte word at a time: a thread takes the words of V elements from j and from
/// j + half (x, cos, sin, and a norm's weights: issued together), so each pair's two elements are
/// its own and no element crosses threads. Each element computed and rounded as apply()'s scalar
/// loop does.
template <class Compute, class X, class C, class S, class Out, class Pro>
TILEFOUNDRY_DEVICE void apply_words(X const& x, C const& cos, S const& sin, Out&& out,
                                    Pro const& pro, int64_t half, int64_t threads, int64_t first) {
  using E = detail::value_t<X>;
  constexpr int V = int(16 / sizeof(E));
  using Cd = typename Pro::compute_type;
  int64_t const groups = half / V;
  auto const word = [](auto const& t, int64_t j) { return detail::load_word(&t(j)); };
  [[maybe_unused]] bool g_aligned = false;
  if constexpr (Pro::normalizes) g_aligned = pro.template groups_aligned<V>();
  auto const load = [&](int64_t g, word_group<V>& w) {
    int64_t const j = g * V;
    detail::unpack_word<E>(word(x, j), w.x1);
    detail::unpack_word<E>(word(x, j + half), w.x2);
    detail::unpack_word<E>(word(cos, j), w.c1);
    detail::unpack_word<E>(word(cos, j + half), w.c2);
    detail::unpack_word<E>(word(sin, j), w.s1);
    detail::unpack_word<E>(word(sin, j + half), w.s2);
    if constexpr (Pro::normalizes) {  // the norm's weights with them: no round trip after the sum
      pro.weights(w.g1, j, g_aligned);
      pro.weights(w.g2, j + half, g_aligned);
    }
  };
  auto const rotate = [&](int64_t g, word_group<V>& w, [[maybe_unused]] Cd scale) {
    int64_t const j = g * V;
    if constexpr (Pro::normalizes) {
      pro.group(w.x1, w.g1, scale, j, g_aligned);
      pro.group(w.x2, w.g2, scale, j + half, g_aligned);
    }
    float o1[V], o2[V];
    CUTE_UNROLL
    for (int i = 0; i < V; ++i) {
      float const f1 = w.x1[i] * w.c1[i];
      float const f2 = w.x2[i] * w.c2[i];
      o1[i] = f1 - w.x2[i] * w.s1[i];
      o2[i] = f2 + w.x1[i] * w.s2[i];
    }
    detail::store_group<in_gmem<Out>>(&out(j), o1);
    detail::store_group<in_gmem<Out>>(&out(j + half), o2);
  };
  // The thread's first group read up front, before the row's sum of squares, so that the loads of
  // cos and sin overlap those of x and the norm's shuffles instead of following them (a head of 128
  // bf16 elements has 8 groups: one a thread, and no other read).
  word_group<V> w{};
  bool const mine = first < groups;
  if (mine) load(first, w);
  Cd scale = 0;
  if constexpr (Pro::normalizes) {  // the row's scale, from the sum of its squares
    auto const squares = [&](float const(&a)[V], float const(&b)[V]) {
      Cd sum = 0;
      CUTE_UNROLL
      for (int i = 0; i < V; ++i) sum += pro.square(a[i]) + pro.square(b[i]);
      return sum;
    };
    auto const squares_at = [&](int64_t g) {
      float a[V], b[V];
      detail::unpack_word<E>(word(x, g * V), a);
      detail::unpack_word<E>(word(x, half + g * V), b);
      return squares(a, b);
    };
    Cd part = mine ? squares(w.x1, w.x2) : Cd(0);
    for (int64_t g = first + threads; g < groups; g += threads) part += squares_at(g);
    Cd const sum = sum_over_row(part, threads, [&] {
      Cd all = 0;
      for (int64_t g = 0; g < groups; ++g) all += squares_at(g);
      return all;
    });
    scale = pro.scale(sum, 2 * half);
  }
  for (int64_t g = first; g < groups; g += threads) {
    if (g != first) load(g, w);
    rotate(g, w, scale);
  }
}

/// apply() a 16-byte word a thread where the row's threads are at least its words (a CUDA CTA of
/// 16 threads over a head of 128 bf16 elements): thread t takes word t of the row and reads its
/// rotate-half partner's word too (x at t's elements and their partners', cos and sin at t's: four
/// loads, issued together), so no thread idles and each computes and stores one word instead of
/// two. Each element computed and rounded as apply_words does; the norm's sum of squares adds each
/// thread's own word, then the threads' sums (sum_over_row).
template <class Compute, class X, class C, class S, class Out, class Pro>
TILEFOUNDRY_DEVICE void apply_word_each(X const& x, C const& cos, S const& sin, Out&& out,
                                        Pro const& pro, int64_t half, int64_t threads,
                                        int64_t first) {
  using E = detail::value_t<X>;
  constexpr int V = int(16 / sizeof(E));
  using Cd = typename Pro::compute_type;
  int64_t const words = 2 * half / V;
  bool const mine = first < words;
  int64_t const j = mine ? first * V : 0;       // this thread's elements j .. j + V - 1
  bool const low = j < half;                    // in the first half: its partners follow it
  int64_t const p = low ? j + half : j - half;  // the partners' elements
  auto const word = [](auto const& t, int64_t at) { return detail::load_word(&t(at)); };
  float xs[V], xp[V], cs[V], ss[V], gs[V], gp[V];  // gs, gp: a norm's weights at j and at p
  CUTE_UNROLL
  for (int i = 0; i < V; ++i) xs[i] = xp[i] = cs[i] = ss[i] = gs[i] = gp[i] = 0.0f;
  [[maybe_unused]] bool g_aligned = false;
  if constexpr (Pro::normalizes) g_aligned = pro.template groups_aligned<V>();
  if (mine) {
    detail::unpack_word<E>(word(x, j), xs);
    detail::unpack_word<E>(word(x, p), xp);
    detail::unpack_word<E>(word(cos, j), cs);
    detail::unpack_word<E>(word(sin, j), ss);
    if constexpr (Pro::normalizes) {  // issued with the others: no round trip after the row's sum
      pro.weights(gs, j, g_aligned);
      pro.weights(gp, p, g_aligned);
    }
  }
  if constexpr (Pro::normalizes) {  // the row's scale, from the sum of its squares
    Cd part = 0;
    CUTE_UNROLL
    for (int i = 0; i < V; ++i) part += pro.square(xs[i]);
    Cd const sum = sum_over_row(part, threads, [&] {
      Cd all = 0;
      for (int64_t w = 0; w < words; ++w) {
        float a[V];
        detail::unpack_word<E>(word(x, w * V), a);
        CUTE_UNROLL
        for (int i = 0; i < V; ++i) all += pro.square(a[i]);
      }
      return all;
    });
    Cd const scale = pro.scale(sum, 2 * half);
    pro.group(xs, gs, scale, j, g_aligned);
    pro.group(xp, gp, scale, p, g_aligned);
  }
  if (!mine) return;
  float o[V];
  CUTE_UNROLL
  for (int i = 0; i < V; ++i) {
    float const f = xs[i] * cs[i];
    o[i] = low ? f - xp[i] * ss[i] : f + xp[i] * ss[i];
  }
  detail::store_group<in_gmem<Out>>(&out(j), o);
}

/// out(j) = x(j) * cos(j) - x(j + half) * sin(j) and out(j + half) = x(j + half) * cos(j + half)
/// + x(j) * sin(j + half) for j < half = size(x) / 2, in Compute, rounded once into out's type;
/// x's elements read through `pro` (plain_rows: as stored; rms_norm_rows: its row normed). Rows
/// of 16-byte words (words_v, each half a whole number of words, every row 16-byte aligned) go
/// through apply_words; any other row an element at a time.
template <class Compute, class X, class C, class S, class Out, class Pro = plain_rows>
TILEFOUNDRY_DEVICE void apply(X const& x, C const& cos, S const& sin, Out&& out,
                              Pro const& pro = {}) {
  using T = cute::remove_cvref_t<decltype(out(0))>;
  int64_t const half = int64_t(cute::size(x)) / 2;
  int64_t const threads =
      int64_t(program_dim<detail::dependent_level<TopologyScope::thread, Out>>());
  int64_t const first = int64_t(program_id<detail::dependent_level<TopologyScope::thread, Out>>());
  if constexpr (words_v<Compute, X, C, S, Out>) {
    constexpr int64_t V = int64_t(16 / sizeof(detail::value_t<X>));
    // known from the iterators' types where generated code promises it (lower/rope.py's vector
    // width): the element-by-element path below then is dead code, and the compiler drops it
    auto const at16 = [](auto const& t) { return detail::aligned_to<16>(t.data()); };
    if (half % V == 0 && at16(x) && at16(cos) && at16(sin) && at16(out)) {
      if (threads >= 2 * half / V) {
        apply_word_each<Compute>(x, cos, sin, out, pro, half, threads, first);
      } else {
        apply_words<Compute>(x, cos, sin, out, pro, half, threads, first);
      }
      return;
    }
  }
  [[maybe_unused]] typename Pro::compute_type scale = 0;
  if constexpr (Pro::normalizes) {  // the row's scale, from the sum of its squares
    using Cd = typename Pro::compute_type;
    Cd part = 0;
    for (int64_t j = first; j < half; j += threads)
      part += pro.square(x(j)) + pro.square(x(j + half));
    Cd const sum = sum_over_row(part, threads, [&] {
      Cd all = 0;
      for (int64_t j = 0; j < half; ++j) all += pro.square(x(j)) + pro.square(x(j + half));
      return all;
    });
    scale = pro.scale(sum, 2 * half);
  }
  auto const read = [&](int64_t j) {
    if constexpr (Pro::normalizes) {
      return detail::convert<Compute>(pro(x(j), scale, j));
    } else {
      return detail::convert<Compute>(x(j));
    }
  };
  for (int64_t j = first; j < half; j += threads) {
    Compute const x1 = read(j);
    Compute const x2 = read(j + half);
    Compute const first = x1 * detail::convert<Compute>(cos(j));
    Compute const second = x2 * detail::convert<Compute>(cos(j + half));
    out(j) = detail::convert<T>(first - x2 * detail::convert<Compute>(sin(j)));
    out(j + half) = detail::convert<T>(second + x1 * detail::convert<Compute>(sin(j + half)));
  }
}

}  // namespace rope_impl
}  // namespace ops
}  // namespace tilefoundry

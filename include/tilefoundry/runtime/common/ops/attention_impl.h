// attention_impl: the bodies of ops::attention and ops::attention_combine, softmax(q k^T) v over
// one CTA's slice of the keys, then the slices merged. Both targets' entries run them (the CUDA
// entry has a faster tier of its own for 16-byte rows, cuda/ops/attention.cuh).
//
// Scores are computed as the evaluator computes the unfused ops: each dot product accumulated in
// float and rounded to the scores' element type T (q's), then times (or divided by) the scale,
// rounded to T again, then read as float; keys a query may not see (the visibility test on their
// positions) score -inf. The softmax is online: a running maximum, the sum of exponentials below
// it and the weighted sum of value rows, rescaled when the maximum grows. A slice's state is
// written to `part` (G x M x (Dv + 2) floats: the weighted sum, then the maximum and the sum), and
// attention_combine merges the slices' states into the output. A row that sees no key gets
// 0 / 0 = NaN, as softmax over nothing but -inf does.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/numeric.h>
#include <tilefoundry/runtime/common/ops/binary_ops.h>
#include <tilefoundry/runtime/common/ops/math.h>
#include <tilefoundry/runtime/common/topology.h>

#include <cstdint>
#include <type_traits>

namespace tilefoundry {
namespace ops {

/// How a dot product becomes a score: rounded to T, times `value` (rounded to T), rounded to T.
template <class C>
struct scores_times {
  C value;
};
/// ... divided by `value` instead.
template <class C>
struct scores_over {
  C value;
};
/// ... rounded to T and nothing more (no scale).
struct scores_as_is {};

/// Every key is visible to every query (no mask).
struct visible_all {};

namespace attention_impl {

template <class T, class C>
TILEFOUNDRY_DEVICE float score(scores_times<C> s, float dot) {
  float const rounded = detail::convert<float>(detail::convert<T>(dot));
  return detail::convert<float>(
      detail::convert<T>(rounded * detail::convert<float>(detail::convert<T>(s.value))));
}
template <class T, class C>
TILEFOUNDRY_DEVICE float score(scores_over<C> s, float dot) {
  float const rounded = detail::convert<float>(detail::convert<T>(dot));
  return detail::convert<float>(
      detail::convert<T>(rounded / detail::convert<float>(detail::convert<T>(s.value))));
}
template <class T>
TILEFOUNDRY_DEVICE float score(scores_as_is, float dot) {
  return detail::convert<float>(detail::convert<T>(dot));
}

/// Key n visible to query row m: cmp(kpos(n), qpos(m)), or always. A tier reads a key's position
/// (key) with its key and value rows and a query's (query) once, then tests the two (test); it
/// scans the first keys(N) of its N keys only (the others are visible to no query row), or
/// keys_of(N, first, end) for the queries [first, end).
template <class Cmp, class QPos, class KPos>
struct visible_where {
  Cmp cmp;
  QPos qpos;
  KPos kpos;
  using position_t = cute::remove_cvref_t<decltype(kpos(0))>;
  TILEFOUNDRY_DEVICE position_t key(int64_t n) const { return kpos(n); }
  TILEFOUNDRY_DEVICE position_t query(int64_t m) const { return qpos(m); }
  TILEFOUNDRY_DEVICE bool test(position_t k, position_t q) const { return bool(cmp(k, q)); }
  TILEFOUNDRY_DEVICE bool operator()(int64_t m, int64_t n) const { return test(key(n), query(m)); }
  TILEFOUNDRY_DEVICE int64_t keys(int64_t n) const { return n; }
  TILEFOUNDRY_DEVICE int64_t keys_of(int64_t n, int64_t, int64_t) const { return n; }
  /// Whether every key of [first, last] is visible to a query at `pos` without testing each: never
  /// known here (the keys' positions are read one by one).
  TILEFOUNDRY_DEVICE bool all(int64_t, int64_t, position_t) const { return false; }
};
struct visible_always {
  using position_t = int;
  TILEFOUNDRY_DEVICE int key(int64_t) const { return 0; }
  TILEFOUNDRY_DEVICE int query(int64_t) const { return 0; }
  TILEFOUNDRY_DEVICE bool test(int, int) const { return true; }
  TILEFOUNDRY_DEVICE bool operator()(int64_t, int64_t) const { return true; }
  TILEFOUNDRY_DEVICE int64_t keys(int64_t n) const { return n; }
  TILEFOUNDRY_DEVICE int64_t keys_of(int64_t n, int64_t, int64_t) const { return n; }
  TILEFOUNDRY_DEVICE bool all(int64_t, int64_t, int) const { return true; }
};

/// e^x as the hardware's base-2 exponential of x log2(e) (2 ulp, and the product's rounding): the
/// CUDA tiers' softmax's weights, whose sum divides them. Against expf the grouped tier took 13.55
/// -> 13.31 us at context 1024 and 22.1 -> 21.0 us at 4096 (H200, Qwen3-1.7B's 16/8 heads x 128).
TILEFOUNDRY_DEVICE float softmax_exp(float x) { return detail::exp2_(x * 1.4426950408889634f); }

/// The head_dim D of q (G x M x D), keys k (D x N) and values v (N x Dv) where a CUDA tier can read
/// their rows whole: one element type, D and Dv static and equal, each row's elements contiguous;
/// else 0.
template <class Q, class K, class V>
TILEFOUNDRY_HOST_DEVICE constexpr int contiguous_head_dim() {
  using E = cute::remove_cvref_t<decltype(std::declval<Q const&>()(0, 0, 0))>;
  using QL = decltype(std::declval<Q const&>().layout());
  using KL = decltype(std::declval<K const&>().layout());
  using VL = decltype(std::declval<V const&>().layout());
  if constexpr (!std::is_same_v<E,
                                cute::remove_cvref_t<decltype(std::declval<K const&>()(0, 0))>> ||
                !std::is_same_v<E,
                                cute::remove_cvref_t<decltype(std::declval<V const&>()(0, 0))>>) {
    return 0;
  } else if constexpr (!cute::is_static<decltype(cute::shape<2>(std::declval<QL>()))>::value ||
                       !cute::is_static<decltype(cute::shape<1>(std::declval<VL>()))>::value) {
    return 0;
  } else {
    constexpr int D = int(decltype(cute::shape<2>(std::declval<QL>()))::value);
    constexpr int DV = int(decltype(cute::shape<1>(std::declval<VL>()))::value);
    constexpr bool rows =
        cute::is_constant<1, decltype(cute::stride<2>(std::declval<QL>()))>::value &&
        cute::is_constant<1, decltype(cute::stride<0>(std::declval<KL>()))>::value &&
        cute::is_constant<1, decltype(cute::stride<1>(std::declval<VL>()))>::value;
    return D == DV && rows ? D : 0;
  }
}

/// The type of a key's index in keys k (D x N): int where N's extent is held in an int or is a
/// static int (the compiler's views), int64_t where it is held in 64 bits. The grouped tier's loop
/// over the keys counts in it (where N is at most half the largest int, so that no pass's index
/// overflows; the general tier takes longer ones): in int, Qwen3-1.7B's decode attention took 17.13
/// -> 14.39 us at context 4096 and 50.58 -> 38.76 at 16384 (H200, the slot alone, CUDA-graph
/// replays).
template <class N>
struct key_index {  // an extent held in a run-time integer
  using type = std::conditional_t<(sizeof(N) < sizeof(int64_t)), int, int64_t>;
};
template <auto n>
struct key_index<cute::C<n>> {
  using type = std::conditional_t<(n > INT32_MAX), int64_t, int>;
};
template <class K>
using key_index_t = typename key_index<
    cute::remove_cvref_t<decltype(cute::size<1>(std::declval<K const&>()))>>::type;
/// The largest value of a key index type (int or int64_t).
template <class I>
constexpr int64_t largest_key_v = sizeof(I) < sizeof(int64_t) ? INT32_MAX : INT64_MAX;

/// Key n's position is n itself (the keys are a cache in position order): visible to query row m
/// where cmp(n, qpos(m)). A causal mask (le, lt) bounds the keys any row sees by the largest query
/// position, read from the device: a kernel given the whole cache scans the entries written so
/// far, so one launch (one CUDA graph) serves every context length. Positions are of the keys'
/// index type I (key_index_t): a query's is clamped to [-1, the largest I], which leaves every
/// comparison with a key index (0 to N - 1, N at most that largest I) as it was.
template <class Cmp, class QPos, class I = int64_t>
struct visible_index {
  Cmp cmp;
  QPos qpos;
  using position_t = I;
  TILEFOUNDRY_DEVICE I key(int64_t n) const { return I(n); }
  TILEFOUNDRY_DEVICE I query(int64_t m) const {
    constexpr int64_t most = largest_key_v<I>;
    int64_t const p = int64_t(qpos(m));
    return I(p < -1 ? -1 : p > most ? most : p);
  }
  TILEFOUNDRY_DEVICE bool test(I k, I q) const { return bool(cmp(k, q)); }
  TILEFOUNDRY_DEVICE bool operator()(int64_t m, int64_t n) const { return test(key(n), query(m)); }
  TILEFOUNDRY_DEVICE int64_t keys(int64_t n) const {
    return keys_of(n, 0, int64_t(cute::size<0>(qpos)));
  }
  /// Whether every key of [first, last] is visible to a query at `pos`: for a causal mask (le, lt)
  /// the last one is, the positions growing with the index; for another comparison not known
  /// without testing each.
  TILEFOUNDRY_DEVICE bool all(int64_t, int64_t last, I pos) const {
    if constexpr (std::is_same<Cmp, le_op>::value || std::is_same<Cmp, lt_op>::value) {
      return test(I(last), pos);
    } else {
      return false;
    }
  }
  /// ... the first keys any of the queries [first, end) may see.
  TILEFOUNDRY_DEVICE int64_t keys_of(int64_t n, int64_t first, int64_t end) const {
    constexpr bool le = std::is_same<Cmp, le_op>::value;
    if constexpr (le || std::is_same<Cmp, lt_op>::value) {
      int64_t most = -1;  // the largest query position: keys past it (or at it, for lt) are hidden
      for (int64_t m = first; m < end; ++m) {
        int64_t const p = query(m);
        most = p > most ? p : most;
      }
      int64_t const seen = le ? most + 1 : most;
      return seen < 0 ? 0 : seen < n ? seen : n;
    } else {
      return n;
    }
  }
};

/// The keys [begin, end) of slice `split` of `splits`, each slice a multiple of `pass` keys (the
/// last shorter, later ones empty).
struct KeyRange {
  int64_t begin, end;
};
TILEFOUNDRY_DEVICE KeyRange slice_of(int64_t keys, int64_t split, int64_t splits, int64_t pass) {
  int64_t const per = (keys + splits - 1) / splits;
  int64_t const chunk = (per + pass - 1) / pass * pass;
  int64_t const begin = split * chunk;
  int64_t const end = begin + chunk < keys ? begin + chunk : keys;
  return KeyRange{begin < keys ? begin : keys, end};
}

/// The general tier: any strides, any extents. A thread takes a query row (g, m) at a time and
/// runs its online softmax over the slice's keys, the weighted sum kept in `part` itself.
template <class Acc, class Scores, class Visible, class Q, class K, class V, class Part>
TILEFOUNDRY_DEVICE_OUTLINED void general(Scores scores, Visible visible, Q const& q, K const& k,
                                         V const& v, Part&& part, int64_t split, int64_t splits) {
  using T = cute::remove_cvref_t<decltype(q(0, 0, 0))>;
  int64_t const groups = int64_t(cute::size<0>(q));
  int64_t const rows = int64_t(cute::size<1>(q));
  int64_t const depth = int64_t(cute::size<2>(q));
  int64_t const dv = int64_t(cute::size<1>(v));
  KeyRange const keys = slice_of(visible.keys(int64_t(cute::size<1>(k))), split, splits, 1);
  int64_t const threads =
      int64_t(program_dim<detail::dependent_level<TopologyScope::thread, Part>>());
  for (int64_t r = int64_t(program_id<detail::dependent_level<TopologyScope::thread, Part>>());
       r < groups * rows; r += threads) {
    int64_t const m = r / groups;
    int64_t const g = r - m * groups;
    for (int64_t d = 0; d < dv; ++d) part(g, m, d) = 0.0f;
    float mx = -INFINITY;
    float sum = 0.0f;
    for (int64_t n = keys.begin; n < keys.end; ++n) {
      if (!visible(m, n)) continue;
      Acc dot = Acc(0);
      for (int64_t d = 0; d < depth; ++d) {
        dot += detail::convert<Acc>(q(g, m, d)) * detail::convert<Acc>(k(d, n));
      }
      float const s = score<T>(scores, float(dot));
      if (s == -INFINITY) continue;
      if (s > mx) {  // the maximum grows: what was summed below the old one shrinks
        float const corr = mx == -INFINITY ? 0.0f : detail::exp_(mx - s);
        sum *= corr;
        for (int64_t d = 0; d < dv; ++d) part(g, m, d) = part(g, m, d) * corr;
        mx = s;
      }
      float const p = detail::exp_(s - mx);
      sum += p;
      for (int64_t d = 0; d < dv; ++d) {
        part(g, m, d) = part(g, m, d) + p * detail::convert<float>(v(n, d));
      }
    }
    part(g, m, dv) = mx;
    part(g, m, dv + 1) = sum;
  }
}

/// out(g, m, d) from the slices' states read(s, g, m, :) of `splits` slices: each slice's sum
/// weighted by e^(its maximum - the largest), divided by the weighted sum of exponentials. Only the
/// outputs [first, end) of out's G x M x Dv, in that order (a CTA's share where several merge one
/// head).
template <class Read, class Out>
TILEFOUNDRY_DEVICE void combine_with(Read const& read, int64_t splits, Out&& out, int64_t first,
                                     int64_t end) {
  using T = cute::remove_cvref_t<decltype(out(0, 0, 0))>;
  int64_t const rows = int64_t(cute::size<1>(out));
  int64_t const dv = int64_t(cute::size<2>(out));
  int64_t const threads =
      int64_t(program_dim<detail::dependent_level<TopologyScope::thread, Out>>());
  for (int64_t i =
           first + int64_t(program_id<detail::dependent_level<TopologyScope::thread, Out>>());
       i < end; i += threads) {
    int64_t const d = i % dv;
    int64_t const m = (i / dv) % rows;
    int64_t const g = i / (dv * rows);
    float mx = -INFINITY;
    for (int64_t s = 0; s < splits; ++s) {
      float const ms = read(s, g, m, dv);
      mx = ms > mx ? ms : mx;
    }
    float sum = 0.0f;
    float acc = 0.0f;
    for (int64_t s = 0; s < splits; ++s) {
      float const ms = read(s, g, m, dv);
      if (ms == -INFINITY) continue;
      float const w = detail::exp_(ms - mx);
      sum += w * read(s, g, m, dv + 1);
      acc += w * read(s, g, m, d);
    }
    out(g, m, d) = detail::convert<T>(acc / sum);
  }
}

/// ... the states in part (S x G x M x (Dv + 2)), part(s, g, m, :) slice s's.
template <class Part, class Out>
TILEFOUNDRY_DEVICE void combine(Part const& part, Out&& out, int64_t first, int64_t end) {
  auto const read = [&](int64_t s, int64_t g, int64_t m, int64_t d) {
    return float(part(s, g, m, d));
  };
  combine_with(read, int64_t(cute::size<0>(part)), out, first, end);
}

/// ... every output.
template <class Part, class Out>
TILEFOUNDRY_DEVICE void combine(Part const& part, Out&& out) {
  combine(part, out, 0, int64_t(cute::size(out)));
}

}  // namespace attention_impl
}  // namespace ops
}  // namespace tilefoundry

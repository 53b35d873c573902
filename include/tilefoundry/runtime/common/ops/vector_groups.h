// The 16-byte vector path the CUDA target puts behind its elementwise entries (fill, copy, unary,
// binary) and the reduce's load of its source: spec 3 lets a target select "an internal
// optimized load/store path (such as a wider vector copy) behind this single entry without
// changing the public entry or its observable result". It is target-independent code, so that
// the CPU tests run it on the host; the CPU target's entries do not use it.
//
// The operands are views of one shape (binary's are broadcast to the result's shape first).
// Modes of static extent 1 are dropped; what remains must be one static shape, the same for every
// tensor operand, so that elements pair up as the scalar body pairs them. One of those modes is
// cut into groups of G consecutive elements, G = 16 bytes / the smallest element among the memory
// (gmem / smem) operands (8 for bf16, 4 for f32), when
//   - every memory operand is contiguous along it (static stride 1), or, for an input, repeats
//     along it (static stride 0: a broadcast, one load per group), and at least one is contiguous;
//   - its extent is a multiple of G;
//   - every contiguous memory operand holds float, bf16 or f16, every register operand computes
//     in float (float, bf16, f16) with static strides;
// A contiguous memory operand then moves as 16-byte words (packed.h), register operands element
// by element (static indices keep them in registers), a scalar is itself; where the views do not
// qualify, the entry runs its scalar body. Whether the words are 16-byte aligned (every
// contiguous memory operand's base, and its other strides where they are launch-provided) is
// checked at run time; if not, the same groups move element by element.
//
// Groups go in batches, all loads of a batch before its first store, so that loads are in flight
// together even where an output may alias an input.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/operand.h>
#include <tilefoundry/runtime/common/ops/packed.h>

#include <climits>
#include <cstdint>

namespace tilefoundry {
namespace ops {
namespace detail {

inline constexpr long kDynamicValue = LONG_MIN;
inline constexpr int kMaxGroupRank = 8;
inline constexpr int kMaxBatchElements = 32;  // per input: the registers one batch stages

template <class X>
constexpr long static_long() {
  if constexpr (cute::is_static<X>::value) {
    return static_cast<long>(X::value);
  } else {
    return kDynamicValue;
  }
}

template <class V>
using flat_view_layout_t = decltype(cute::flatten(std::declval<V const&>().layout()));
template <class F, int I>
using flat_extent_t =
    cute::remove_cvref_t<decltype(cute::get<I>(cute::wrap(std::declval<F const&>().shape())))>;
template <class F, int I>
using flat_stride_t =
    cute::remove_cvref_t<decltype(cute::get<I>(cute::wrap(std::declval<F const&>().stride())))>;

// The modes of a flat layout whose extent is not a static 1, in order.
template <class F>
struct squeezed_modes {
  static constexpr int flat_rank =
      cute::tuple_size<decltype(cute::wrap(std::declval<F const&>().shape()))>::value;
  template <int... I>
  static constexpr auto list(std::integer_sequence<int, I...>) {
    std::pair<int, cute::array<int, flat_rank + 1>> r{};
    ((cute::is_constant<1, flat_extent_t<F, I>>::value ? void() : void(r.second[r.first++] = I)),
     ...);
    return r;
  }
  static constexpr auto modes = list(std::make_integer_sequence<int, flat_rank>{});
  static constexpr int rank = modes.first;
  template <int J>
  static constexpr int mode = modes.second[J];
};

// What the plan needs to know of one operand, as plain numbers.
struct operand_facts {
  bool tensor = false;
  bool memory = false;      // gmem or smem (raw pointers are registers to CuTe, and here)
  bool packed = false;      // float, bf16 or f16
  bool float_math = false;  // computes in float
  int bytes = 0;            // element size
  int rank = 0;             // after dropping static-1 modes
  cute::array<long, kMaxGroupRank> extent{};
  cute::array<long, kMaxGroupRank> stride{};
};

template <class F, class S, int... J>
constexpr void fill_modes(operand_facts& f, std::integer_sequence<int, J...>) {
  ((f.extent[J] = static_long<flat_extent_t<F, S::template mode<J>>>()), ...);
  ((f.stride[J] = static_long<flat_stride_t<F, S::template mode<J>>>()), ...);
}

template <class X>
constexpr operand_facts facts_of() {
  operand_facts f;
  if constexpr (cute::is_tensor<X>::value) {
    using F = flat_view_layout_t<X>;
    using S = squeezed_modes<F>;
    using It = cute::remove_cvref_t<decltype(std::declval<X const&>().data())>;
    using T = value_t<X>;
    static_assert(S::rank <= kMaxGroupRank, "vector path: view of too high a rank");
    f.tensor = true;
    f.memory = cute::is_gmem<It>::value || cute::is_smem<It>::value;
    f.packed = is_packed_v<T>;
    f.float_math = std::is_same_v<compute_t<T>, float>;
    f.bytes = int(sizeof(T));
    f.rank = S::rank;
    fill_modes<F, S>(f, std::make_integer_sequence<int, S::rank>{});
  }
  return f;
}

enum class group_access { scalar, words, broadcast, registers };

template <std::size_t N>
struct group_plan_value {
  int mode = -1;  // squeezed mode cut into groups, -1: no vector path
  int group = 0;  // G
  int groups = 0;
  cute::array<group_access, N> access{};
};

// Operand 0 is the output, the others inputs.
template <std::size_t N>
constexpr group_plan_value<N> plan_groups(cute::array<operand_facts, N> f) {
  group_plan_value<N> p;
  int smallest = 0;
  for (std::size_t k = 0; k < N; ++k) {
    if (f[k].tensor && f[k].memory && (smallest == 0 || f[k].bytes < smallest)) {
      smallest = f[k].bytes;
    }
  }
  if (smallest == 0 || 16 % smallest != 0) return p;
  int const g = 16 / smallest;
  int const rank = f[0].rank;
  for (std::size_t k = 0; k < N; ++k) {
    if (!f[k].tensor) continue;
    if (f[k].rank != rank || !f[k].float_math) return p;
    for (int j = 0; j < rank; ++j) {
      if (f[k].extent[j] == kDynamicValue || f[k].extent[j] != f[0].extent[j]) return p;
      if (!f[k].memory && f[k].stride[j] == kDynamicValue) return p;
    }
  }
  long total = 1;
  for (int j = 0; j < rank; ++j) total *= f[0].extent[j];
  for (int m = 0; m < rank && p.mode < 0; ++m) {
    if (f[0].extent[m] % g != 0) continue;
    bool ok = true, contiguous = false;
    for (std::size_t k = 0; k < N && ok; ++k) {
      if (!f[k].tensor) {
        p.access[k] = group_access::scalar;
      } else if (!f[k].memory) {
        p.access[k] = group_access::registers;
      } else if (f[k].stride[m] == 1 && f[k].packed) {
        p.access[k] = group_access::words;
        contiguous = true;
        int const per_word = 16 / f[k].bytes;  // other strides keep groups 16-byte aligned
        for (int j = 0; j < rank; ++j) {
          if (j != m && f[k].stride[j] != kDynamicValue && f[k].stride[j] % per_word != 0) {
            ok = false;
          }
        }
      } else if (k > 0 && f[k].stride[m] == 0) {
        p.access[k] = group_access::broadcast;
      } else {
        ok = false;
      }
    }
    if (ok && contiguous) {
      p.mode = m;
      p.group = g;
      p.groups = int(total / g);
    }
  }
  return p;
}

template <class Out, class... Ins>
struct group_plan {
  static constexpr std::size_t count = 1 + sizeof...(Ins);
  static constexpr auto value = plan_groups<count>(cute::array<operand_facts, count>{
      {facts_of<cute::remove_cvref_t<Out>>(), facts_of<cute::remove_cvref_t<Ins>>()...}});
  static constexpr bool ok = value.mode >= 0;
  static constexpr int mode = value.mode;
  static constexpr int G = value.group;
  static constexpr int groups = value.groups;
  template <int K>
  static constexpr group_access access = value.access[K];
  // Groups per batch: the largest divisor of the group count that stages at most
  // kMaxBatchElements elements per input.
  static constexpr int batch = [] {
    int b = 1;
    for (int d = 1; G > 0 && d <= groups && d * G <= kMaxBatchElements; ++d) {
      if (groups % d == 0) b = d;
    }
    return b;
  }();
};

// One operand, grouped: `at(g)` is the offset of group g's first element, `step` the offset
// between two elements of a group.
template <int Mode, int G, class View>
struct grouped {
  using F = flat_view_layout_t<View>;
  using S = squeezed_modes<F>;
  View view;

  template <int J, class Flat>
  TILEFOUNDRY_DEVICE static auto extent(Flat const& f) {
    auto const e = cute::get<S::template mode<J>>(cute::wrap(f.shape()));
    if constexpr (J == Mode) {
      return e / cute::Int<G>{};
    } else {
      return e;
    }
  }
  template <int J, class Flat>
  TILEFOUNDRY_DEVICE static auto stride(Flat const& f) {
    auto const d = cute::get<S::template mode<J>>(cute::wrap(f.stride()));
    if constexpr (J == Mode) {
      return d * cute::Int<G>{};
    } else {
      return d;
    }
  }
  template <int... J>
  TILEFOUNDRY_DEVICE auto groups_layout(std::integer_sequence<int, J...>) const {
    auto const f = cute::flatten(view.layout());
    return cute::make_layout(cute::make_shape(extent<J>(f)...), cute::make_stride(stride<J>(f)...));
  }
  TILEFOUNDRY_DEVICE auto layout() const {
    return groups_layout(std::make_integer_sequence<int, S::rank>{});
  }
  static constexpr auto step = flat_stride_t<F, S::template mode<Mode>>{};

  // Whether the runtime part of the plan holds for a contiguous memory operand.
  TILEFOUNDRY_DEVICE bool aligned() const {
    using T = value_t<View>;
    constexpr int per_word = 16 / int(sizeof(T));
    auto const l = layout();
    bool ok = reinterpret_cast<std::uintptr_t>(cute::raw_pointer_cast(view.data())) % 16 == 0;
    cute::for_each(cute::wrap(l.stride()), [&](auto d) {
      if constexpr (!cute::is_static<decltype(d)>::value) ok = ok && d % per_word == 0;
    });
    return ok;
  }
};

template <int Mode, int G, class View>
TILEFOUNDRY_DEVICE auto make_grouped(View const& v) {
  return grouped<Mode, G, View>{v};
}

// What one input holds for one batch: the words it loaded, one broadcast value per group, or
// nothing (registers and scalars are read where they are used).
template <group_access A, int G, int B>
struct staged {};
template <int G, int B>
struct staged<group_access::words, G, B> {
  float v[B][G];
};
template <int G, int B>
struct staged<group_access::broadcast, G, B> {
  float v[B];
};

template <class Plan, int K>
constexpr group_access access_v = Plan::template access<K>;

// s is the input's staged<> (an empty one is handed over by value by cute::get).
template <class Plan, int K, int B, class S, class In, class L>
TILEFOUNDRY_DEVICE void stage_input(S&& s, In const& in, L const& l, int first, bool words) {
  constexpr group_access a = access_v<Plan, K>;
  if constexpr (a == group_access::words) {
    CUTE_UNROLL
    for (int b = 0; b < B; ++b) {
      auto const* p = cute::raw_pointer_cast(in.data()) + l(first + b);
      if (words) {
        load_group(p, s.v[b]);
      } else {
        CUTE_UNROLL
        for (int e = 0; e < Plan::G; ++e) s.v[b][e] = to_compute(p[e]);
      }
    }
  } else if constexpr (a == group_access::broadcast) {
    CUTE_UNROLL
    for (int b = 0; b < B; ++b) s.v[b] = to_compute(in.data()[l(first + b)]);
  } else {
    (void)s;
    (void)in;
    (void)l;
    (void)first;
    (void)words;
  }
}

template <class Plan, int K, class S, class In, class L, class Step>
TILEFOUNDRY_DEVICE auto input_value(S const& s, In const& in, L const& l, int g, int b, int e,
                                    Step step) {
  constexpr group_access a = access_v<Plan, K>;
  if constexpr (a == group_access::words) {
    return s.v[b][e];
  } else if constexpr (a == group_access::broadcast) {
    return s.v[b];
  } else if constexpr (a == group_access::registers) {
    return to_compute(in.data()[l(g) + e * step]);
  } else {
    (void)s;
    (void)l;
    (void)g;
    (void)b;
    (void)e;
    (void)step;
    return in;  // a scalar
  }
}

// An input of one group, as the operation takes it: float for a tensor, a scalar as it is.
template <class X>
using group_arg_t = std::conditional_t<cute::is_tensor<X>::value, float, X>;

template <int Mode, int G, class X>
TILEFOUNDRY_DEVICE auto grouped_layout(X const& x) {
  if constexpr (cute::is_tensor<X>::value) {
    return make_grouped<Mode, G>(x).layout();
  } else {
    return cute::Int<0>{};
  }
}

template <int Mode, int G, class X>
TILEFOUNDRY_DEVICE bool grouped_aligned(X const& x) {
  if constexpr (cute::is_tensor<X>::value) {
    return make_grouped<Mode, G>(x).aligned();
  } else {
    return true;
  }
}

// The type of the offset between two elements of a group (a static stride), 0 for a scalar.
template <int Mode, int G, class X, bool = cute::is_tensor<X>::value>
struct grouped_step {
  using type = cute::remove_cvref_t<decltype(grouped<Mode, G, X>::step)>;
};
template <int Mode, int G, class X>
struct grouped_step<Mode, G, X, false> {
  using type = cute::Int<0>;
};
template <int Mode, int G, class X>
using grouped_step_t = typename grouped_step<Mode, G, X>::type;

// The run-time part of the plan: every operand that moves as words is 16-byte aligned, base and
// strides.
template <class Plan, class Out, class... Ins, std::size_t... K>
TILEFOUNDRY_DEVICE bool groups_aligned_as(Out const& out, std::index_sequence<K...>,
                                          Ins const&... ins) {
  constexpr int G = Plan::G;
  constexpr int mode = Plan::mode;
  bool aligned = access_v<Plan, 0> != group_access::words || grouped_aligned<mode, G>(out);
  ((aligned =
        aligned && (access_v<Plan, K + 1> != group_access::words || grouped_aligned<mode, G>(ins))),
   ...);
  return aligned;
}

/// Whether the views the vector path takes (group_plan) move as 16-byte words here: false where
/// an operand is misaligned, and where the plan does not take the views at all.
template <class Out, class... Ins>
TILEFOUNDRY_DEVICE bool groups_aligned(Out const& out, Ins const&... ins) {
  using Plan = group_plan<Out, Ins...>;
  if constexpr (!Plan::ok) {
    return false;
  } else {
    return groups_aligned_as<Plan>(out, std::index_sequence_for<Ins...>{}, ins...);
  }
}

template <class Plan, class Out, class F, class... Ins, std::size_t... K>
TILEFOUNDRY_DEVICE bool run_groups(Out const& out, F const& f, std::index_sequence<K...>,
                                   Ins const&... ins) {
  constexpr int G = Plan::G;
  constexpr int B = Plan::batch;
  constexpr int mode = Plan::mode;
  // Misaligned views take the same groups element by element: one path for the registers either
  // way (two paths writing one register array in different branches can push it into local
  // memory).
  bool const aligned = groups_aligned_as<Plan>(out, std::index_sequence<K...>{}, ins...);
  auto const lo = grouped_layout<mode, G>(out);
  auto const li = cute::make_tuple(grouped_layout<mode, G>(ins)...);
  (void)li;  // unused when there is no input (fill)
  using D = value_t<Out>;
  CUTE_UNROLL
  for (int first = 0; first < Plan::groups; first += B) {
    auto stage = cute::make_tuple(staged<access_v<Plan, K + 1>, G, B>{}...);
    (void)stage;
    (stage_input<Plan, K + 1, B>(cute::get<K>(stage), ins, cute::get<K>(li), first, aligned), ...);
    CUTE_UNROLL
    for (int b = 0; b < B; ++b) {
      int const g = first + b;
      float r[G];
      CUTE_UNROLL
      for (int e = 0; e < G; ++e) {
        r[e] = f(input_value<Plan, K + 1>(cute::get<K>(stage), ins, cute::get<K>(li), g, b, e,
                                          grouped_step_t<mode, G, Ins>{})...);
      }
      if constexpr (access_v<Plan, 0> == group_access::words) {
        auto* p = cute::raw_pointer_cast(out.data()) + lo(g);
        if (aligned) {
          store_group(p, r);
        } else {
          CUTE_UNROLL
          for (int e = 0; e < G; ++e) p[e] = convert<D>(r[e]);
        }
      } else {
        constexpr grouped_step_t<mode, G, Out> step{};
        CUTE_UNROLL
        for (int e = 0; e < G; ++e) out.data()[lo(g) + e * step] = convert<D>(r[e]);
      }
    }
  }
  return true;
}

/// out(i) = f(ins(i)...) through the vector path; false, with nothing written, where the plan
/// rules it out (at compile time). Views that turn out misaligned at run time take the same groups
/// element by element. f takes float for a tensor input (its compute type) and a scalar input as
/// it is; the path is taken only where f returns float.
template <class F, class Out, class... Ins>
TILEFOUNDRY_DEVICE bool elementwise_groups(F const& f, Out const& out, Ins const&... ins) {
  using Plan = group_plan<Out, Ins...>;
  if constexpr (!Plan::ok) {
    return false;
  } else if constexpr (!std::is_same_v<std::invoke_result_t<F const&, group_arg_t<Ins>...>,
                                       float>) {
    return false;
  } else {
    return run_groups<Plan>(out, f, std::index_sequence_for<Ins...>{}, ins...);
  }
}

/// The fast path (fast_path.h) the CUDA target's entries hand the common op bodies.
struct vector_path {
  template <class F, class Out, class... Ins>
  TILEFOUNDRY_DEVICE bool operator()(F const& f, Out const& out, Ins const&... ins) const {
    return elementwise_groups(f, out, ins...);
  }
};

}  // namespace detail
}  // namespace ops
}  // namespace tilefoundry

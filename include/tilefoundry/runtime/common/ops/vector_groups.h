// The 16-byte vector path the CUDA target puts behind its elementwise entries (fill, copy, unary,
// binary) and the reduce's load of its source: spec 3 lets a target select "an internal
// optimized load/store path (such as a wider vector copy) behind this single entry without
// changing the public entry or its observable result". It is target-independent code, so that
// the CPU tests run it on the host; the CPU target's entries do not use it.
//
// On the views the plan takes (vector_plan.h), a contiguous memory operand moves as 16-byte words
// (packed.h), register operands element by element (static indices keep them in registers), a
// scalar is itself. Whether the words are 16-byte aligned (every contiguous memory operand's
// base, and its other strides where they are launch-provided) is checked at run time; if not, the
// same groups move element by element. A base whose iterator type promises 16 bytes
// (aligned_gmem_ptr, which generated code makes where its host entry checked them) is not
// checked: with static strides the check and the element-by-element code fold away.
//
// Groups go in batches, all loads of a batch before its first store, so that loads are in flight
// together even where an output may alias an input.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/aligned_ptr.h>
#include <tilefoundry/runtime/common/ops/operand.h>
#include <tilefoundry/runtime/common/ops/packed.h>
#include <tilefoundry/runtime/common/ops/vector_plan.h>

namespace tilefoundry {
namespace ops {
namespace detail {

// One operand, grouped: layout() maps group g to the offset of its first element, step is the
// offset between two elements of a group.
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
    // A base whose type promises the alignment (aligned_ptr.h) is not checked again.
    bool ok = aligned_to<16>(view.data());
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
          store_group<cute::is_gmem<cute::remove_cvref_t<decltype(out.data())>>::value>(p, r);
        } else {
          CUTE_UNROLL
          for (int e = 0; e < G; ++e) p[e] = convert<D>(r[e]);
        }
      } else {
        constexpr grouped_step_t<mode, G, Out> step{};
        auto const at = lo(g);
        store_converted<D>(
            G, [&](int e) -> D& { return out.data()[at + e * step]; }, [&](int e) { return r[e]; });
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

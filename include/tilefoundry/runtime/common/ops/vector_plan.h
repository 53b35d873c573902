// Which views the 16-byte vector path (vector_groups.h) takes, decided at compile time.
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
//     in float (float, bf16, f16) with static strides.
// Where the views do not qualify, the entry runs its scalar body.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/operand.h>
#include <tilefoundry/runtime/common/ops/packed.h>

#include <climits>

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

}  // namespace detail
}  // namespace ops
}  // namespace tilefoundry

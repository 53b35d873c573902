// Reduction tags and what the reduce family needs to know about each: identity, how an element
// enters (absmax takes |x|), how two partial results combine, and whether the result divides by
// the number of reduced elements.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/binary_ops.h>

namespace tilefoundry {
namespace ops {

struct sum_op {};
struct mean_op {};
struct absmax_op {};
// max_op and min_op are the binary family's tags (binary_ops.h).

namespace detail {

enum class combine_kind { sum, max, min, absmax };

template <class Op>
struct reduce_traits {
  static_assert(sizeof(Op) == 0,
                "ops::reduce: Op is one of sum_op, mean_op, max_op, min_op, absmax_op");
};

template <>
struct reduce_traits<sum_op> {
  static constexpr combine_kind kind = combine_kind::sum;
  static constexpr bool divides = false;
  template <class T>
  static TILEFOUNDRY_DEVICE T identity() {
    return T(0);
  }
  template <class T>
  static TILEFOUNDRY_DEVICE T enter(T x) {
    return x;
  }
  template <class T>
  static TILEFOUNDRY_DEVICE T combine(T a, T b) {
    return a + b;
  }
};

template <>
struct reduce_traits<mean_op> : reduce_traits<sum_op> {
  static constexpr bool divides = true;
};

template <>
struct reduce_traits<max_op> {
  static constexpr combine_kind kind = combine_kind::max;
  static constexpr bool divides = false;
  template <class T>
  static TILEFOUNDRY_DEVICE T identity() {
    return lowest<T>();
  }
  template <class T>
  static TILEFOUNDRY_DEVICE T enter(T x) {
    return x;
  }
  template <class T>
  static TILEFOUNDRY_DEVICE T combine(T a, T b) {
    return fold_max(a, b);
  }
};

template <>
struct reduce_traits<min_op> {
  static constexpr combine_kind kind = combine_kind::min;
  static constexpr bool divides = false;
  template <class T>
  static TILEFOUNDRY_DEVICE T identity() {
    return highest<T>();
  }
  template <class T>
  static TILEFOUNDRY_DEVICE T enter(T x) {
    return x;
  }
  template <class T>
  static TILEFOUNDRY_DEVICE T combine(T a, T b) {
    return fold_min(a, b);
  }
};

template <>
struct reduce_traits<absmax_op> {
  static constexpr combine_kind kind = combine_kind::absmax;
  static constexpr bool divides = false;
  template <class T>
  static TILEFOUNDRY_DEVICE T identity() {
    return T(0);
  }
  template <class T>
  static TILEFOUNDRY_DEVICE T enter(T x) {
    return x < T(0) ? -x : x;
  }
  template <class T>
  static TILEFOUNDRY_DEVICE T combine(T a, T b) {
    return fold_max(a, b);
  }
};

}  // namespace detail

// The argument a reduce gets when it needs no shared memory.
struct no_workspace {};

}  // namespace ops
}  // namespace tilefoundry

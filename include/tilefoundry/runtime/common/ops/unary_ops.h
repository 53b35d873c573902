// Tags of the unary family. Each is a functor on the compute type (float for 16-bit storage);
// ops::unary converts on the way in and out.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/math.h>
#include <tilefoundry/runtime/common/ops/then.h>

namespace tilefoundry {
namespace ops {

// cast is identity: the conversion to the destination's element type is the skeleton's store.
struct identity_op {
  template <class T>
  TILEFOUNDRY_DEVICE T operator()(T x) const {
    return x;
  }
};
using cast_op = identity_op;

// copy_n: identity on the first n elements; the rest of the destination is left untouched.
struct copy_n_op : identity_op {
  int n;
};

// Bounds are converted to the compute type; NaN passes through as in torch.clamp.
template <class V = float>
struct clamp_op {
  V lo;
  V hi;
  template <class T>
  TILEFOUNDRY_DEVICE T operator()(T x) const {
    T const l = static_cast<T>(lo), h = static_cast<T>(hi);
    return x < l ? l : (h < x ? h : x);
  }
};

struct neg_op {
  template <class T>
  TILEFOUNDRY_DEVICE T operator()(T x) const {
    return -x;
  }
};

struct abs_op {
  template <class T>
  TILEFOUNDRY_DEVICE T operator()(T x) const {
    return x < T(0) ? -x : x;
  }
};

struct square_op {
  template <class T>
  TILEFOUNDRY_DEVICE T operator()(T x) const {
    return x * x;
  }
};

// relu keeps NaN (x < 0 is false for NaN), as torch.relu does.
struct relu_op {
  template <class T>
  TILEFOUNDRY_DEVICE T operator()(T x) const {
    return x < T(0) ? T(0) : x;
  }
};

struct exp_op {
  template <class T>
  TILEFOUNDRY_DEVICE T operator()(T x) const {
    static_assert(detail::is_float_compute_v<T>, "exp_op needs a floating-point operand");
    return detail::exp_(x);
  }
};

struct log_op {
  template <class T>
  TILEFOUNDRY_DEVICE T operator()(T x) const {
    static_assert(detail::is_float_compute_v<T>, "log_op needs a floating-point operand");
    return detail::log_(x);
  }
};

struct sqrt_op {
  template <class T>
  TILEFOUNDRY_DEVICE T operator()(T x) const {
    static_assert(detail::is_float_compute_v<T>, "sqrt_op needs a floating-point operand");
    return detail::sqrt_(x);
  }
};

struct rsqrt_op {
  template <class T>
  TILEFOUNDRY_DEVICE T operator()(T x) const {
    static_assert(detail::is_float_compute_v<T>, "rsqrt_op needs a floating-point operand");
    return detail::rsqrt_(x);
  }
};

struct tanh_op {
  template <class T>
  TILEFOUNDRY_DEVICE T operator()(T x) const {
    static_assert(detail::is_float_compute_v<T>, "tanh_op needs a floating-point operand");
    return detail::tanh_(x);
  }
};

struct sigmoid_op {
  template <class T>
  TILEFOUNDRY_DEVICE T operator()(T x) const {
    static_assert(detail::is_float_compute_v<T>, "sigmoid_op needs a floating-point operand");
    return detail::rcp_at_least_one_(T(1) + detail::exp_(-x));
  }
};

struct silu_op {
  template <class T>
  TILEFOUNDRY_DEVICE T operator()(T x) const {
    return x * sigmoid_op{}(x);
  }
};

struct exp2_op {
  template <class T>
  TILEFOUNDRY_DEVICE T operator()(T x) const {
    static_assert(detail::is_float_compute_v<T>, "exp2_op needs a floating-point operand");
    return detail::exp2_(x);
  }
};

struct log2_op {
  template <class T>
  TILEFOUNDRY_DEVICE T operator()(T x) const {
    static_assert(detail::is_float_compute_v<T>, "log2_op needs a floating-point operand");
    return detail::log2_(x);
  }
};

// ceil, floor and round (ties to even) return an integer operand unchanged, as torch does.
struct ceil_op {
  template <class T>
  TILEFOUNDRY_DEVICE T operator()(T x) const {
    if constexpr (detail::is_float_compute_v<T>) {
      return detail::ceil_(x);
    } else {
      return x;
    }
  }
};

struct floor_op {
  template <class T>
  TILEFOUNDRY_DEVICE T operator()(T x) const {
    if constexpr (detail::is_float_compute_v<T>) {
      return detail::floor_(x);
    } else {
      return x;
    }
  }
};

struct round_op {
  template <class T>
  TILEFOUNDRY_DEVICE T operator()(T x) const {
    if constexpr (detail::is_float_compute_v<T>) {
      return detail::rint_(x);
    } else {
      return x;
    }
  }
};

struct logical_not_op {
  TILEFOUNDRY_DEVICE bool operator()(bool x) const { return !x; }
};

// torch.nn.functional.softplus: log1p(exp(beta * x)) / beta, and x itself where beta * x exceeds
// threshold (the exponential would overflow; the two differ by less than a rounding there). beta
// and threshold are in the compute type, as torch converts them.
template <class V = float>
struct softplus_op {
  V beta;
  V threshold;
  template <class T>
  TILEFOUNDRY_DEVICE T operator()(T x) const {
    static_assert(detail::is_float_compute_v<T>, "softplus_op needs a floating-point operand");
    T const b = static_cast<T>(beta);
    T const z = x * b;
    return z > static_cast<T>(threshold) ? x : detail::log1p_(detail::exp_(z)) / b;
  }
};

// exp, sigmoid and silu where the result is rounded to a 16-bit float (bf16, f16) before anything
// reads it: the exponential may then err by far less than that rounding (exp_rounded_). Codegen
// picks these for ops whose result is 16-bit, and for softmax's exponentials when the softmax's
// result is; their f32 results otherwise stay exact to expf's ulp.
struct exp_rounded_op {
  template <class T>
  TILEFOUNDRY_DEVICE T operator()(T x) const {
    static_assert(detail::is_float_compute_v<T>, "exp_rounded_op needs a floating-point operand");
    return detail::exp_rounded_(x);
  }
};

struct sigmoid_rounded_op {
  template <class T>
  TILEFOUNDRY_DEVICE T operator()(T x) const {
    static_assert(detail::is_float_compute_v<T>,
                  "sigmoid_rounded_op needs a floating-point operand");
    return detail::rcp_at_least_one_(T(1) + detail::exp_rounded_(-x));
  }
};

struct silu_rounded_op {
  template <class T>
  TILEFOUNDRY_DEVICE T operator()(T x) const {
    return x * sigmoid_rounded_op{}(x);
  }
};

// gelu with the exact erf form (torch's approximate="none").
struct gelu_op {
  template <class T>
  TILEFOUNDRY_DEVICE T operator()(T x) const {
    static_assert(detail::is_float_compute_v<T>, "gelu_op needs a floating-point operand");
    return T(0.5) * x * (T(1) + detail::erf_(x * T(0.70710678118654752440)));
  }
};

// gelu with torch's approximate="tanh".
struct gelu_tanh_op {
  template <class T>
  TILEFOUNDRY_DEVICE T operator()(T x) const {
    static_assert(detail::is_float_compute_v<T>, "gelu_tanh_op needs a floating-point operand");
    T const inner = T(0.79788456080286535588) * (x + T(0.044715) * x * x * x);
    return T(0.5) * x * (T(1) + detail::tanh_(inner));
  }
};

}  // namespace ops
}  // namespace tilefoundry

// Tags of the binary family, functors on the compute type. max_op and min_op double as
// reduction tags (reduce_ops.h gives them their identities). The comparison tags yield bool, so
// their destination is a bool tensor; NaN compares unequal to everything, as in torch.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/math.h>

namespace tilefoundry {
namespace ops {

struct add_op {
  template <class T>
  TILEFOUNDRY_DEVICE T operator()(T a, T b) const {
    return a + b;
  }
};
struct sub_op {
  template <class T>
  TILEFOUNDRY_DEVICE T operator()(T a, T b) const {
    return a - b;
  }
};
struct mul_op {
  template <class T>
  TILEFOUNDRY_DEVICE T operator()(T a, T b) const {
    return a * b;
  }
};
struct div_op {
  template <class T>
  TILEFOUNDRY_DEVICE T operator()(T a, T b) const {
    return a / b;
  }
};
struct max_op {
  template <class T>
  TILEFOUNDRY_DEVICE T operator()(T a, T b) const {
    return detail::nan_max(a, b);
  }
};
struct min_op {
  template <class T>
  TILEFOUNDRY_DEVICE T operator()(T a, T b) const {
    return detail::nan_min(a, b);
  }
};
struct pow_op {
  template <class T>
  TILEFOUNDRY_DEVICE T operator()(T a, T b) const {
    static_assert(detail::is_float_compute_v<T>, "pow_op needs floating-point operands");
    return detail::pow_(a, b);
  }
};
// torch.floor_divide (rounds toward -inf) and torch.remainder (the divisor's sign); an integer
// division by zero gives 0 and never traps (math.h, detail::floor_divide).
struct floor_div_op {
  template <class T>
  TILEFOUNDRY_DEVICE T operator()(T a, T b) const {
    return detail::floor_divide(a, b);
  }
};
struct mod_op {
  template <class T>
  TILEFOUNDRY_DEVICE T operator()(T a, T b) const {
    return detail::remainder(a, b);
  }
};

// The logical tags take bool operands (the IR refuses others) and yield bool.
struct logical_and_op {
  TILEFOUNDRY_DEVICE bool operator()(bool a, bool b) const { return a && b; }
};
struct logical_or_op {
  TILEFOUNDRY_DEVICE bool operator()(bool a, bool b) const { return a || b; }
};

struct lt_op {
  template <class T>
  TILEFOUNDRY_DEVICE bool operator()(T a, T b) const {
    return a < b;
  }
};
struct le_op {
  template <class T>
  TILEFOUNDRY_DEVICE bool operator()(T a, T b) const {
    return a <= b;
  }
};
struct gt_op {
  template <class T>
  TILEFOUNDRY_DEVICE bool operator()(T a, T b) const {
    return b < a;
  }
};
struct ge_op {
  template <class T>
  TILEFOUNDRY_DEVICE bool operator()(T a, T b) const {
    return b <= a;
  }
};
struct eq_op {
  template <class T>
  TILEFOUNDRY_DEVICE bool operator()(T a, T b) const {
    return a == b;
  }
};
struct ne_op {
  template <class T>
  TILEFOUNDRY_DEVICE bool operator()(T a, T b) const {
    return a != b;
  }
};

}  // namespace ops
}  // namespace tilefoundry

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

// How a target's entry hands a common op body a faster way to do the same work (spec 3: "an
// internal optimized load/store path ... behind this single entry without changing the public
// entry or its observable result"). The body calls fast(f, out, inputs...) with the one
// elementwise function f it also runs itself, so both paths compute alike; fast returns whether
// it did the work. The CPU target passes no_fast_path; the CUDA target its vector path.
#pragma once

#include <tilefoundry/runtime/common/config.h>

namespace tilefoundry {
namespace ops {
namespace detail {

struct no_fast_path {
  template <class... Args>
  TILEFOUNDRY_DEVICE bool operator()(Args const&...) const {
    return false;
  }
};

}  // namespace detail
}  // namespace ops
}  // namespace tilefoundry

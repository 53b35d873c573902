// ops::copy_async on the CPU target: the copy completes at once, so commit and wait have
// nothing left to order.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/cpu/ops/copy.h>

namespace tilefoundry {
namespace ops {

template <class TSrc, class TDst>
inline void copy_async(TSrc const& src, TDst&& dst) {
  ops::copy(src, dst);
}

inline void cp_async_commit() {}

template <int N = 0>
inline void cp_async_wait() {}

}  // namespace ops
}  // namespace tilefoundry

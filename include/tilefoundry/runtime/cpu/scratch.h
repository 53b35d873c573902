// Host storage for a buffer of one CTA whose size is known only at launch (an extent that is a
// DimVar), or that is too large for the host thread's stack, and for a stage's temporaries between
// launches. Registers need sizes known at compile time; on the CPU target such a buffer lives on
// the heap instead (host_buffer: memory the next call reuses), allocated once per CTA and viewed
// through tilefoundry::make_tensor(iterator, shard_layout).
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/host_buffer.h>

#include <cstdint>

namespace tilefoundry {
namespace cpu {

template <class T>
class scratch {
 public:
  // Uninitialised, as registers are: every element is written before it is read.
  explicit scratch(std::int64_t n) : data_(n > 0 ? n : 1) {}
  T* data() { return data_.data(); }

 private:
  host_buffer<T> data_;
};

}  // namespace cpu
}  // namespace tilefoundry

// Host storage for a buffer of one CTA whose size is known only at launch (an extent that is a
// DimVar), or that is too large for the host thread's stack. Registers need sizes known at compile
// time; on the CPU target such a buffer lives on the heap instead, allocated once per CTA and
// viewed through tilefoundry::make_tensor(iterator, shard_layout).
#pragma once

#include <tilefoundry/runtime/common/config.h>

#include <cstdint>
#include <memory>

namespace tilefoundry {
namespace cpu {

template <class T>
class scratch {
 public:
  // Uninitialised, as registers are: every element is written before it is read.
  explicit scratch(std::int64_t n) : data_(new T[static_cast<std::size_t>(n > 0 ? n : 1)]) {}
  T* data() { return data_.get(); }

 private:
  std::unique_ptr<T[]> data_;
};

}  // namespace cpu
}  // namespace tilefoundry

// Host storage for a buffer of one CTA whose size is known only at launch (an extent that is a
// DimVar). Registers need sizes known at compile time; on the CPU target such a buffer lives on the
// heap instead, allocated once per CTA and viewed through make_shard_view.
#pragma once

#include <tilefoundry/runtime/common/config.h>

#include <cstdint>
#include <vector>

namespace tilefoundry {
namespace cpu {

template <class T>
class scratch {
 public:
  explicit scratch(std::int64_t n) : data_(static_cast<std::size_t>(n > 0 ? n : 0)) {}
  T* data() { return data_.data(); }

 private:
  std::vector<T> data_;
};

}  // namespace cpu
}  // namespace tilefoundry

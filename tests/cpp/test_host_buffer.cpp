// host_buffer (common/host_buffer.h): a kernel's buffer for one call, from a pool that keeps the
// memory of buffers given back, so that the next call reuses it.
#include <tilefoundry/runtime.h>

#include <cstdint>

#include "test_util.h"

namespace {

using tilefoundry::host_buffer;

TEST(HostBuffer, AGivenBackBlockServesTheNextBufferOfItsSize) {
  void* first = nullptr;
  {
    host_buffer<float> a(300000);  // 1.2 MB: past the C library's mmap threshold
    first = a.data();
    a[299999] = 1.0f;
  }
  host_buffer<float> b(300000);
  EXPECT_EQ(static_cast<void*>(b.data()), first);
  host_buffer<float> c(300000);  // while b holds it: another block
  EXPECT_TRUE(static_cast<void*>(c.data()) != first);
}

TEST(HostBuffer, ABlockMoreThanTwiceTheSizeIsNotTaken) {
  void* big = nullptr;
  {
    host_buffer<char> a(8 << 20);
    big = a.data();
  }
  host_buffer<char> small(1 << 20);  // 1 MB: the kept 8 MB block would waste more than it holds
  EXPECT_TRUE(static_cast<void*>(small.data()) != big);
  host_buffer<char> again(6 << 20);  // at most twice: the kept block
  EXPECT_EQ(static_cast<void*>(again.data()), big);
}

TEST(HostBuffer, ZeroedAndAlignedAsAsked) {  // a small block (the C library's heap) and a kept one
  for (std::int64_t n : {4096, 1 << 20}) {
    {
      host_buffer<std::int64_t> dirty(n);
      for (std::size_t i = 0; i < dirty.size(); ++i) dirty[i] = -1;
    }
    host_buffer<std::int64_t> clean(n, /*zeroed=*/true);  // perhaps the dirty block: zeroed
    EXPECT_EQ(clean.size(), std::size_t(n));
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(clean.data()) % 64, std::uintptr_t(0));
    for (std::size_t i = 0; i < clean.size(); ++i) EXPECT_EQ(clean[i], 0);
  }
  host_buffer<float> none(0);
  EXPECT_TRUE(none.empty());
  EXPECT_TRUE(none.data() != nullptr);
}

}  // namespace

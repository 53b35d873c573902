// host_buffer<T>: host memory a kernel's buffer takes for one call (a stage's temporary between
// launches, a packed panel, a slice's transposed keys), taken from a pool that keeps the memory of
// buffers given back, so that the next call of a kernel reuses it instead of asking the system
// again. A fresh block of more than the C library's mmap threshold (128 KiB at first) comes from
// the kernel zero-filled, a page fault a page, and goes back to it when freed. Measured on this
// project's 2-core machine (2026-12-05): a compiled several-token MoE (hidden 1024, 32 experts of
// 256, 4 a token, 512 tokens: 50 MB of stage temporaries a call) 39.7 -> 19.9 ms (torch's slot
// 25.8); SmolLM2-135M's 500-token prefill through the compiled slots, medians of 7 alternating
// with torch's slots, 562 -> 546 ms (torch's 601 and 612 in the two runs).
//
// The pool keeps at most kKeptBytes of free blocks of kSmallest bytes or more (the largest it
// would keep is half of that); a buffer takes the smallest kept block of at least its size and at
// most twice it, else a new one (64-byte aligned, sizes in whole 4 KiB pages). Thread-safe: the
// host threads of a parallel launch take and give back buffers of their own. Each compiled module
// (its own shared library, its symbols hidden) has a pool of its own: what a process keeps is, per
// module, the most its buffers took at once in a call, up to kKeptBytes. The memory is
// uninitialised unless asked zeroed, as registers are.
#pragma once

#include <tilefoundry/runtime/common/config.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>

namespace tilefoundry {
namespace detail {

class host_pool {
 public:
  static constexpr std::size_t kKeptBytes = std::size_t(512) << 20;  // free blocks kept, at most
  static constexpr std::size_t kPage = 4096;
  // Smaller blocks come from the C library's heap, which keeps them itself, without the pool's
  // lock: the 2 threads of SmolLM2-135M's attention over 64 tokens (12 CTAs, 5 buffers each)
  // took 0.08 ms with the heap's, 0.12-0.14 through the pool.
  static constexpr std::size_t kSmallest = std::size_t(64) << 10;

  /// A block of at least `bytes` (rounded up to whole pages), and its size.
  static void* take(std::size_t bytes, std::size_t& size) {
    size = (bytes + kPage - 1) / kPage * kPage;
    if (size == 0) size = kPage;
    if (size >= kSmallest) {
      std::lock_guard<std::mutex> lock(instance().mutex_);
      auto& blocks = instance().free_;
      auto it = blocks.lower_bound(size);
      if (it != blocks.end() && it->first <= 2 * size) {
        size = it->first;
        void* const block = it->second;
        instance().kept_ -= size;
        blocks.erase(it);
        return block;
      }
    }
    void* const block = std::aligned_alloc(64, size);
    if (block == nullptr) throw std::bad_alloc();
    return block;
  }

  /// `block` (of `size` bytes, from take) kept for a later take, or freed where the pool is full.
  static void give(void* block, std::size_t size) {
    if (block == nullptr) return;
    if (size >= kSmallest) {
      std::lock_guard<std::mutex> lock(instance().mutex_);
      if (size <= kKeptBytes / 2 && instance().kept_ + size <= kKeptBytes) {
        instance().free_.emplace(size, block);
        instance().kept_ += size;
        return;
      }
    }
    std::free(block);
  }

  host_pool(host_pool const&) = delete;
  host_pool& operator=(host_pool const&) = delete;

 private:
  host_pool() = default;
  ~host_pool() {
    for (auto& kept : free_) std::free(kept.second);
  }
  static host_pool& instance() {
    static host_pool pool;
    return pool;
  }

  std::mutex mutex_;
  std::multimap<std::size_t, void*> free_;  // kept blocks by size
  std::size_t kept_ = 0;
};

}  // namespace detail

/// `n` elements of T (trivially constructible: uninitialised, or zeroed where asked) for one call
/// of a kernel, from the host pool (detail::host_pool) and given back to it when destroyed.
template <class T>
class host_buffer {
 public:
  explicit host_buffer(std::int64_t n, bool zeroed = false)
      : count_(n > 0 ? std::size_t(n) : 0),
        data_(static_cast<T*>(detail::host_pool::take(count_ * sizeof(T), bytes_))) {
    if (zeroed) std::memset(static_cast<void*>(data_), 0, count_ * sizeof(T));
  }
  ~host_buffer() { detail::host_pool::give(data_, bytes_); }
  host_buffer(host_buffer const&) = delete;
  host_buffer& operator=(host_buffer const&) = delete;

  T* data() { return data_; }
  T const* data() const { return data_; }
  std::size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  T& operator[](std::size_t i) { return data_[i]; }
  T const& operator[](std::size_t i) const { return data_[i]; }

 private:
  std::size_t count_;
  std::size_t bytes_ = 0;  // the block's size (set by take)
  T* data_;
};

}  // namespace tilefoundry

// Helpers shared by the CPU-target tests: fresh random data per run (the seed is reported on a
// failure) and a host CTA collector.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace tftest {

inline std::uint32_t fresh_seed() {
  static std::random_device device;
  return device();
}

struct Random {
  std::uint32_t seed = fresh_seed();
  std::mt19937 engine{seed};
  std::string trace() const { return "random seed " + std::to_string(seed); }
  std::vector<float> floats(int n, float lo = -4.0f, float hi = 4.0f) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = d(engine);
    return v;
  }
  std::vector<int> ints(int n, int lo, int hi) {
    std::uniform_int_distribution<int> d(lo, hi);
    std::vector<int> v(n);
    for (auto& x : v) x = d(engine);
    return v;
  }
};

}  // namespace tftest

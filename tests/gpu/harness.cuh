// A small harness for the GPU test programs: checked CUDA calls, fresh random inputs (the seed
// is printed), poisoned outputs and a count of failed checks that becomes the exit status.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#define TF_CUDA(call)                                                    \
  do {                                                                   \
    cudaError_t const tf_err = (call);                                   \
    if (tf_err != cudaSuccess) {                                         \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
                   cudaGetErrorString(tf_err));                          \
      std::exit(2);                                                      \
    }                                                                    \
  } while (0)

// After every launch: the launch itself, then its execution.
#define TF_LAUNCHED()                 \
  do {                                \
    TF_CUDA(cudaGetLastError());      \
    TF_CUDA(cudaDeviceSynchronize()); \
  } while (0)

namespace tfgpu {

struct Suite {
  std::string name;
  int cases = 0;
  int failed = 0;
  std::uint32_t seed = std::random_device{}();
  std::mt19937 rng{seed};

  explicit Suite(std::string n) : name(std::move(n)) {
    std::printf("[%s] random seed %u\n", name.c_str(), seed);
  }

  // One named case: ok or not, with a note printed either way.
  void check(bool ok, std::string const& what, std::string const& note = "") {
    ++cases;
    if (!ok) ++failed;
    std::printf("[%s] %-4s %s%s%s\n", name.c_str(), ok ? "ok" : "FAIL", what.c_str(),
                note.empty() ? "" : "  ", note.c_str());
  }

  int finish() const {
    std::printf("[%s] %d/%d cases passed\n", name.c_str(), cases - failed, cases);
    return failed == 0 ? 0 : 1;
  }

  std::vector<float> uniform(std::size_t n, float lo = -4.0f, float hi = 4.0f) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
  }
};

template <class T>
struct DeviceBuffer {
  T* ptr = nullptr;
  std::size_t n = 0;
  explicit DeviceBuffer(std::size_t count) : n(count) { TF_CUDA(cudaMalloc(&ptr, n * sizeof(T))); }
  DeviceBuffer(DeviceBuffer const&) = delete;
  DeviceBuffer& operator=(DeviceBuffer const&) = delete;
  ~DeviceBuffer() { cudaFree(ptr); }
  void upload(std::vector<T> const& v) {
    TF_CUDA(cudaMemcpy(ptr, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> v(n);
    TF_CUDA(cudaMemcpy(v.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }
  // Every byte 0xFF: NaN for floats, -1 for integers; an unwritten output cannot pass.
  void poison() { TF_CUDA(cudaMemset(ptr, 0xFF, n * sizeof(T))); }
};

// Largest |got - want| / (atol + rtol |want|); <= 1 passes; a zero tolerance asks for equality.
// NaN anywhere it is not expected fails.
inline double worst_error(std::vector<double> const& got, std::vector<double> const& want,
                          double rtol, double atol) {
  double worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i]) != std::isnan(got[i])) return INFINITY;
    if (std::isnan(want[i])) continue;
    // Equal values (infinities included) are no error, also under a zero tolerance (an exact
    // check), where the quotient below would be 0 / 0.
    if (got[i] == want[i]) continue;
    double const e = std::fabs(got[i] - want[i]) / (atol + rtol * std::fabs(want[i]));
    if (!(e <= worst)) worst = e;
  }
  return worst;
}

inline std::string describe(double worst) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "worst error %.3g of tolerance", worst);
  return buf;
}

}  // namespace tfgpu

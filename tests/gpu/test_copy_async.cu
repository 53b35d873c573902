// ops::copy_async on the GPU: gmem -> smem in 16-, 8- and 4-byte cp.async words and the plain
// path (unaligned, 1-byte elements, and the pre-sm_80 fallback called directly), ordered by
// cp_async_commit / cp_async_wait and a CTA barrier; and two groups in flight at once.
#include <tilefoundry/runtime.h>

TILEFOUNDRY_STATIC_PROGRAM_SHAPE(thread, 128);

#include <cstring>

#include "harness.cuh"

using namespace tilefoundry;
using cute::Int;
using TS = TopologyScope;
using bf16 = cutlass::bfloat16_t;

constexpr int kThreads = 128;

// Each thread stages Per elements of x (from element offset Offset) into its slice of smem;
// after the wait and a barrier, each thread writes a neighbour's slice out, so the data must have
// landed in shared memory and be visible to other threads.
template <class T, int Per, bool Fallback>
__global__ void stage(T const* x, T* y, int offset) {
  __shared__ alignas(16) T buf[kThreads * Per];
  int const t = program_id<TS::thread>(), c = program_id<TS::cta>();
  T const* row = x + offset + c * kThreads * Per;
  auto src = cute::make_tensor(cute::make_gmem_ptr(row + t * Per), cute::make_shape(Int<Per>{}));
  auto dst = cute::make_tensor(cute::make_smem_ptr(&buf[t * Per]), cute::make_shape(Int<Per>{}));
  if constexpr (Fallback) {
    ops::detail::copy_async_plain(src, dst);
  } else {
    ops::copy_async(src, dst);
  }
  ops::cp_async_commit();
  ops::cp_async_wait<0>();
  ops::sync<ops::SyncKind::cta>();
  int const peer = (t + 1) % kThreads;
  for (int i = 0; i < Per; ++i) y[c * kThreads * Per + t * Per + i] = buf[peer * Per + i];
}

// Two groups in flight: after wait<1> the first group is complete, after wait<0> both are.
__global__ void two_groups(float const* x, float* y) {
  __shared__ alignas(16) float a[kThreads * 4];
  __shared__ alignas(16) float b[kThreads * 4];
  int const t = program_id<TS::thread>();
  auto g = [&](int base) {
    return cute::make_tensor(cute::make_gmem_ptr(x + base + t * 4), cute::make_shape(Int<4>{}));
  };
  auto s = [&](float* p) {
    return cute::make_tensor(cute::make_smem_ptr(p + t * 4), cute::make_shape(Int<4>{}));
  };
  ops::copy_async(g(0), s(a));
  ops::cp_async_commit();
  ops::copy_async(g(kThreads * 4), s(b));
  ops::cp_async_commit();
  ops::cp_async_wait<1>();
  ops::sync<ops::SyncKind::cta>();
  for (int i = 0; i < 4; ++i) y[t * 4 + i] = a[((t + 1) % kThreads) * 4 + i];
  ops::cp_async_wait<0>();
  ops::sync<ops::SyncKind::cta>();
  for (int i = 0; i < 4; ++i) y[kThreads * 4 + t * 4 + i] = b[((t + 1) % kThreads) * 4 + i];
}

template <class T, int Per, bool Fallback = false>
void check_stage(tfgpu::Suite& suite, int offset, char const* what) {
  int const ctas = 40, n = ctas * kThreads * Per;
  std::vector<T> x(n + 16);
  auto f = suite.uniform(n + 16, -100, 100);
  for (int i = 0; i < n + 16; ++i) x[i] = T(f[i]);
  tfgpu::DeviceBuffer<T> dx(n + 16), dy(n);
  dx.upload(x);
  dy.poison();
  stage<T, Per, Fallback><<<ctas, kThreads>>>(dx.ptr, dy.ptr, offset);
  TF_LAUNCHED();
  auto y = dy.download();
  bool ok = true;
  for (int c = 0; c < ctas; ++c)
    for (int t = 0; t < kThreads; ++t)
      for (int i = 0; i < Per; ++i) {
        int const from = offset + c * kThreads * Per + ((t + 1) % kThreads) * Per + i;
        ok = ok && std::memcmp(&y[c * kThreads * Per + t * Per + i], &x[from], sizeof(T)) == 0;
      }
  suite.check(ok, what);
}

int main() {
  tfgpu::Suite suite("copy_async");
  check_stage<float, 4>(suite, 0, "f32 x4, aligned: 16-byte cp.async.cg into smem");
  check_stage<float, 8>(suite, 0, "f32 x8, aligned: two 16-byte words per thread");
  check_stage<bf16, 4>(suite, 0, "bf16 x4, aligned: 8-byte cp.async.ca");
  check_stage<bf16, 2>(suite, 0, "bf16 x2, aligned: 4-byte cp.async.ca");
  check_stage<bf16, 8>(suite, 2, "bf16 x8 at a 4-byte offset: 4-byte words");
  check_stage<float, 4>(suite, 1, "f32 x4 at a 4-byte offset: plain copy");
  check_stage<unsigned char, 3>(suite, 0, "1-byte elements x3: plain copy");
  check_stage<float, 4, true>(suite, 0, "the below-sm_80 plain fallback, called directly");
  {
    auto x = suite.uniform(2 * kThreads * 4);
    tfgpu::DeviceBuffer<float> dx(x.size()), dy(x.size());
    dx.upload(x);
    dy.poison();
    two_groups<<<1, kThreads>>>(dx.ptr, dy.ptr);
    TF_LAUNCHED();
    auto y = dy.download();
    bool ok = true;
    for (int part = 0; part < 2; ++part)
      for (int t = 0; t < kThreads; ++t)
        for (int i = 0; i < 4; ++i)
          ok = ok && y[part * kThreads * 4 + t * 4 + i] ==
                         x[part * kThreads * 4 + ((t + 1) % kThreads) * 4 + i];
    suite.check(ok, "two commit groups: wait<1> completes the first, wait<0> the second");
  }
  return suite.finish();
}

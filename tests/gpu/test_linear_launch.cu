// A translation unit that declares its launches one-dimensional (TILEFOUNDRY_LINEAR_LAUNCH, as
// generated code does): program ids are blockIdx.x and threadIdx.x, over a grid wider than a
// second dimension could hold (65535), and a thread mesh's local_index splits them as without it.
#define TILEFOUNDRY_LINEAR_LAUNCH
#include <tilefoundry/runtime.h>

#include "harness.cuh"

using namespace tilefoundry;
using cute::Int;
using TS = TopologyScope;

// One int per CTA: its program_id; thread 0 writes it after checking every thread of the CTA.
__global__ void ids(int* cta_ids, int* thread_errors) {
  int const t = program_id<TS::thread>();
  if (t != int(threadIdx.x)) atomicAdd(thread_errors, 1);
  if (t == 0) cta_ids[blockIdx.x] = program_id<TS::cta>();
}

// The thread mesh generated row kernels use, (4, 32):(32, 1): warp and lane of the thread id.
__global__ void mesh_coords(int* out) {
  auto mesh = make_mesh<TS::thread>(cute::make_layout(cute::make_shape(Int<4>{}, Int<32>{}),
                                                      cute::make_stride(Int<32>{}, Int<1>{})));
  auto c = mesh.local_index();
  int const g = int(blockIdx.x) * 128 + int(threadIdx.x);
  out[2 * g + 0] = cute::get<0>(c);
  out[2 * g + 1] = cute::get<1>(c);
}

int main() {
  tfgpu::Suite suite("linear_launch");
  {
    int const G = 70001, threads = 96;
    tfgpu::DeviceBuffer<int> cta_ids(G), errors(1);
    cta_ids.poison();
    TF_CUDA(cudaMemset(errors.ptr, 0, sizeof(int)));
    ids<<<G, threads>>>(cta_ids.ptr, errors.ptr);
    TF_LAUNCHED();
    auto h = cta_ids.download();
    bool ok = true;
    for (int c = 0; c < G; ++c) ok = ok && h[c] == c;
    suite.check(ok && errors.download()[0] == 0,
                "program_id<cta> is blockIdx.x over 70001 CTAs, program_id<thread> threadIdx.x");
  }
  {
    int const G = 9;
    tfgpu::DeviceBuffer<int> out(G * 128 * 2);
    out.poison();
    mesh_coords<<<G, 128>>>(out.ptr);
    TF_LAUNCHED();
    auto h = out.download();
    bool ok = true;
    for (int c = 0; c < G; ++c)
      for (int t = 0; t < 128; ++t) {
        int const g = c * 128 + t;
        ok = ok && h[2 * g] == t / 32 && h[2 * g + 1] == t % 32;
      }
    suite.check(ok, "Mesh::local_index of a (4, 32) thread mesh in a linear launch");
  }
  return suite.finish();
}

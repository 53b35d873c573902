// ops::sync on the GPU: CTA, full warp, masked warp and named barriers ordering shared-memory
// exchanges, and the grid barrier across every co-resident CTA, reused over many rounds and a
// second launch on the same, never re-zeroed, counter pair.
#include <tilefoundry/runtime.h>

TILEFOUNDRY_STATIC_PROGRAM_SHAPE(thread, 128);

#include "harness.cuh"

using namespace tilefoundry;
using TS = TopologyScope;
using ops::SyncKind;

constexpr int kThreads = 128;
constexpr int kRounds = 64;

// Each round every participant writes its slot, the barrier orders it, and each reads a slot
// written by another participant of the same barrier. A wrong value counts as an error.
__global__ void cta_barrier(int* errors) {
  __shared__ int slot[kThreads];
  int const t = program_id<TS::thread>();
  int bad = 0;
  for (int r = 0; r < kRounds; ++r) {
    slot[t] = r * 1000 + t;
    ops::sync<SyncKind::cta>();
    int const peer = (t + 37 + r) % kThreads;
    bad += slot[peer] != r * 1000 + peer;
    ops::sync<SyncKind::cta>();
  }
  atomicAdd(errors, bad);
}

__global__ void warp_barrier(int* errors) {
  __shared__ int slot[kThreads];
  int const t = program_id<TS::thread>(), warp = t / 32, lane = t % 32;
  int bad = 0;
  for (int r = 0; r < kRounds; ++r) {
    slot[t] = r * 1000 + t;
    ops::sync<SyncKind::warp>();
    int const peer = warp * 32 + (lane + 5 + r) % 32;
    bad += slot[peer] != r * 1000 + peer;
    ops::sync<SyncKind::warp>();
  }
  atomicAdd(errors, bad);
}

// Lanes 0-15 exchange under the mask; lanes 16-31 pass through the same call.
__global__ void masked_warp_barrier(int* errors) {
  __shared__ int slot[kThreads];
  int const t = program_id<TS::thread>(), warp = t / 32, lane = t % 32;
  int bad = 0;
  for (int r = 0; r < kRounds; ++r) {
    if (lane < 16) slot[t] = r * 1000 + t;
    ops::sync<SyncKind::warp_masked, 0, 0, 0x0000ffffu>();
    if (lane < 16) {
      int const peer = warp * 32 + (lane + 3 + r) % 16;
      bad += slot[peer] != r * 1000 + peer;
    }
    ops::sync<SyncKind::warp_masked, 0, 0, 0x0000ffffu>();
  }
  atomicAdd(errors, bad);
}

// Two groups of 64 threads on their own hardware barriers (1 and 2).
__global__ void named_barriers(int* errors) {
  __shared__ int slot[kThreads];
  int const t = program_id<TS::thread>();
  int const base = t < 64 ? 0 : 64;
  int bad = 0;
  for (int r = 0; r < kRounds; ++r) {
    slot[t] = r * 1000 + t;
    ops::sync<SyncKind::named, 0, 64, 0u, 1>();
    ops::sync<SyncKind::named, 64, 64, 0u, 2>();
    int const peer = base + (t - base + 29 + r) % 64;
    bad += slot[peer] != r * 1000 + peer;
    ops::sync<SyncKind::named, 0, 64, 0u, 1>();
    ops::sync<SyncKind::named, 64, 64, 0u, 2>();
  }
  atomicAdd(errors, bad);
}

// Each round CTA c publishes a value, the grid barrier orders it, and CTA c reads CTA c+1's and
// c+G/2's values; a second barrier keeps the next round's writes after these reads.
__global__ void grid_barrier(unsigned int* grid_bar, int* board, int* errors, int launch) {
  int const c = program_id<TS::cta>(), g = program_dim<TS::cta>();
  int const t = program_id<TS::thread>();
  int bad = 0;
  for (int r = 0; r < kRounds; ++r) {
    int const stamp = (launch * kRounds + r) * 100000;
    if (t == 0) board[c] = stamp + c;
    ops::sync<SyncKind::grid>(grid_bar);
    if (t == 0) {
      int const a = (c + 1) % g, b = (c + g / 2) % g;
      bad += board[a] != stamp + a;  // plain loads: the barrier must make the writes visible
      bad += board[b] != stamp + b;
    }
    ops::sync<SyncKind::grid>(grid_bar);
  }
  if (t == 0) atomicAdd(errors, bad);
}

template <class Kernel>
int run_block_kernel(Kernel k, int ctas) {
  tfgpu::DeviceBuffer<int> errors(1);
  TF_CUDA(cudaMemset(errors.ptr, 0, sizeof(int)));
  k<<<ctas, kThreads>>>(errors.ptr);
  TF_LAUNCHED();
  return errors.download()[0];
}

int main() {
  tfgpu::Suite suite("sync");
  int const ctas = 64;
  int e = run_block_kernel(cta_barrier, ctas);
  suite.check(e == 0, "sync<cta>: 64 rounds of smem exchange across 4 warps",
              std::to_string(e) + " errors");
  e = run_block_kernel(warp_barrier, ctas);
  suite.check(e == 0, "sync<warp>: exchange within each warp", std::to_string(e) + " errors");
  e = run_block_kernel(masked_warp_barrier, ctas);
  suite.check(e == 0, "sync<warp_masked 0x0000ffff>: lanes 0-15 exchange, 16-31 pass through",
              std::to_string(e) + " errors");
  e = run_block_kernel(named_barriers, ctas);
  suite.check(e == 0, "sync<named>: two 64-thread groups on barriers 1 and 2",
              std::to_string(e) + " errors");

  int device = 0, sms = 0, per_sm = 0, cooperative = 0;
  TF_CUDA(cudaGetDevice(&device));
  TF_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  TF_CUDA(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device));
  TF_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, grid_barrier, kThreads, 0));
  int const g = sms * per_sm;  // every CTA that can be resident at once
  std::printf("[sync] grid barrier over %d CTAs (%d SMs x %d), cooperative launch %s\n", g, sms,
              per_sm, cooperative ? "supported" : "unsupported");
  tfgpu::DeviceBuffer<unsigned int> bar(2);
  tfgpu::DeviceBuffer<int> board(g), errors(1);
  TF_CUDA(cudaMemset(bar.ptr, 0, 2 * sizeof(unsigned int)));  // zeroed once, before first use
  TF_CUDA(cudaMemset(errors.ptr, 0, sizeof(int)));
  for (int launch = 0; launch < 2; ++launch) {
    void* args[] = {&bar.ptr, &board.ptr, &errors.ptr, &launch};
    TF_CUDA(cudaLaunchCooperativeKernel((void*)grid_barrier, dim3(g), dim3(kThreads), args, 0, 0));
    TF_LAUNCHED();
    auto b = bar.download();
    int const errs = errors.download()[0];
    suite.check(errs == 0 && b[0] == 0 && b[1] == unsigned(2 * kRounds * (launch + 1)),
                "sync<grid> launch " + std::to_string(launch + 1) + ": " +
                    std::to_string(2 * kRounds) + " barriers over all co-resident CTAs",
                std::to_string(errs) + " errors, counter " + std::to_string(b[0]) + ", round " +
                    std::to_string(b[1]));
  }
  return suite.finish();
}

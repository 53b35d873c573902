// What one launch that copies N bytes reaches at all, by launch shape: the ceiling for a row kernel
// of that size (bench/kernels.py), timed the way that bench times it. Each shape is a CUDA graph of
// 20 back-to-back launches cycling through copies of the buffers (their total at least four times
// L2), the median of 30 replays over 20; the reference is a 1 GiB cudaMemcpy timed with events,
// as bench/graph_timing.py's copy_bandwidth. Bandwidth counts bytes read plus bytes written.
//
// Shapes: one-shot kernels (a CTA of Threads threads, each moving Vectors 16-byte words, all loads
// before the stores), grid-stride kernels over a few CTAs an SM, and a memcpy node. Plain CUDA on
// purpose: this measures the machine, not the runtime.
//
//   copy_ceiling [--json PATH] [MiB moved ...]     (default 32 64 128 512)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

void check(cudaError_t e, char const* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "copy_ceiling: %s failed: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

template <int Threads, int Vectors>
__global__ void __launch_bounds__(Threads)
    one_shot(uint4 const* __restrict__ in, uint4* __restrict__ out) {
  size_t const base = size_t(blockIdx.x) * Threads * Vectors + threadIdx.x;
  uint4 r[Vectors];
#pragma unroll
  for (int v = 0; v < Vectors; ++v) r[v] = in[base + v * Threads];
#pragma unroll
  for (int v = 0; v < Vectors; ++v) out[base + v * Threads] = r[v];
}

template <int Threads, int Vectors>
__global__ void __launch_bounds__(Threads)
    grid_stride(uint4 const* __restrict__ in, uint4* __restrict__ out, size_t words) {
  size_t const step = size_t(gridDim.x) * Threads * Vectors;
  for (size_t base = size_t(blockIdx.x) * Threads * Vectors + threadIdx.x; base < words;
       base += step) {
    uint4 r[Vectors];
#pragma unroll
    for (int v = 0; v < Vectors; ++v) r[v] = in[base + v * Threads];
#pragma unroll
    for (int v = 0; v < Vectors; ++v) out[base + v * Threads] = r[v];
  }
}

using Launch = std::function<void(int copy, cudaStream_t stream)>;

// Median microseconds of one launch, over replays of a graph of `launches` launches.
float time_graph(Launch const& launch, int copies, int launches = 20, int reps = 30) {
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  for (int i = 0; i < std::min(copies, 3); ++i) launch(i, stream);
  check(cudaStreamSynchronize(stream), "warm-up");
  cudaGraph_t graph;
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
  for (int j = 0; j < launches; ++j) launch(j % copies, stream);
  check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  cudaGraphExec_t exec;
  check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  cudaEvent_t start, end;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&end), "cudaEventCreate");
  check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
  std::vector<float> us;
  for (int k = 0; k < reps; ++k) {
    check(cudaEventRecord(start, stream), "cudaEventRecord");
    check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
    check(cudaEventRecord(end, stream), "cudaEventRecord");
    check(cudaEventSynchronize(end), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, end), "cudaEventElapsedTime");
    us.push_back(ms * 1e3f / float(launches));
  }
  std::sort(us.begin(), us.end());
  check(cudaEventDestroy(start), "cudaEventDestroy");
  check(cudaEventDestroy(end), "cudaEventDestroy");
  check(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
  check(cudaGraphDestroy(graph), "cudaGraphDestroy");
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  return us[us.size() / 2];
}

// Bytes read plus written per second by a 1 GiB device-to-device cudaMemcpy, median of 20.
double reference_copy() {
  size_t const bytes = size_t(1) << 30;
  void *src, *dst;
  check(cudaMalloc(&src, bytes), "cudaMalloc");
  check(cudaMalloc(&dst, bytes), "cudaMalloc");
  check(cudaMemset(src, 1, bytes), "cudaMemset");
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy");
  cudaEvent_t start, end;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&end), "cudaEventCreate");
  std::vector<float> ms;
  for (int k = 0; k < 20; ++k) {
    check(cudaEventRecord(start), "cudaEventRecord");
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpyAsync");
    check(cudaEventRecord(end), "cudaEventRecord");
    check(cudaEventSynchronize(end), "cudaEventSynchronize");
    float t = 0;
    check(cudaEventElapsedTime(&t, start, end), "cudaEventElapsedTime");
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  check(cudaEventDestroy(start), "cudaEventDestroy");
  check(cudaEventDestroy(end), "cudaEventDestroy");
  check(cudaFree(src), "cudaFree");
  check(cudaFree(dst), "cudaFree");
  return 2.0 * double(bytes) / (ms[ms.size() / 2] * 1e-3);
}

struct Shape {
  std::string name;
  std::function<void(uint4 const*, uint4*, size_t words, cudaStream_t)> run;
};

template <int Threads, int Vectors>
Shape one_shot_shape() {
  return {"one-shot " + std::to_string(Threads) + " threads x " + std::to_string(Vectors),
          [](uint4 const* in, uint4* out, size_t words, cudaStream_t s) {
            one_shot<Threads, Vectors>
                <<<unsigned(words / (Threads * Vectors)), Threads, 0, s>>>(in, out);
          }};
}

template <int Threads, int Vectors>
Shape grid_stride_shape(int sms, int per_sm) {
  return {"grid-stride " + std::to_string(Threads) + " threads x " + std::to_string(Vectors) +
              ", " + std::to_string(per_sm) + " CTAs an SM",
          [sms, per_sm](uint4 const* in, uint4* out, size_t words, cudaStream_t s) {
            grid_stride<Threads, Vectors><<<sms * per_sm, Threads, 0, s>>>(in, out, words);
          }};
}

}  // namespace

int main(int argc, char** argv) {
  char const* json = nullptr;
  std::vector<int> mib;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
      json = argv[++i];
    } else if (std::atoi(argv[i]) >= 2) {
      mib.push_back(std::atoi(argv[i]));
    } else {
      std::fprintf(stderr,
                   "usage: copy_ceiling [--json PATH] [MiB moved ...]: '%s' is not a size of at "
                   "least 2 MiB\n",
                   argv[i]);
      return 2;
    }
  }
  if (mib.empty()) mib = {32, 64, 128, 512};
  int device = 0;
  cudaDeviceProp prop;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  int const sms = prop.multiProcessorCount;
  double const ref = reference_copy();
  std::printf("%s: 1 GiB cudaMemcpy %.0f GB/s (bytes read + written)\n", prop.name, ref / 1e9);
  std::vector<Shape> shapes = {
      one_shot_shape<128, 1>(),
      one_shot_shape<128, 2>(),
      one_shot_shape<256, 1>(),
      one_shot_shape<256, 2>(),
      one_shot_shape<256, 4>(),
      one_shot_shape<512, 2>(),
      one_shot_shape<1024, 1>(),
      grid_stride_shape<256, 4>(sms, 8),
      grid_stride_shape<512, 2>(sms, 4),
      grid_stride_shape<1024, 4>(sms, 2),
      {"cudaMemcpyAsync (a memcpy node)",
       [](uint4 const* in, uint4* out, size_t words, cudaStream_t s) {
         check(cudaMemcpyAsync(out, in, words * 16, cudaMemcpyDeviceToDevice, s),
               "cudaMemcpyAsync");
       }}};
  std::string out = "{\n  \"device\": \"" + std::string(prop.name) +
                    "\",\n  \"reference_gbps\": " + std::to_string(ref / 1e9) + ",\n  \"sizes\": [";
  for (size_t m = 0; m < mib.size(); ++m) {
    size_t const half = size_t(mib[m]) << 19;  // bytes read = bytes written
    size_t const words = half / 16;
    int const copies =
        std::max(2, int(std::ceil(4.0 * double(prop.l2CacheSize) / (2.0 * double(half)))));
    std::vector<uint4*> src(copies), dst(copies);
    for (int c = 0; c < copies; ++c) {
      check(cudaMalloc(&src[c], half), "cudaMalloc");
      check(cudaMalloc(&dst[c], half), "cudaMalloc");
      check(cudaMemset(src[c], c + 1, half), "cudaMemset");
    }
    std::printf("%d MiB moved (%d copies):\n", mib[m], copies);
    out += std::string(m ? "," : "") + "\n    {\"mib_moved\": " + std::to_string(mib[m]) +
           ", \"us\": {";
    double best = 0;
    for (size_t k = 0; k < shapes.size(); ++k) {
      auto const& run = shapes[k].run;
      float const us =
          time_graph([&](int c, cudaStream_t s) { run(src[c], dst[c], words, s); }, copies);
      double const gbps = 2.0 * double(half) / (double(us) * 1e-6);
      best = std::max(best, gbps);
      std::printf("  %-44s %8.2f us %6.0f GB/s %5.1f%% of the 1 GiB copy\n", shapes[k].name.c_str(),
                  us, gbps / 1e9, 100 * gbps / ref);
      out += std::string(k ? ", " : "") + "\"" + shapes[k].name + "\": " + std::to_string(us);
    }
    check(cudaGetLastError(), "a launch");
    std::printf("  best: %.1f%% of the 1 GiB copy\n", 100 * best / ref);
    out += "}, \"best_fraction_of_reference\": " + std::to_string(best / ref) + "}";
    for (int c = 0; c < copies; ++c) {
      check(cudaFree(src[c]), "cudaFree");
      check(cudaFree(dst[c]), "cudaFree");
    }
  }
  out += "\n  ]\n}\n";
  if (json) {
    FILE* f = std::fopen(json, "w");
    if (!f) {
      std::fprintf(stderr, "copy_ceiling: cannot write %s\n", json);
      return 1;
    }
    std::fputs(out.c_str(), f);
    std::fclose(f);
  }
  return 0;
}

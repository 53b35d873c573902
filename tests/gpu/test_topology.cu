// Program queries, Mesh::local_index over the cta and thread levels, and local() across gmem,
// smem and rmem, on the GPU.
#include <tilefoundry/runtime.h>

TILEFOUNDRY_STATIC_PROGRAM_SHAPE(thread, 128);

#include "harness.cuh"

using namespace tilefoundry;
using cute::Int;
using TS = TopologyScope;

__global__ void queries(int* out) {
  static_assert(std::is_same_v<decltype(program_dim<TS::thread>()), Int<128>>);
  static_assert(std::is_same_v<decltype(program_shape<TS::thread>()), cute::Shape<Int<128>>>);
  int const g = program_id<TS::cta>() * 128 + program_id<TS::thread>();
  out[4 * g + 0] = program_id<TS::cta>();
  out[4 * g + 1] = program_dim<TS::cta>();
  out[4 * g + 2] = program_id<TS::thread>();
  out[4 * g + 3] =
      cute::get<0>(program_shape<TS::cta>()) * 100 + cute::get<1>(program_shape<TS::cta>());
}

// Variant 0: row-major compact (G,4,32):(128,32,1); 1: column-major compact (G,4,32):(1,G,4G);
// 2: per level (G,4,32):(1,32,1).
template <int Variant>
__global__ void mesh_coords(int* out) {
  int const G = program_dim<TS::cta>();
  auto layout = [&] {
    auto shape = cute::make_shape(G, Int<4>{}, Int<32>{});
    if constexpr (Variant == 0) {
      return cute::make_layout(shape, cute::make_stride(Int<128>{}, Int<32>{}, Int<1>{}));
    } else if constexpr (Variant == 1) {
      return cute::make_layout(shape, cute::make_stride(Int<1>{}, G, 4 * G));
    } else {
      return cute::make_layout(shape, cute::make_stride(Int<1>{}, Int<32>{}, Int<1>{}));
    }
  }();
  auto mesh = make_mesh<TS::cta, TS::thread>(layout);
  auto c = mesh.local_index();
  int const g = program_id<TS::cta>() * 128 + program_id<TS::thread>();
  out[3 * g + 0] = cute::get<0>(c);
  out[3 * g + 1] = cute::get<1>(c);
  out[3 * g + 2] = cute::get<2>(c);
}

// gmem: x (G,128,4) split over (cta, thread); each thread copies its local piece. w (4) is a
// broadcast everywhere; p is partial along the threads (each thread's own whole view).
__global__ void gmem_local(float const* x, float* y, float const* w, float* wsum, int* partial_ok) {
  int const G = program_dim<TS::cta>();
  auto mesh = make_mesh<TS::cta, TS::thread>(
      cute::make_layout(cute::make_shape(G, Int<128>{}), cute::make_stride(Int<1>{}, Int<1>{})));
  auto xl = cute::make_layout(cute::make_shape(G, Int<128>{}, Int<4>{}),
                              cute::make_stride(Int<512>{}, Int<4>{}, Int<1>{}));
  auto split = cute::make_tuple(shard::S<0>{}, shard::S<1>{});
  auto xs = make_shard_tensor(cute::make_tensor(cute::make_gmem_ptr(x), xl), xl,
                              make_shard_layout(xl, split, mesh));
  auto ys = make_shard_tensor(cute::make_tensor(cute::make_gmem_ptr(y), xl), xl,
                              make_shard_layout(xl, split, mesh));
  ops::copy(local(xs), local(ys));

  auto wl = cute::make_layout(cute::make_shape(Int<4>{}));
  auto ws =
      make_shard_tensor(cute::make_tensor(cute::make_gmem_ptr(w), wl), wl,
                        make_shard_layout(wl, cute::make_tuple(shard::B{}, shard::B{}), mesh));
  auto lw = local(ws);
  int const g = program_id<TS::cta>() * 128 + program_id<TS::thread>();
  wsum[g] = lw(0) + lw(1) + lw(2) + lw(3);

  auto ps = make_shard_tensor(
      cute::make_tensor(cute::make_gmem_ptr(w), wl), wl,
      make_shard_layout(wl, cute::make_tuple(shard::B{}, shard::P<ops::sum_op>{}), mesh));
  partial_ok[g] =
      cute::raw_pointer_cast(local(ps).data()) == w && decltype(cute::size(local(ps)))::value == 4;
}

// smem: (128,2) split over the threads; rmem: a (128,3) register fragment with stride 0 on the
// split mode, so each thread's view is its own registers.
__global__ void smem_rmem_local(float* out_smem, float* out_rmem) {
  __shared__ float buf[256];
  auto mesh = make_mesh<TS::thread>(cute::make_layout(cute::make_shape(Int<128>{})));
  auto sl = cute::make_layout(cute::make_shape(Int<128>{}, Int<2>{}),
                              cute::make_stride(Int<2>{}, Int<1>{}));
  auto ss = make_shard_tensor(cute::make_tensor(cute::make_smem_ptr(&buf[0]), sl), sl,
                              make_shard_layout(sl, cute::make_tuple(shard::S<0>{}), mesh));
  int const t = program_id<TS::thread>();
  auto mine = local(ss);
  static_assert(cute::is_smem<cute::remove_cvref_t<decltype(mine.data())>>::value);
  mine(0, 0) = 10.0f * t;
  mine(0, 1) = 10.0f * t + 1;
  ops::sync<ops::SyncKind::cta>();
  out_smem[2 * t] = buf[2 * ((t + 1) % 128)];
  out_smem[2 * t + 1] = buf[2 * ((t + 1) % 128) + 1];

  auto rl = cute::make_layout(cute::make_shape(Int<128>{}, Int<3>{}),
                              cute::make_stride(Int<0>{}, Int<1>{}));
  auto frag = make_shard_tensor(cute::make_tensor<float>(rl), rl,
                                make_shard_layout(rl, cute::make_tuple(shard::S<0>{}), mesh));
  auto r = local(frag);
  static_assert(cute::is_rmem<cute::remove_cvref_t<decltype(r.data())>>::value);
  for (int j = 0; j < 3; ++j) r(0, j) = float(t * 3 + j);
  for (int j = 0; j < 3; ++j) out_rmem[3 * t + j] = frag.engine(0, j);
}

int main() {
  tfgpu::Suite suite("topology");
  int const threads = 128;
  {
    dim3 grid(3, 2);
    tfgpu::DeviceBuffer<int> out(6 * threads * 4);
    out.poison();
    queries<<<grid, threads>>>(out.ptr);
    TF_LAUNCHED();
    auto h = out.download();
    bool ok = true;
    for (int by = 0; by < 2; ++by)
      for (int bx = 0; bx < 3; ++bx)
        for (int t = 0; t < threads; ++t) {
          int const c = bx + 3 * by, g = c * threads + t;
          ok = ok && h[4 * g] == c && h[4 * g + 1] == 6 && h[4 * g + 2] == t && h[4 * g + 3] == 302;
        }
    suite.check(ok, "program_id/dim/shape: 2-D launch-provided grid, static 128 threads");
  }
  for (int variant = 0; variant < 3; ++variant) {
    int const G = 5;
    tfgpu::DeviceBuffer<int> out(G * threads * 3);
    out.poison();
    if (variant == 0) mesh_coords<0><<<G, threads>>>(out.ptr);
    if (variant == 1) mesh_coords<1><<<G, threads>>>(out.ptr);
    if (variant == 2) mesh_coords<2><<<G, threads>>>(out.ptr);
    TF_LAUNCHED();
    auto h = out.download();
    bool ok = true;
    for (int c = 0; c < G; ++c)
      for (int t = 0; t < threads; ++t) {
        int const g = c * threads + t;
        int const w = variant == 1 ? t % 4 : t / 32;
        int const l = variant == 1 ? t / 4 : t % 32;
        ok = ok && h[3 * g] == c && h[3 * g + 1] == w && h[3 * g + 2] == l;
      }
    char const* names[] = {"row-major compact", "column-major compact", "per-level strides"};
    suite.check(ok, std::string("Mesh::local_index over (cta, thread), ") + names[variant]);
  }
  {
    int const G = 7;
    auto x = suite.uniform(G * 512);
    auto w = suite.uniform(4);
    tfgpu::DeviceBuffer<float> dx(x.size()), dy(x.size()), dw(4), dsum(G * threads);
    tfgpu::DeviceBuffer<int> dok(G * threads);
    dx.upload(x);
    dw.upload(w);
    dy.poison();
    dsum.poison();
    dok.poison();
    gmem_local<<<G, threads>>>(dx.ptr, dy.ptr, dw.ptr, dsum.ptr, dok.ptr);
    TF_LAUNCHED();
    suite.check(dy.download() == x, "local() split over (cta, thread) in gmem: every element once");
    auto s = dsum.download();
    float const want = w[0] + w[1] + w[2] + w[3];
    bool ok = true;
    for (float v : s) ok = ok && v == want;
    suite.check(ok, "local() broadcast: every thread sees the whole tensor");
    bool pok = true;
    for (int v : dok.download()) pok = pok && v == 1;
    suite.check(pok, "local() partial: offset 0, full shape");
  }
  {
    tfgpu::DeviceBuffer<float> ds(256), dr(384);
    ds.poison();
    dr.poison();
    smem_rmem_local<<<1, threads>>>(ds.ptr, dr.ptr);
    TF_LAUNCHED();
    auto hs = ds.download();
    auto hr = dr.download();
    bool sok = true, rok = true;
    for (int t = 0; t < threads; ++t) {
      int const n = (t + 1) % 128;
      sok = sok && hs[2 * t] == 10.0f * n && hs[2 * t + 1] == 10.0f * n + 1;
      for (int j = 0; j < 3; ++j) rok = rok && hr[3 * t + j] == float(t * 3 + j);
    }
    suite.check(sok, "local() split in smem, read back by a neighbour after sync<cta>");
    suite.check(rok, "local() split in registers (stride 0): the thread's own fragment");
  }
  return suite.finish();
}

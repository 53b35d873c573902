// Row kernels written against the runtime's public entries the way generated code would write
// them: RMSNorm, residual add + RMSNorm, softmax and SwiGLU on bf16 rows of 2048-8192, f32
// compute. One CTA per row, 256 threads; a thread-level ShardLayout gives each thread contiguous
// strips of 8 elements (16 bytes of bf16), so every gmem access takes the 16-byte vector path
// and the row reductions the one-barrier intra-CTA tier (a reduce_workspace). Checked against
// host references; run.sh (and tests/cpp's SASS check) also disassemble this file's kernels:
// 128-bit loads and stores, no local memory.
#include <tilefoundry/runtime.h>

TILEFOUNDRY_STATIC_PROGRAM_SHAPE(thread, 256);

#include "harness.cuh"

namespace tf = tilefoundry;
using cute::Int;
using TS = tf::TopologyScope;
using bf16 = cutlass::bfloat16_t;
namespace ops = tf::ops;
namespace shard = tf::shard;

constexpr int kThreads = 256;
constexpr int kStrip = 8;  // contiguous elements per thread per strip: 16 bytes of bf16

// A (rows, H) row-major tensor as (rows, strips, threads, 8): thread t owns elements
// [s * 2048 + 8 t, s * 2048 + 8 t + 8) of its row for every strip s; a warp reads 512 contiguous
// bytes per strip.
template <int H>
struct Row {
  static_assert(H % (kThreads * kStrip) == 0, "Row: H is a multiple of 2048");
  static constexpr int S = H / (kThreads * kStrip);

  __device__ static auto mesh() {
    return tf::make_mesh<TS::cta, TS::thread>(
        cute::make_layout(cute::make_shape(int(tf::program_dim<TS::cta>()), Int<kThreads>{}),
                          cute::make_stride(Int<1>{}, Int<1>{})));
  }
  // gmem: rows split over CTAs (mesh axis 0), the thread mode over threads (mesh axis 1).
  template <class T>
  __device__ static auto gmem(T* p) {
    auto l = cute::make_layout(
        cute::make_shape(int(tf::program_dim<TS::cta>()), Int<S>{}, Int<kThreads>{}, Int<kStrip>{}),
        cute::make_stride(Int<H>{}, Int<kThreads * kStrip>{}, Int<kStrip>{}, Int<1>{}));
    return tf::make_shard_tensor(
        cute::make_tensor(cute::make_gmem_ptr(p), l), l,
        tf::make_shard_layout(l, cute::make_tuple(shard::S<0>{}, shard::S<2>{}), mesh()));
  }
  // A weight of H elements, the same for every row: broadcast over the CTAs.
  template <class T>
  __device__ static auto weight(T* p) {
    auto l =
        cute::make_layout(cute::make_shape(Int<S>{}, Int<kThreads>{}, Int<kStrip>{}),
                          cute::make_stride(Int<kThreads * kStrip>{}, Int<kStrip>{}, Int<1>{}));
    return tf::make_shard_tensor(
        cute::make_tensor(cute::make_gmem_ptr(p), l), l,
        tf::make_shard_layout(l, cute::make_tuple(shard::B{}, shard::S<1>{}), mesh()));
  }
  // The thread's strips in registers (split modes of stride 0).
  template <class T>
  __device__ static auto registers() {
    auto l = cute::make_layout(
        cute::make_shape(int(tf::program_dim<TS::cta>()), Int<S>{}, Int<kThreads>{}, Int<kStrip>{}),
        cute::make_stride(Int<0>{}, Int<kStrip>{}, Int<0>{}, Int<1>{}));
    return tf::make_tensor<T>(
        tf::make_shard_layout(l, cute::make_tuple(shard::S<0>{}, shard::S<2>{}), mesh()));
  }
  // One value per row, held by every thread of the row's CTA.
  __device__ static auto row_scalar() {
    auto l = cute::make_layout(
        cute::make_shape(int(tf::program_dim<TS::cta>()), Int<1>{}, Int<1>{}, Int<1>{}),
        cute::make_stride(Int<0>{}, Int<0>{}, Int<0>{}, Int<0>{}));
    return tf::make_tensor<float>(
        tf::make_shard_layout(l, cute::make_tuple(shard::S<0>{}, shard::B{}), mesh()));
  }
};

template <int H>
__device__ auto row_workspace(float* smem) {
  return ops::make_reduce_workspace(
      cute::make_tensor(cute::make_smem_ptr(smem), cute::make_shape(Int<2 * kThreads>{})));
}

// y = x * rsqrt(mean(x^2) + eps) * w
template <int H>
__device__ void rms_norm_rows(decltype(Row<H>::template registers<float>())& x, bf16 const* w,
                              bf16* y, float eps, float* smem) {
  using R = Row<H>;
  auto ws = row_workspace<H>(smem);
  auto sq = R::template registers<float>();
  auto ms = R::row_scalar();
  ops::unary(ops::square_op{}, x, sq);
  ops::reduce<ops::mean_op, cute::seq<1, 2, 3>>(sq, ms, ws);
  ops::binary(ops::add_op{}, ms, eps, ms);
  ops::unary(ops::rsqrt_op{}, ms, ms);
  ops::binary(ops::mul_op{}, x, ms, x);
  auto out = R::gmem(y);
  ops::binary(ops::mul_op{}, x, R::weight(w), out);
}

template <int H>
__global__ void __launch_bounds__(kThreads)
    rms_norm(bf16 const* __restrict__ x, bf16 const* __restrict__ w, bf16* __restrict__ y,
             float eps) {
  __shared__ float smem[2 * kThreads];
  auto xr = Row<H>::template registers<float>();
  ops::copy(Row<H>::gmem(x), xr);
  rms_norm_rows<H>(xr, w, y, eps, smem);
}

// h = bf16(x + r) is written out (the residual stream) and normalised: y = rms_norm(h) * w.
template <int H>
__global__ void __launch_bounds__(kThreads)
    add_rms_norm(bf16 const* __restrict__ x, bf16 const* __restrict__ r, bf16 const* __restrict__ w,
                 bf16* __restrict__ h, bf16* __restrict__ y, float eps) {
  __shared__ float smem[2 * kThreads];
  using R = Row<H>;
  auto hb = R::template registers<bf16>();
  ops::binary(ops::add_op{}, R::gmem(x), R::gmem(r), hb);
  auto hs = R::gmem(h);
  ops::copy(hb, hs);
  auto hr = R::template registers<float>();
  ops::copy(hb, hr);
  rms_norm_rows<H>(hr, w, y, eps, smem);
}

// y = softmax(x) along the row; the two reductions share one workspace.
template <int H>
__global__ void __launch_bounds__(kThreads)
    softmax(bf16 const* __restrict__ x, bf16* __restrict__ y) {
  __shared__ float smem[2 * kThreads];
  using R = Row<H>;
  auto ws = row_workspace<H>(smem);
  auto xr = R::template registers<float>();
  ops::copy(R::gmem(x), xr);
  auto m = R::row_scalar();
  ops::reduce<ops::max_op, cute::seq<1, 2, 3>>(xr, m, ws);
  ops::binary(ops::sub_op{}, xr, m, xr);
  ops::unary(ops::exp_op{}, xr, xr);
  auto s = R::row_scalar();
  ops::reduce<ops::sum_op, cute::seq<1, 2, 3>>(xr, s, ws);
  auto out = R::gmem(y);
  ops::binary(ops::div_op{}, xr, s, out);
}

// y = silu(gate) * up
template <int H>
__global__ void __launch_bounds__(kThreads)
    swiglu(bf16 const* __restrict__ gate, bf16 const* __restrict__ up, bf16* __restrict__ y) {
  using R = Row<H>;
  auto g = R::template registers<float>();
  ops::unary(ops::silu_op{}, R::gmem(gate), g);
  auto out = R::gmem(y);
  ops::binary(ops::mul_op{}, g, R::gmem(up), out);
}

// ---------------------------------------------------------------- host side

std::vector<bf16> to_bf16(std::vector<float> const& v) {
  std::vector<bf16> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = bf16(v[i]);
  return out;
}

double as_double(bf16 v) { return double(float(v)); }

// Every output within tolerance of the reference rounded to bf16 (the kernel rounds once, at its
// store; the reference is exact): 2 bf16 ulps relative, plus a little absolute slack.
bool close_bf16(std::vector<bf16> const& got, std::vector<double> const& want, std::string& note) {
  std::vector<double> g(got.size());
  for (std::size_t i = 0; i < got.size(); ++i) g[i] = as_double(got[i]);
  double const worst = tfgpu::worst_error(g, want, 1.6e-2, 1e-3);
  note = tfgpu::describe(worst);
  return worst <= 1.0;
}

template <int H>
void check_rms_norm(tfgpu::Suite& suite, int rows) {
  auto x = to_bf16(suite.uniform(std::size_t(rows) * H));
  auto w = to_bf16(suite.uniform(H, 0.5f, 1.5f));
  float const eps = 1e-6f;
  tfgpu::DeviceBuffer<bf16> dx(x.size()), dw(H), dy(x.size());
  dx.upload(x);
  dw.upload(w);
  dy.poison();
  rms_norm<H><<<rows, kThreads>>>(dx.ptr, dw.ptr, dy.ptr, eps);
  TF_LAUNCHED();
  std::vector<double> want(x.size());
  for (int r = 0; r < rows; ++r) {
    double ss = 0;
    for (int i = 0; i < H; ++i) ss += as_double(x[r * H + i]) * as_double(x[r * H + i]);
    double const rstd = 1.0 / std::sqrt(ss / H + eps);
    for (int i = 0; i < H; ++i) want[r * H + i] = as_double(x[r * H + i]) * rstd * as_double(w[i]);
  }
  std::string note;
  bool const ok = close_bf16(dy.download(), want, note);
  suite.check(ok, "rms_norm bf16 H=" + std::to_string(H) + " rows=" + std::to_string(rows), note);
}

template <int H>
void check_add_rms_norm(tfgpu::Suite& suite, int rows) {
  std::size_t const n = std::size_t(rows) * H;
  auto x = to_bf16(suite.uniform(n));
  auto r = to_bf16(suite.uniform(n));
  auto w = to_bf16(suite.uniform(H, 0.5f, 1.5f));
  float const eps = 1e-5f;
  tfgpu::DeviceBuffer<bf16> dx(n), dr(n), dw(H), dh(n), dy(n);
  dx.upload(x);
  dr.upload(r);
  dw.upload(w);
  dh.poison();
  dy.poison();
  add_rms_norm<H><<<rows, kThreads>>>(dx.ptr, dr.ptr, dw.ptr, dh.ptr, dy.ptr, eps);
  TF_LAUNCHED();
  auto h = dh.download();
  bool residual = true;
  std::vector<double> want(n);
  for (int row = 0; row < rows; ++row) {
    double ss = 0;
    std::vector<double> hv(H);
    for (int i = 0; i < H; ++i) {
      std::size_t const k = std::size_t(row) * H + i;
      bf16 const hb = bf16(float(x[k]) + float(r[k]));  // one rounding, as the kernel's store
      residual = residual && float(h[k]) == float(hb);
      hv[i] = as_double(hb);
      ss += hv[i] * hv[i];
    }
    double const rstd = 1.0 / std::sqrt(ss / H + eps);
    for (int i = 0; i < H; ++i) want[std::size_t(row) * H + i] = hv[i] * rstd * as_double(w[i]);
  }
  std::string note;
  bool const ok = close_bf16(dy.download(), want, note);
  std::string const name = " bf16 H=" + std::to_string(H) + " rows=" + std::to_string(rows);
  suite.check(residual, "add_rms_norm residual stream" + name);
  suite.check(ok, "add_rms_norm output" + name, note);
}

template <int H>
void check_softmax(tfgpu::Suite& suite, int rows) {
  std::size_t const n = std::size_t(rows) * H;
  auto x = to_bf16(suite.uniform(n, -8.0f, 8.0f));
  tfgpu::DeviceBuffer<bf16> dx(n), dy(n);
  dx.upload(x);
  dy.poison();
  softmax<H><<<rows, kThreads>>>(dx.ptr, dy.ptr);
  TF_LAUNCHED();
  std::vector<double> want(n);
  for (int r = 0; r < rows; ++r) {
    double m = -INFINITY, s = 0;
    for (int i = 0; i < H; ++i) m = std::max(m, as_double(x[r * H + i]));
    for (int i = 0; i < H; ++i) s += std::exp(as_double(x[r * H + i]) - m);
    for (int i = 0; i < H; ++i) want[r * H + i] = std::exp(as_double(x[r * H + i]) - m) / s;
  }
  auto got = dy.download();
  std::vector<double> g(n);
  for (std::size_t i = 0; i < n; ++i) g[i] = as_double(got[i]);
  double const worst = tfgpu::worst_error(g, want, 1.6e-2, 1e-6);
  suite.check(worst <= 1.0, "softmax bf16 H=" + std::to_string(H) + " rows=" + std::to_string(rows),
              tfgpu::describe(worst));
}

template <int H>
void check_swiglu(tfgpu::Suite& suite, int rows) {
  std::size_t const n = std::size_t(rows) * H;
  auto gate = to_bf16(suite.uniform(n, -6.0f, 6.0f));
  auto up = to_bf16(suite.uniform(n));
  tfgpu::DeviceBuffer<bf16> dg(n), du(n), dy(n);
  dg.upload(gate);
  du.upload(up);
  dy.poison();
  swiglu<H><<<rows, kThreads>>>(dg.ptr, du.ptr, dy.ptr);
  TF_LAUNCHED();
  std::vector<double> want(n);
  for (std::size_t i = 0; i < n; ++i) {
    double const g = as_double(gate[i]);
    want[i] = g / (1.0 + std::exp(-g)) * as_double(up[i]);
  }
  std::string note;
  bool const ok = close_bf16(dy.download(), want, note);
  suite.check(ok, "swiglu bf16 H=" + std::to_string(H) + " rows=" + std::to_string(rows), note);
}

template <int H>
void check_all(tfgpu::Suite& suite) {
  for (int rows : {1, 37}) {
    check_rms_norm<H>(suite, rows);
    check_add_rms_norm<H>(suite, rows);
    check_softmax<H>(suite, rows);
    check_swiglu<H>(suite, rows);
  }
}

int main() {
  tfgpu::Suite suite("row_kernels");
  check_all<2048>(suite);
  check_all<4096>(suite);
  check_all<8192>(suite);
  return suite.finish();
}

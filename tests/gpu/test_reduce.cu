// ops::reduce on the GPU: every Op (sum, mean, max, min, absmax) in every tier (plain,
// intra-warp, cross-warp, intra-CTA), f32 and bf16 sources, against host references in double;
// the cross-warp tiers with a plain shared-memory workspace (two barriers) and with a
// reduce_workspace (one barrier, reused back to back).
// The tier is chosen by the runtime from the operand shard layouts; each case asserts at compile
// time which tier that is.
#include <tilefoundry/runtime.h>

TILEFOUNDRY_STATIC_PROGRAM_SHAPE(thread, 128);

#include <functional>

#include "../cpp/reduce_reference.h"
#include "harness.cuh"

using namespace tilefoundry;
using cute::Int;
using cute::seq;
using TS = TopologyScope;
using bf16 = cutlass::bfloat16_t;
using ops::detail::reduce_plan_t;
using ops::detail::reduce_tier;

constexpr int kThreads = 128;
constexpr int kV = 4;  // elements per thread
constexpr int G = 19;  // CTAs: one row of 512 elements each

// Mesh (cta, 4 warps, 32 lanes), strides per level.
__device__ auto warp_lane_mesh() {
  return make_mesh<TS::cta, TS::thread>(
      cute::make_layout(cute::make_shape(int(program_dim<TS::cta>()), Int<4>{}, Int<32>{}),
                        cute::make_stride(Int<1>{}, Int<32>{}, Int<1>{})));
}

// x (G, 4, 32, 4): row c, warp w, lane l, element v at c*512 + w*128 + l*4 + v.
template <class T>
__device__ auto src_rows(T const* x) {
  auto l = cute::make_layout(
      cute::make_shape(int(program_dim<TS::cta>()), Int<4>{}, Int<32>{}, Int<kV>{}),
      cute::make_stride(Int<512>{}, Int<128>{}, Int<kV>{}, Int<1>{}));
  return make_shard_tensor(
      cute::make_tensor(cute::make_gmem_ptr(x), l), l,
      make_shard_layout(l, cute::make_tuple(shard::S<0>{}, shard::S<1>{}, shard::S<2>{}),
                        warp_lane_mesh()));
}

template <class Shape, class Stride, class... A>
__device__ auto dst_of(float* y, Shape s, Stride d, A... attrs) {
  auto l = cute::make_layout(s, d);
  return make_shard_tensor(cute::make_tensor(cute::make_gmem_ptr(y), l), l,
                           make_shard_layout(l, cute::make_tuple(attrs...), warp_lane_mesh()));
}

template <class Op, class T>
__global__ void plain_tier(T const* x, float* y) {
  int const g = program_dim<TS::cta>();
  auto xs = src_rows(x);
  auto ys = dst_of(y, cute::make_shape(g, Int<4>{}, Int<32>{}, Int<1>{}),
                   cute::make_stride(Int<128>{}, Int<32>{}, Int<1>{}, Int<0>{}), shard::S<0>{},
                   shard::S<1>{}, shard::S<2>{});
  static_assert(reduce_plan_t<Op, seq<3>, decltype(xs), decltype(ys)>::tier == reduce_tier::plain);
  ops::reduce<Op, seq<3>>(xs, ys);
}

template <class Op, class T>
__global__ void intra_warp_tier(T const* x, float* y) {
  int const g = program_dim<TS::cta>();
  auto xs = src_rows(x);
  auto ys = dst_of(y, cute::make_shape(g, Int<4>{}, Int<1>{}, Int<1>{}),
                   cute::make_stride(Int<4>{}, Int<1>{}, Int<0>{}, Int<0>{}), shard::S<0>{},
                   shard::S<1>{}, shard::B{});
  static_assert(reduce_plan_t<Op, seq<2, 3>, decltype(xs), decltype(ys)>::tier ==
                reduce_tier::intra_warp);
  ops::reduce<Op, seq<2, 3>>(xs, ys);
}

template <class Op, class T>
__global__ void cross_warp_tier(T const* x, float* y) {
  __shared__ float ws[kV * kThreads];
  int const g = program_dim<TS::cta>();
  auto xs = src_rows(x);
  auto ys = dst_of(y, cute::make_shape(g, Int<1>{}, Int<32>{}, Int<kV>{}),
                   cute::make_stride(Int<128>{}, Int<0>{}, Int<kV>{}, Int<1>{}), shard::S<0>{},
                   shard::B{}, shard::S<2>{});
  static_assert(reduce_plan_t<Op, seq<1>, decltype(xs), decltype(ys)>::tier ==
                reduce_tier::cross_warp);
  ops::reduce<Op, seq<1>>(
      xs, ys,
      cute::make_tensor(cute::make_smem_ptr(&ws[0]), cute::make_shape(Int<kV * kThreads>{})));
}

// The whole row, twice through one workspace (the second call reuses it), the second time into
// registers, so every thread must hold the result.
template <class Op, class T>
__global__ void intra_cta_tier(T const* x, float* y, float* every) {
  __shared__ float ws[kThreads];
  auto w = cute::make_tensor(cute::make_smem_ptr(&ws[0]), cute::make_shape(Int<kThreads>{}));
  int const g = program_dim<TS::cta>();
  auto xs = src_rows(x);
  auto ys = dst_of(y, cute::make_shape(g, Int<1>{}, Int<1>{}, Int<1>{}),
                   cute::make_stride(Int<1>{}, Int<0>{}, Int<0>{}, Int<0>{}), shard::S<0>{},
                   shard::B{}, shard::B{});
  static_assert(reduce_plan_t<Op, seq<1, 2, 3>, decltype(xs), decltype(ys)>::tier ==
                reduce_tier::intra_cta);
  ops::reduce<Op, seq<1, 2, 3>>(xs, ys, w);
  auto rl = cute::make_layout(cute::make_shape(g, Int<1>{}, Int<1>{}, Int<1>{}),
                              cute::make_stride(Int<0>{}, Int<0>{}, Int<0>{}, Int<0>{}));
  auto frag = make_shard_tensor(
      cute::make_tensor<float>(cute::make_layout(cute::make_shape(Int<1>{}))), rl,
      make_shard_layout(rl, cute::make_tuple(shard::S<0>{}, shard::B{}, shard::B{}),
                        warp_lane_mesh()));
  ops::reduce<Op, seq<1, 2, 3>>(xs, frag, w);
  every[program_id<TS::cta>() * kThreads + program_id<TS::thread>()] = frag.engine(0);
}

// Lanes in 4 groups of 8: the exchange stays inside each group of 8 lanes.
template <class Op, class T>
__global__ void lane_group_tier(T const* x, float* y) {
  int const g = program_dim<TS::cta>();
  auto mesh = make_mesh<TS::cta, TS::thread>(
      cute::make_layout(cute::make_shape(g, Int<4>{}, Int<4>{}, Int<8>{}),
                        cute::make_stride(Int<1>{}, Int<32>{}, Int<8>{}, Int<1>{})));
  auto xl =
      cute::make_layout(cute::make_shape(g, Int<4>{}, Int<4>{}, Int<8>{}, Int<kV>{}),
                        cute::make_stride(Int<512>{}, Int<128>{}, Int<32>{}, Int<kV>{}, Int<1>{}));
  auto yl = cute::make_layout(cute::make_shape(g, Int<4>{}, Int<4>{}, Int<1>{}, Int<1>{}),
                              cute::make_stride(Int<16>{}, Int<4>{}, Int<1>{}, Int<0>{}, Int<0>{}));
  auto xs = make_shard_tensor(
      cute::make_tensor(cute::make_gmem_ptr(x), xl), xl,
      make_shard_layout(
          xl, cute::make_tuple(shard::S<0>{}, shard::S<1>{}, shard::S<2>{}, shard::S<3>{}), mesh));
  auto ys = make_shard_tensor(
      cute::make_tensor(cute::make_gmem_ptr(y), yl), yl,
      make_shard_layout(
          yl, cute::make_tuple(shard::S<0>{}, shard::S<1>{}, shard::S<2>{}, shard::B{}), mesh));
  using Plan = reduce_plan_t<Op, seq<3, 4>, decltype(xs), decltype(ys)>;
  static_assert(Plan::tier == reduce_tier::intra_warp && Plan::n_lane_masks == 3);
  ops::reduce<Op, seq<3, 4>>(xs, ys);
}

// The cross-warp tier through a reduce_workspace (one barrier): twice, so the halves alternate.
template <class Op, class T>
__global__ void cross_warp_double_buffered(T const* x, float* y, float* y2) {
  __shared__ float ws[2 * kV * kThreads];
  int const g = program_dim<TS::cta>();
  auto xs = src_rows(x);
  auto shape = cute::make_shape(g, Int<1>{}, Int<32>{}, Int<kV>{});
  auto stride = cute::make_stride(Int<128>{}, Int<0>{}, Int<kV>{}, Int<1>{});
  auto ys = dst_of(y, shape, stride, shard::S<0>{}, shard::B{}, shard::S<2>{});
  auto ys2 = dst_of(y2, shape, stride, shard::S<0>{}, shard::B{}, shard::S<2>{});
  auto w = ops::make_reduce_workspace(
      cute::make_tensor(cute::make_smem_ptr(&ws[0]), cute::make_shape(Int<2 * kV * kThreads>{})));
  ops::reduce<Op, seq<1>>(xs, ys, w);
  ops::reduce<Op, seq<1>>(xs, ys2, w);
}

// 128 threads as one mesh axis (lanes, then the 4 warps), the row read from gmem through the
// vector path, reduced with one barrier into gmem and into every thread's registers.
template <class Op, class T>
__global__ void one_thread_axis(T const* x, float* y, float* every) {
  __shared__ float ws[2 * kThreads];
  int const g = program_dim<TS::cta>();
  auto mesh = make_mesh<TS::cta, TS::thread>(cute::make_layout(
      cute::make_shape(g, Int<kThreads>{}), cute::make_stride(Int<1>{}, Int<1>{})));
  auto xl = cute::make_layout(cute::make_shape(g, Int<kThreads>{}, Int<kV>{}),
                              cute::make_stride(Int<512>{}, Int<kV>{}, Int<1>{}));
  auto xs = tilefoundry::make_tensor(
      cute::make_gmem_ptr(x),
      make_shard_layout(xl, cute::make_tuple(shard::S<0>{}, shard::S<1>{}), mesh));
  auto yl = cute::make_layout(cute::make_shape(g, Int<1>{}, Int<1>{}),
                              cute::make_stride(Int<1>{}, Int<0>{}, Int<0>{}));
  auto sl = make_shard_layout(yl, cute::make_tuple(shard::S<0>{}, shard::B{}), mesh);
  auto ys = tilefoundry::make_tensor(cute::make_gmem_ptr(y), sl);
  auto rl = cute::make_layout(cute::make_shape(g, Int<1>{}, Int<1>{}),
                              cute::make_stride(Int<0>{}, Int<0>{}, Int<0>{}));
  auto frag = tilefoundry::make_tensor<float>(
      make_shard_layout(rl, cute::make_tuple(shard::S<0>{}, shard::B{}), mesh));
  using Plan = reduce_plan_t<Op, seq<1, 2>, decltype(xs), decltype(ys)>;
  static_assert(Plan::tier == reduce_tier::intra_cta && Plan::n_lane_masks == 5 &&
                Plan::n_warp_axes == 1);
  auto w = ops::make_reduce_workspace(
      cute::make_tensor(cute::make_smem_ptr(&ws[0]), cute::make_shape(Int<2 * kThreads>{})));
  ops::reduce<Op, seq<1, 2>>(xs, ys, w);
  ops::reduce<Op, seq<1, 2>>(xs, frag, w);
  every[program_id<TS::cta>() * kThreads + program_id<TS::thread>()] = frag.data()[0];
}

// kRounds reduces back to back through one reduce_workspace, round k of the row scaled by k + 1:
// were a reduce to overwrite partials another thread has not read yet, rows would mix.
constexpr int kRounds = 24;

template <class T>
__global__ void back_to_back(T const* x, float* y) {
  __shared__ float ws[2 * kThreads];
  int const g = program_dim<TS::cta>();
  auto xs = src_rows(x);
  auto rl = cute::make_layout(cute::make_shape(g, Int<4>{}, Int<32>{}, Int<kV>{}),
                              cute::make_stride(Int<0>{}, Int<0>{}, Int<0>{}, Int<1>{}));
  auto rsl = make_shard_layout(rl, cute::make_tuple(shard::S<0>{}, shard::S<1>{}, shard::S<2>{}),
                               warp_lane_mesh());
  auto xr = tilefoundry::make_tensor<float>(rsl);
  ops::copy(xs, xr);
  auto w = ops::make_reduce_workspace(
      cute::make_tensor(cute::make_smem_ptr(&ws[0]), cute::make_shape(Int<2 * kThreads>{})));
  for (int k = 0; k < kRounds; ++k) {
    auto scaled = tilefoundry::make_tensor<float>(rsl);
    ops::binary(ops::mul_op{}, xr, float(k + 1), scaled);
    auto ys = dst_of(y + k * g, cute::make_shape(g, Int<1>{}, Int<1>{}, Int<1>{}),
                     cute::make_stride(Int<1>{}, Int<0>{}, Int<0>{}, Int<0>{}), shard::S<0>{},
                     shard::B{}, shard::B{});
    ops::reduce<ops::sum_op, seq<1, 2, 3>>(scaled, ys, w);
  }
}

template <class Op>
struct partial_of {
  using type = Op;
};
template <>
struct partial_of<ops::mean_op> {
  using type = ops::sum_op;  // a mean's partials are sums
};

// Each thread holds a partial (2 values in registers); completing it is an exchange across all
// 128 threads, then a local reduce over the 2 values.
template <class Op, class T>
__global__ void partial_to_broadcast(T const* x, float* y) {
  __shared__ float ws[kThreads];
  int const g = program_dim<TS::cta>();
  int const c = program_id<TS::cta>(), t = program_id<TS::thread>();
  auto rl = cute::make_layout(cute::make_shape(g, Int<2>{}), cute::make_stride(Int<0>{}, Int<1>{}));
  using Part = shard::P<typename partial_of<Op>::type>;
  auto frag = make_shard_tensor(
      cute::make_tensor<T>(cute::make_layout(cute::make_shape(Int<2>{}))), rl,
      make_shard_layout(rl, cute::make_tuple(shard::S<0>{}, Part{}, Part{}), warp_lane_mesh()));
  frag.engine(0) = x[c * 256 + 2 * t];
  frag.engine(1) = x[c * 256 + 2 * t + 1];
  auto ys = dst_of(y, cute::make_shape(g, Int<1>{}), cute::make_stride(Int<1>{}, Int<0>{}),
                   shard::S<0>{}, shard::B{}, shard::B{});
  static_assert(reduce_plan_t<Op, seq<1>, decltype(frag), decltype(ys)>::tier ==
                reduce_tier::intra_cta);
  ops::reduce<Op, seq<1>>(
      frag, ys, cute::make_tensor(cute::make_smem_ptr(&ws[0]), cute::make_shape(Int<kThreads>{})));
}

using Kind = tftest::ReduceKind;

struct Ref {
  Kind kind;
  double fold(std::vector<double> const& v) const { return tftest::reduce_reference(kind, v); }
  // Sums are compared against the magnitude they accumulate; the others are exact.
  double tolerance(std::vector<double> const& v) const {
    if (kind != Kind::sum && kind != Kind::mean) return 0.0;
    double s = 0;
    for (double x : v) s += std::fabs(x);
    return 2e-6 * (kind == Kind::mean ? s / double(v.size()) : s) + 1e-30;
  }
};

using Gather = std::function<std::vector<double>(int)>;

bool compare(std::vector<float> const& got, Ref ref, int outputs, Gather const& gather,
             std::string& note) {
  double worst = 0;
  for (int i = 0; i < outputs; ++i) {
    auto v = gather(i);
    double const want = ref.fold(v);
    double const g = got[i];
    if (std::isnan(want) || std::isnan(g)) {
      if (std::isnan(want) != std::isnan(g)) {
        note = "output " + std::to_string(i) + ": NaN mismatch";
        return false;
      }
      continue;
    }
    double const tol = ref.tolerance(v);
    double const err = std::fabs(g - want);
    if (tol == 0.0 ? err != 0.0 : err > tol) {
      note = "output " + std::to_string(i) + ": got " + std::to_string(g) + " want " +
             std::to_string(want);
      return false;
    }
    if (tol > 0) worst = std::max(worst, err / tol);
  }
  note = tfgpu::describe(worst);
  return true;
}

template <class T>
std::vector<T> narrow(std::vector<float> const& v) {
  std::vector<T> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = T(v[i]);
  return out;
}

template <class Op, class T>
void every_tier(tfgpu::Suite& suite, Kind kind, char const* op_name) {
  int const n = G * 512;
  auto xv = narrow<T>(suite.uniform(n));
  std::vector<double> x(n);
  for (int i = 0; i < n; ++i) x[i] = double(float(xv[i]));
  tfgpu::DeviceBuffer<T> dx(n);
  dx.upload(xv);
  Ref ref{kind};
  std::string const label = std::string(op_name) + (sizeof(T) == 2 ? " bf16" : " f32");
  auto at = [&](int c, int w, int l, int v) { return x[c * 512 + w * 128 + l * kV + v]; };
  std::string note;
  {
    tfgpu::DeviceBuffer<float> dy(G * 128);
    dy.poison();
    plain_tier<Op><<<G, kThreads>>>(dx.ptr, dy.ptr);
    TF_LAUNCHED();
    bool ok = compare(
        dy.download(), ref, G * 128,
        [&](int i) {
          std::vector<double> v;
          for (int e = 0; e < kV; ++e) v.push_back(x[i * kV + e]);
          return v;
        },
        note);
    suite.check(ok, "reduce " + label + " plain tier (each thread's 4 elements)", note);
  }
  {
    tfgpu::DeviceBuffer<float> dy(G * 4);
    dy.poison();
    intra_warp_tier<Op><<<G, kThreads>>>(dx.ptr, dy.ptr);
    TF_LAUNCHED();
    bool ok = compare(
        dy.download(), ref, G * 4,
        [&](int i) {
          std::vector<double> v;
          for (int l = 0; l < 32; ++l)
            for (int e = 0; e < kV; ++e) v.push_back(at(i / 4, i % 4, l, e));
          return v;
        },
        note);
    suite.check(ok, "reduce " + label + " intra-warp tier (32 lanes)", note);
  }
  {
    tfgpu::DeviceBuffer<float> dy(G * 16);
    dy.poison();
    lane_group_tier<Op><<<G, kThreads>>>(dx.ptr, dy.ptr);
    TF_LAUNCHED();
    bool ok = compare(
        dy.download(), ref, G * 16,
        [&](int i) {
          std::vector<double> v;
          for (int l = 0; l < 8; ++l)
            for (int e = 0; e < kV; ++e)
              v.push_back(x[(i / 16) * 512 + ((i / 4) % 4) * 128 + (i % 4) * 32 + l * kV + e]);
          return v;
        },
        note);
    suite.check(ok, "reduce " + label + " intra-warp tier (groups of 8 lanes)", note);
  }
  {
    tfgpu::DeviceBuffer<float> dy(G * 128);
    dy.poison();
    cross_warp_tier<Op><<<G, kThreads>>>(dx.ptr, dy.ptr);
    TF_LAUNCHED();
    bool ok = compare(
        dy.download(), ref, G * 128,
        [&](int i) {
          std::vector<double> v;
          for (int w = 0; w < 4; ++w) v.push_back(at(i / 128, w, (i % 128) / kV, i % kV));
          return v;
        },
        note);
    suite.check(ok, "reduce " + label + " cross-warp tier (4 warps, lane by lane)", note);
  }
  {
    tfgpu::DeviceBuffer<float> dy(G), de(G * kThreads);
    dy.poison();
    de.poison();
    intra_cta_tier<Op><<<G, kThreads>>>(dx.ptr, dy.ptr, de.ptr);
    TF_LAUNCHED();
    auto row = [&](int c) {
      return std::vector<double>(x.begin() + c * 512, x.begin() + (c + 1) * 512);
    };
    bool ok = compare(dy.download(), ref, G, row, note);
    suite.check(ok, "reduce " + label + " intra-CTA tier (512 elements over 128 threads)", note);
    auto every = de.download();
    auto y = dy.download();
    bool same = true;
    for (int i = 0; i < G * kThreads; ++i)
      same = same &&
             (every[i] == y[i / kThreads] || (std::isnan(every[i]) && std::isnan(y[i / kThreads])));
    suite.check(same,
                "reduce " + label + " intra-CTA into registers: all 128 threads hold the result");
  }
  {
    tfgpu::DeviceBuffer<float> dy(G * 128), dy2(G * 128);
    dy.poison();
    dy2.poison();
    cross_warp_double_buffered<Op><<<G, kThreads>>>(dx.ptr, dy.ptr, dy2.ptr);
    TF_LAUNCHED();
    auto gather = [&](int i) {
      std::vector<double> v;
      for (int w = 0; w < 4; ++w) v.push_back(at(i / 128, w, (i % 128) / kV, i % kV));
      return v;
    };
    bool ok = compare(dy.download(), ref, G * 128, gather, note) &&
              compare(dy2.download(), ref, G * 128, gather, note);
    suite.check(ok, "reduce " + label + " cross-warp tier through a reduce_workspace, twice", note);
  }
  {
    tfgpu::DeviceBuffer<float> dy(G), de(G * kThreads);
    dy.poison();
    de.poison();
    one_thread_axis<Op><<<G, kThreads>>>(dx.ptr, dy.ptr, de.ptr);
    TF_LAUNCHED();
    auto row = [&](int c) {
      return std::vector<double>(x.begin() + c * 512, x.begin() + (c + 1) * 512);
    };
    auto y = dy.download();
    bool ok = compare(y, ref, G, row, note);
    auto every = de.download();
    for (int i = 0; i < G * kThreads && ok; ++i) {
      ok = every[i] == y[i / kThreads] || (std::isnan(every[i]) && std::isnan(y[i / kThreads]));
    }
    suite.check(ok,
                "reduce " + label +
                    " over 128 threads as one mesh axis (one barrier), into gmem and registers",
                note);
  }
  {
    tfgpu::DeviceBuffer<float> dy(G);
    dy.poison();
    partial_to_broadcast<Op><<<G, kThreads>>>(dx.ptr, dy.ptr);
    TF_LAUNCHED();
    Ref pref = ref;
    auto got = dy.download();
    bool ok = true;
    for (int c = 0; c < G && ok; ++c) {
      // The full value of element v is the combination over the 128 threads of their partials.
      std::vector<double> full(2);
      std::vector<double> mags;
      for (int v = 0; v < 2; ++v) {
        std::vector<double> parts;
        for (int t = 0; t < kThreads; ++t) parts.push_back(x[c * 256 + 2 * t + v]);
        Ref combine{kind == Kind::mean ? Kind::sum : kind};
        full[v] = combine.fold(parts);
        mags.insert(mags.end(), parts.begin(), parts.end());
      }
      double const want = pref.fold(full);
      double tol = pref.tolerance(mags) * (kind == Kind::mean ? double(mags.size()) / 2.0 : 1.0);
      ok = tol == 0 ? got[c] == float(want) : std::fabs(got[c] - want) <= tol;
      if (!ok)
        note = "cta " + std::to_string(c) + ": got " + std::to_string(got[c]) + " want " +
               std::to_string(want);
    }
    suite.check(ok, "reduce " + label + " partial (P) in registers completed across the CTA",
                ok ? "" : note);
  }
}

template <class Op, class T>
void nan_propagates(tfgpu::Suite& suite, char const* name) {
  int const n = G * 512;
  auto xv = narrow<T>(suite.uniform(n));
  xv[3 * 512 + 200] = T(NAN);
  tfgpu::DeviceBuffer<T> dx(n);
  tfgpu::DeviceBuffer<float> dy(G), de(G * kThreads);
  dx.upload(xv);
  dy.poison();
  intra_cta_tier<Op><<<G, kThreads>>>(dx.ptr, dy.ptr, de.ptr);
  TF_LAUNCHED();
  auto y = dy.download();
  bool ok = true;
  for (int c = 0; c < G; ++c) ok = ok && (std::isnan(y[c]) == (c == 3));
  suite.check(ok, std::string("reduce ") + name + " " + (sizeof(T) == 2 ? "bf16" : "f32") +
                      " intra-CTA: a NaN in row 3 reaches row 3's result only");
}

template <class T>
void rounds_back_to_back(tfgpu::Suite& suite) {
  int const n = G * 512;
  auto xv = narrow<T>(suite.uniform(n));
  tfgpu::DeviceBuffer<T> dx(n);
  tfgpu::DeviceBuffer<float> dy(kRounds * G);
  dx.upload(xv);
  dy.poison();
  back_to_back<<<G, kThreads>>>(dx.ptr, dy.ptr);
  TF_LAUNCHED();
  auto y = dy.download();
  bool ok = true;
  std::string note;
  for (int k = 0; k < kRounds && ok; ++k) {
    for (int c = 0; c < G && ok; ++c) {
      double want = 0, mag = 0;
      for (int i = 0; i < 512; ++i) {
        double const v = double(float(xv[c * 512 + i])) * (k + 1);
        want += v;
        mag += std::fabs(v);
      }
      ok = std::fabs(y[k * G + c] - want) <= 4e-6 * mag;
      if (!ok) {
        note = "round " + std::to_string(k) + " cta " + std::to_string(c) + ": got " +
               std::to_string(y[k * G + c]) + " want " + std::to_string(want);
      }
    }
  }
  suite.check(ok,
              std::string("reduce sum ") + (sizeof(T) == 2 ? "bf16" : "f32") + ": " +
                  std::to_string(kRounds) +
                  " intra-CTA reduces back to back through one "
                  "reduce_workspace",
              note);
}

template <class T>
void all_ops(tfgpu::Suite& suite) {
  every_tier<ops::sum_op, T>(suite, Kind::sum, "sum");
  every_tier<ops::mean_op, T>(suite, Kind::mean, "mean");
  every_tier<ops::max_op, T>(suite, Kind::max, "max");
  every_tier<ops::min_op, T>(suite, Kind::min, "min");
  every_tier<ops::absmax_op, T>(suite, Kind::absmax, "absmax");
  nan_propagates<ops::max_op, T>(suite, "max");
  nan_propagates<ops::min_op, T>(suite, "min");
  nan_propagates<ops::absmax_op, T>(suite, "absmax");
  rounds_back_to_back<T>(suite);
}

int main() {
  tfgpu::Suite suite("reduce");
  all_ops<float>(suite);
  all_ops<bf16>(suite);
  return suite.finish();
}

// fill, copy (16/8/4-byte words and the elementwise path), every unary tag and every binary tag
// with broadcast, on the GPU, against host references in double.
#include <tilefoundry/runtime.h>

TILEFOUNDRY_STATIC_PROGRAM_SHAPE(thread, 128);

#include "harness.cuh"

using namespace tilefoundry;
using cute::Int;
using TS = TopologyScope;
using bf16 = cutlass::bfloat16_t;

constexpr int kThreads = 128;
constexpr int kPer = 8;  // elements per thread

// (G, 128, 8) split over (cta, thread), row-major: each thread owns 8 contiguous elements.
template <class T>
__device__ auto rows(T* p) {
  int const G = program_dim<TS::cta>();
  auto mesh = make_mesh<TS::cta, TS::thread>(cute::make_layout(
      cute::make_shape(G, Int<kThreads>{}), cute::make_stride(Int<1>{}, Int<1>{})));
  auto l = cute::make_layout(cute::make_shape(G, Int<kThreads>{}, Int<kPer>{}),
                             cute::make_stride(Int<kThreads * kPer>{}, Int<kPer>{}, Int<1>{}));
  return make_shard_tensor(
      cute::make_tensor(cute::make_gmem_ptr(p), l), l,
      make_shard_layout(l, cute::make_tuple(shard::S<0>{}, shard::S<1>{}), mesh));
}

template <class Op, class Tin, class Tout>
__global__ void unary_kernel(Op op, Tin const* x, Tout* y) {
  ops::unary(op, rows(x), rows(y));
}

template <class Tin, class Tout>
__global__ void copy_kernel(Tin const* x, Tout* y) {
  ops::copy(local(rows(x)), local(rows(y)));
}

template <class T>
__global__ void fill_kernel(T* y, float v) {
  auto s = rows(y);
  ops::fill(s, v);
}

// out(c, t, i) = op(a(c, t, i), b(t, i)), b broadcast over the CTAs; then with a per-CTA scalar
// column c(cta) and with a literal scalar.
template <class Op, class T>
__global__ void binary_kernel(Op op, T const* a, T const* b, T const* col, T* o1, T* o2, T* o3) {
  int const G = program_dim<TS::cta>();
  auto mesh = make_mesh<TS::cta, TS::thread>(cute::make_layout(
      cute::make_shape(G, Int<kThreads>{}), cute::make_stride(Int<1>{}, Int<1>{})));
  auto bl = cute::make_layout(cute::make_shape(Int<kThreads>{}, Int<kPer>{}),
                              cute::make_stride(Int<kPer>{}, Int<1>{}));
  auto bs =
      make_shard_tensor(cute::make_tensor(cute::make_gmem_ptr(b), bl), bl,
                        make_shard_layout(bl, cute::make_tuple(shard::B{}, shard::S<0>{}), mesh));
  auto cl = cute::make_layout(cute::make_shape(G), cute::make_stride(Int<1>{}));
  auto cs =
      make_shard_tensor(cute::make_tensor(cute::make_gmem_ptr(col), cl), cl,
                        make_shard_layout(cl, cute::make_tuple(shard::S<0>{}, shard::B{}), mesh));
  ops::binary(op, rows(a), bs, rows(o1));
  ops::binary(op, rows(a), cs, rows(o2));
  ops::binary(op, rows(a), 0.75f, rows(o3));
}

template <class T>
std::vector<T> to(std::vector<float> const& v) {
  std::vector<T> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = T(v[i]);
  return out;
}

template <class T>
std::vector<double> as_double(std::vector<T> const& v) {
  std::vector<double> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = double(float(v[i]));
  return out;
}

constexpr int G = 33;
constexpr int N = G * kThreads * kPer;

template <class Op, class Ref, class T>
void check_unary(tfgpu::Suite& suite, char const* name, Op op, Ref ref, float lo, float hi) {
  auto xf = suite.uniform(N, lo, hi);
  auto x = to<T>(xf);
  tfgpu::DeviceBuffer<T> dx(N), dy(N);
  dx.upload(x);
  dy.poison();
  unary_kernel<<<G, kThreads>>>(op, dx.ptr, dy.ptr);
  TF_LAUNCHED();
  std::vector<double> want(N);
  for (int i = 0; i < N; ++i) want[i] = double(float(T(float(ref(double(float(x[i])))))));
  bool const narrow = sizeof(T) == 2;
  double const worst =
      tfgpu::worst_error(as_double(dy.download()), want, narrow ? 1e-2 : 2e-6, 1e-6);
  suite.check(worst <= 1.0, std::string("unary ") + name + (narrow ? " bf16" : " f32"),
              tfgpu::describe(worst));
}

template <class T>
void every_unary(tfgpu::Suite& suite) {
  check_unary<ops::identity_op, double (*)(double), T>(
      suite, "identity", {}, [](double v) { return v; }, -4, 4);
  check_unary<ops::neg_op, double (*)(double), T>(
      suite, "neg", {}, [](double v) { return -v; }, -4, 4);
  check_unary<ops::abs_op, double (*)(double), T>(
      suite, "abs", {}, [](double v) { return std::fabs(v); }, -4, 4);
  check_unary<ops::square_op, double (*)(double), T>(
      suite, "square", {}, [](double v) { return v * v; }, -4, 4);
  check_unary<ops::relu_op, double (*)(double), T>(
      suite, "relu", {}, [](double v) { return v < 0 ? 0.0 : v; }, -4, 4);
  check_unary<ops::exp_op, double (*)(double), T>(
      suite, "exp", {}, [](double v) { return std::exp(v); }, -4, 4);
  check_unary<ops::log_op, double (*)(double), T>(
      suite, "log", {}, [](double v) { return std::log(v); }, 0.01f, 8);
  check_unary<ops::sqrt_op, double (*)(double), T>(
      suite, "sqrt", {}, [](double v) { return std::sqrt(v); }, 0, 8);
  check_unary<ops::rsqrt_op, double (*)(double), T>(
      suite, "rsqrt", {}, [](double v) { return 1 / std::sqrt(v); }, 0.01f, 8);
  check_unary<ops::tanh_op, double (*)(double), T>(
      suite, "tanh", {}, [](double v) { return std::tanh(v); }, -4, 4);
  check_unary<ops::sigmoid_op, double (*)(double), T>(
      suite, "sigmoid", {}, [](double v) { return 1 / (1 + std::exp(-v)); }, -8, 8);
  check_unary<ops::silu_op, double (*)(double), T>(
      suite, "silu", {}, [](double v) { return v / (1 + std::exp(-v)); }, -8, 8);
  // The forms for 16-bit results: within 2e-6 of exact even on f32 (2^-21 + |x| 2^-24 here).
  check_unary<ops::exp_rounded_op, double (*)(double), T>(
      suite, "exp_rounded", {}, [](double v) { return std::exp(v); }, -4, 4);
  check_unary<ops::sigmoid_rounded_op, double (*)(double), T>(
      suite, "sigmoid_rounded", {}, [](double v) { return 1 / (1 + std::exp(-v)); }, -8, 8);
  check_unary<ops::silu_rounded_op, double (*)(double), T>(
      suite, "silu_rounded", {}, [](double v) { return v / (1 + std::exp(-v)); }, -8, 8);
  check_unary<ops::gelu_op, double (*)(double), T>(
      suite, "gelu", {}, [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }, -4,
      4);
  check_unary<ops::gelu_tanh_op, double (*)(double), T>(
      suite, "gelu_tanh", {},
      [](double v) {
        return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
      },
      -4, 4);
  check_unary<ops::clamp_op<float>, double (*)(double), T>(
      suite, "clamp", {-1.5f, 0.5f}, [](double v) { return v < -1.5 ? -1.5 : (v > 0.5 ? 0.5 : v); },
      -4, 4);
}

template <class Op, class T>
void check_binary(tfgpu::Suite& suite, char const* name, Op op, double (*ref)(double, double),
                  float lo, float hi) {
  auto a = to<T>(suite.uniform(N, lo, hi));
  auto b = to<T>(suite.uniform(kThreads * kPer, lo, hi));
  auto c = to<T>(suite.uniform(G, lo, hi));
  tfgpu::DeviceBuffer<T> da(N), db(b.size()), dc(G), o1(N), o2(N), o3(N);
  da.upload(a);
  db.upload(b);
  dc.upload(c);
  o1.poison();
  o2.poison();
  o3.poison();
  binary_kernel<<<G, kThreads>>>(op, da.ptr, db.ptr, dc.ptr, o1.ptr, o2.ptr, o3.ptr);
  TF_LAUNCHED();
  std::vector<double> w1(N), w2(N), w3(N);
  auto round = [](double v) { return double(float(T(float(v)))); };
  for (int i = 0; i < N; ++i) {
    double const x = float(a[i]);
    w1[i] = round(ref(x, float(b[i % (kThreads * kPer)])));
    w2[i] = round(ref(x, float(c[i / (kThreads * kPer)])));
    w3[i] = round(ref(x, 0.75));
  }
  bool const narrow = sizeof(T) == 2;
  double const rtol = narrow ? 1e-2 : 2e-6;
  double const e1 = tfgpu::worst_error(as_double(o1.download()), w1, rtol, 1e-6);
  double const e2 = tfgpu::worst_error(as_double(o2.download()), w2, rtol, 1e-6);
  double const e3 = tfgpu::worst_error(as_double(o3.download()), w3, rtol, 1e-6);
  std::string const suffix = narrow ? " bf16" : " f32";
  suite.check(e1 <= 1, std::string("binary ") + name + suffix + ", row broadcast over CTAs",
              tfgpu::describe(e1));
  suite.check(e2 <= 1, std::string("binary ") + name + suffix + ", per-CTA scalar column",
              tfgpu::describe(e2));
  suite.check(e3 <= 1, std::string("binary ") + name + suffix + ", literal scalar",
              tfgpu::describe(e3));
}

template <class T>
void every_binary(tfgpu::Suite& suite) {
  check_binary<ops::add_op, T>(
      suite, "add", {}, [](double a, double b) { return a + b; }, -4, 4);
  check_binary<ops::sub_op, T>(
      suite, "sub", {}, [](double a, double b) { return a - b; }, -4, 4);
  check_binary<ops::mul_op, T>(
      suite, "mul", {}, [](double a, double b) { return a * b; }, -4, 4);
  check_binary<ops::div_op, T>(
      suite, "div", {}, [](double a, double b) { return a / b; }, 0.5f, 4);
  check_binary<ops::max_op, T>(
      suite, "max", {}, [](double a, double b) { return a > b ? a : b; }, -4, 4);
  check_binary<ops::min_op, T>(
      suite, "min", {}, [](double a, double b) { return a < b ? a : b; }, -4, 4);
  check_binary<ops::pow_op, T>(
      suite, "pow", {}, [](double a, double b) { return std::pow(a, b); }, 0.5f, 2);
}

// Copies between views of one buffer at element offsets, so the word width varies with alignment.
template <class T>
__global__ void copy_offset_kernel(T const* x, T* y, int offset) {
  int const t = program_id<TS::thread>() + program_id<TS::cta>() * kThreads;
  auto s =
      cute::make_tensor(cute::make_gmem_ptr(x + offset + t * kPer), cute::make_shape(Int<kPer>{}));
  auto d =
      cute::make_tensor(cute::make_gmem_ptr(y + offset + t * kPer), cute::make_shape(Int<kPer>{}));
  ops::copy(s, d);
}

template <class T>
void check_copy_offsets(tfgpu::Suite& suite, char const* type) {
  for (int offset : {0, 1, 2, 4}) {
    auto x = to<T>(suite.uniform(N + 8));
    tfgpu::DeviceBuffer<T> dx(N + 8), dy(N + 8);
    dx.upload(x);
    dy.poison();
    copy_offset_kernel<<<G, kThreads>>>(dx.ptr, dy.ptr, offset);
    TF_LAUNCHED();
    auto y = dy.download();
    bool ok = true;
    for (int i = offset; i < offset + N; ++i) ok = ok && float(y[i]) == float(x[i]);
    int const bytes = int(sizeof(T)) * offset;
    int const word = bytes % 16 == 0  ? 16
                     : bytes % 8 == 0 ? 8
                     : bytes % 4 == 0 ? 4
                                      : int(sizeof(T));
    suite.check(ok, std::string("copy ") + type + " at element offset " + std::to_string(offset) +
                        " (" + std::to_string(std::min<int>(word, kPer * int(sizeof(T)))) +
                        "-byte words)");
  }
}

int main() {
  tfgpu::Suite suite("elementwise");
  {
    tfgpu::DeviceBuffer<bf16> dy(N);
    dy.poison();
    fill_kernel<<<G, kThreads>>>(dy.ptr, 1.5f);
    TF_LAUNCHED();
    bool ok = true;
    for (auto v : dy.download()) ok = ok && float(v) == 1.5f;
    suite.check(ok, "fill bf16 through a ShardTensor");
  }
  {
    auto x = suite.uniform(N);
    tfgpu::DeviceBuffer<float> dx(N);
    tfgpu::DeviceBuffer<bf16> dy(N);
    dx.upload(x);
    dy.poison();
    copy_kernel<<<G, kThreads>>>(dx.ptr, dy.ptr);
    TF_LAUNCHED();
    auto y = dy.download();
    bool ok = true;
    for (int i = 0; i < N; ++i) ok = ok && float(y[i]) == float(bf16(x[i]));
    suite.check(ok, "copy f32 -> bf16 converts");
  }
  check_copy_offsets<float>(suite, "f32");
  check_copy_offsets<bf16>(suite, "bf16");
  {
    auto x = suite.uniform(N);
    tfgpu::DeviceBuffer<float> dx(N), dy(N);
    dx.upload(x);
    dy.poison();
    unary_kernel<<<G, kThreads>>>(ops::copy_n_op{{}, 5}, dx.ptr, dy.ptr);
    TF_LAUNCHED();
    auto y = dy.download();
    bool ok = true;
    for (int i = 0; i < N; ++i) ok = ok && (i % kPer < 5 ? y[i] == x[i] : std::isnan(y[i]));
    suite.check(ok, "unary copy_n: first 5 of each thread's 8, the rest untouched");
  }
  every_unary<float>(suite);
  every_unary<bf16>(suite);
  every_binary<float>(suite);
  every_binary<bf16>(suite);
  return suite.finish();
}

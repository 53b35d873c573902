// The 16-byte vector path behind ops::fill / copy / unary / binary and the reduce's load, on the
// GPU, against host references: bf16, f16 and f32; aligned and misaligned pointers (the run-time
// check must send the misaligned ones down the scalar path); strips whose length is no multiple
// of the vector (never vectorised); broadcast operands (a row shared by all threads, a per-thread
// scalar in gmem, a literal) and register operands. Each thread owns one contiguous strip of L
// elements starting at `offset` elements into the buffer.
#include <tilefoundry/runtime.h>

TILEFOUNDRY_STATIC_PROGRAM_SHAPE(thread, 128);

#include "harness.cuh"

using namespace tilefoundry;
using cute::Int;
using TS = TopologyScope;
using bf16 = cutlass::bfloat16_t;
using f16 = cutlass::half_t;

constexpr int kThreads = 128;
constexpr int G = 23;
constexpr int kStrands = G * kThreads;

__device__ int strand() { return program_id<TS::cta>() * kThreads + program_id<TS::thread>(); }

template <int L, class T>
__device__ auto strip(T* p, int offset) {
  return cute::make_tensor(cute::make_gmem_ptr(p + offset + strand() * L),
                           cute::make_shape(Int<L>{}));
}

template <int L, class Op, class Tin, class Tout>
__global__ void unary_strips(Op op, Tin const* x, Tout* y, int offset) {
  ops::unary(op, strip<L>(x, offset), strip<L>(y, offset));
}

// gmem -> float registers -> gmem, converting both ways.
template <int L, class Tin, class Tout>
__global__ void copy_through_registers(Tin const* x, Tout* y, int offset) {
  auto regs = cute::make_tensor<float>(cute::make_shape(Int<L>{}));
  ops::copy(strip<L>(x, offset), regs);
  ops::copy(regs, strip<L>(y, offset));
}

// o1 = op(a, row): row of L shared by every thread; o2 = op(a, c): c one gmem value per thread,
// broadcast along the strip; o3 = op(a, 0.75); o4 = op(a in float registers, row).
template <int L, class Op, class T>
__global__ void binary_strips(Op op, T const* a, T const* row, T const* col, T* o1, T* o2, T* o3,
                              T* o4, int offset) {
  auto sa = strip<L>(a, offset);
  auto r = cute::make_tensor(cute::make_gmem_ptr(row + offset), cute::make_shape(Int<L>{}));
  auto c = cute::make_tensor(cute::make_gmem_ptr(col + strand()), cute::make_shape(Int<1>{}));
  ops::binary(op, sa, r, strip<L>(o1, offset));
  ops::binary(op, sa, c, strip<L>(o2, offset));
  ops::binary(op, sa, 0.75f, strip<L>(o3, offset));
  auto regs = cute::make_tensor<float>(cute::make_shape(Int<L>{}));
  ops::copy(sa, regs);
  ops::binary(op, regs, r, strip<L>(o4, offset));
}

template <int L, class T>
__global__ void fill_strips(T* y, float v, int offset) {
  ops::fill(strip<L>(y, offset), v);
}

// Each thread sums its strip straight from gmem (the plain tier, its source staged in registers).
template <int L, class T>
__global__ void sum_strips(T const* x, float* y, int offset) {
  ops::reduce<ops::sum_op, cute::seq<0>>(
      strip<L>(x, offset),
      cute::make_tensor(cute::make_gmem_ptr(y + strand()), cute::make_shape(Int<1>{})));
}

// ---------------------------------------------------------------- host side

template <class T>
char const* type_name() {
  if constexpr (std::is_same_v<T, bf16>) {
    return "bf16";
  } else if constexpr (std::is_same_v<T, f16>) {
    return "f16";
  } else {
    return "f32";
  }
}

template <class T>
std::vector<T> narrow(std::vector<float> const& v) {
  std::vector<T> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = T(v[i]);
  return out;
}

template <class T>
std::vector<double> widen(std::vector<T> const& v) {
  std::vector<double> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = double(float(v[i]));
  return out;
}

// The path a case is meant to take: a 16-byte group needs 16-byte aligned strips and a length
// that is a whole number of groups.
template <class T, int L>
std::string path_of(int offset) {
  int const group = 16 / int(sizeof(T)) > 0 ? 16 / int(sizeof(T)) : 1;
  bool const vector =
      L % group == 0 && (offset * int(sizeof(T))) % 16 == 0 && (L * int(sizeof(T))) % 16 == 0;
  return std::string(" L=") + std::to_string(L) + " offset " + std::to_string(offset) +
         (vector ? " (vector path)" : " (scalar path)");
}

// Compares the strips [offset, offset + n) and checks the elements around them stayed poisoned.
template <class T>
bool strips_match(std::vector<T> const& got, std::vector<double> const& want, int offset, int n,
                  double rtol, double atol, std::string& note) {
  std::vector<double> g(n), w(n);
  for (int i = 0; i < n; ++i) {
    g[i] = double(float(got[offset + i]));
    w[i] = want[i];
  }
  double const worst = tfgpu::worst_error(g, w, rtol, atol);
  note = tfgpu::describe(worst);
  bool untouched = true;
  for (int i = 0; i < offset; ++i) untouched = untouched && std::isnan(float(got[i]));
  for (std::size_t i = offset + n; i < got.size(); ++i)
    untouched = untouched && std::isnan(float(got[i]));
  if (!untouched) note += ", wrote outside the strips";
  return worst <= 1.0 && untouched;
}

template <int L, class Tin, class Tout>
void check_unary(tfgpu::Suite& suite, int offset) {
  int const n = kStrands * L;
  auto x = narrow<Tin>(suite.uniform(n + 16, -6.0f, 6.0f));
  tfgpu::DeviceBuffer<Tin> dx(n + 16);
  tfgpu::DeviceBuffer<Tout> dy(n + 16), dz(n + 16);
  dx.upload(x);
  dy.poison();
  dz.poison();
  unary_strips<L><<<G, kThreads>>>(ops::cast_op{}, dx.ptr, dy.ptr, offset);
  TF_LAUNCHED();
  unary_strips<L><<<G, kThreads>>>(ops::silu_op{}, dx.ptr, dz.ptr, offset);
  TF_LAUNCHED();
  std::vector<double> cast(n), silu(n);
  for (int i = 0; i < n; ++i) {
    float const v = float(x[offset + i]);
    cast[i] = double(float(Tout(v)));
    silu[i] = double(float(Tout(float(double(v) / (1.0 + std::exp(-double(v)))))));
  }
  std::string const name =
      std::string(type_name<Tin>()) + " -> " + type_name<Tout>() + path_of<Tin, L>(offset);
  std::string note;
  suite.check(strips_match(dy.download(), cast, offset, n, 0.0, 0.0, note),
              "vector unary cast " + name, note);
  bool const narrow_out = sizeof(Tout) == 2;
  suite.check(strips_match(dz.download(), silu, offset, n, narrow_out ? 8e-3 : 2e-6, 1e-6, note),
              "vector unary silu " + name, note);
}

template <int L, class Tin, class Tout>
void check_copy_through_registers(tfgpu::Suite& suite, int offset) {
  int const n = kStrands * L;
  auto x = narrow<Tin>(suite.uniform(n + 16));
  tfgpu::DeviceBuffer<Tin> dx(n + 16);
  tfgpu::DeviceBuffer<Tout> dy(n + 16);
  dx.upload(x);
  dy.poison();
  copy_through_registers<L><<<G, kThreads>>>(dx.ptr, dy.ptr, offset);
  TF_LAUNCHED();
  std::vector<double> want(n);
  for (int i = 0; i < n; ++i) want[i] = double(float(Tout(float(x[offset + i]))));
  std::string note;
  suite.check(strips_match(dy.download(), want, offset, n, 0.0, 0.0, note),
              std::string("vector copy ") + type_name<Tin>() + " -> f32 registers -> " +
                  type_name<Tout>() + path_of<Tin, L>(offset),
              note);
}

template <int L, class T, class Op>
void check_binary(tfgpu::Suite& suite, char const* op_name, Op op, double (*ref)(double, double),
                  int offset) {
  int const n = kStrands * L;
  auto a = narrow<T>(suite.uniform(n + 16, 0.5f, 4.0f));
  auto row = narrow<T>(suite.uniform(L + 16, 0.5f, 4.0f));
  auto col = narrow<T>(suite.uniform(kStrands, 0.5f, 4.0f));
  tfgpu::DeviceBuffer<T> da(n + 16), drow(L + 16), dcol(kStrands), o1(n + 16), o2(n + 16),
      o3(n + 16), o4(n + 16);
  da.upload(a);
  drow.upload(row);
  dcol.upload(col);
  for (auto* o : {&o1, &o2, &o3, &o4}) o->poison();
  binary_strips<L>
      <<<G, kThreads>>>(op, da.ptr, drow.ptr, dcol.ptr, o1.ptr, o2.ptr, o3.ptr, o4.ptr, offset);
  TF_LAUNCHED();
  std::vector<double> w1(n), w2(n), w3(n);
  auto round = [](double v) { return double(float(T(float(v)))); };
  for (int i = 0; i < n; ++i) {
    double const x = float(a[offset + i]);
    w1[i] = round(ref(x, float(row[offset + i % L])));
    w2[i] = round(ref(x, float(col[i / L])));
    w3[i] = round(ref(x, 0.75));
  }
  bool const narrow_t = sizeof(T) == 2;
  double const rtol = narrow_t ? 8e-3 : 2e-6;
  std::string const name =
      std::string("vector binary ") + op_name + " " + type_name<T>() + path_of<T, L>(offset);
  std::string note;
  suite.check(strips_match(o1.download(), w1, offset, n, rtol, 1e-6, note),
              name + ", row shared by all threads", note);
  suite.check(strips_match(o2.download(), w2, offset, n, rtol, 1e-6, note),
              name + ", per-thread gmem scalar broadcast along the strip", note);
  suite.check(strips_match(o3.download(), w3, offset, n, rtol, 1e-6, note),
              name + ", literal scalar", note);
  suite.check(strips_match(o4.download(), w1, offset, n, rtol, 1e-6, note),
              name + ", float registers with the shared row", note);
}

template <int L, class T>
void check_fill(tfgpu::Suite& suite, int offset) {
  int const n = kStrands * L;
  tfgpu::DeviceBuffer<T> dy(n + 16);
  dy.poison();
  fill_strips<L><<<G, kThreads>>>(dy.ptr, 0.1f, offset);
  TF_LAUNCHED();
  std::vector<double> want(n, double(float(T(0.1f))));
  std::string note;
  suite.check(strips_match(dy.download(), want, offset, n, 0.0, 0.0, note),
              std::string("vector fill ") + type_name<T>() + path_of<T, L>(offset), note);
}

template <int L, class T>
void check_sum(tfgpu::Suite& suite, int offset) {
  int const n = kStrands * L;
  auto x = narrow<T>(suite.uniform(n + 16));
  tfgpu::DeviceBuffer<T> dx(n + 16);
  tfgpu::DeviceBuffer<float> dy(kStrands);
  dx.upload(x);
  dy.poison();
  sum_strips<L><<<G, kThreads>>>(dx.ptr, dy.ptr, offset);
  TF_LAUNCHED();
  auto y = dy.download();
  bool ok = true;
  for (int t = 0; t < kStrands && ok; ++t) {
    float s = 0.0f;  // the kernel's order: element 0 first, in float
    for (int i = 0; i < L; ++i) s += float(x[offset + t * L + i]);
    ok = y[t] == s;
  }
  suite.check(ok, std::string("vector reduce sum of a gmem strip ") + type_name<T>() +
                      path_of<T, L>(offset));
}

template <class T>
void every_case(tfgpu::Suite& suite) {
  constexpr int V = 16 / int(sizeof(T));  // elements per 16 bytes
  for (int offset : {0, 1, V}) {
    check_unary<2 * V, T, T>(suite, offset);
    check_unary<2 * V, T, float>(suite, offset);
    check_unary<2 * V, float, T>(suite, offset);
    check_copy_through_registers<2 * V, T, T>(suite, offset);
    check_binary<2 * V, T>(
        suite, "mul", ops::mul_op{}, [](double x, double y) { return x * y; }, offset);
    check_binary<2 * V, T>(
        suite, "div", ops::div_op{}, [](double x, double y) { return x / y; }, offset);
    check_fill<2 * V, T>(suite, offset);
    check_sum<2 * V, T>(suite, offset);
  }
  // Lengths that are no whole number of 16-byte groups: always the scalar path.
  check_unary<V + V / 2, T, float>(suite, 0);
  check_binary<V + V / 2, T>(
      suite, "sub", ops::sub_op{}, [](double x, double y) { return x - y; }, 0);
  check_fill<V / 2, T>(suite, 0);
  check_sum<V + 2, T>(suite, 0);
}

int main() {
  tfgpu::Suite suite("vector_path");
  every_case<bf16>(suite);
  every_case<f16>(suite);
  every_case<float>(suite);
  return suite.finish();
}

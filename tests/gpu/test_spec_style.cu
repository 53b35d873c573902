// Device code in the spec's own style, on the GPU: cute::copy / cute::fill through the umbrella
// (spec 3.1, 3.2), a cute::Tensor whose layout is a ShardLayout (spec 2.9) through local(),
// shard_partition (spec 3.3), the ops and a reduce, and an unqualified copy under
// `using namespace tilefoundry::ops`, which copies one thread's strip and nothing else.
#include <tilefoundry/runtime.h>

TILEFOUNDRY_STATIC_PROGRAM_SHAPE(thread, 128);

#include "harness.cuh"

namespace tf = tilefoundry;
using cute::Int;
using TS = tf::TopologyScope;
using bf16 = cutlass::bfloat16_t;

constexpr int kThreads = 128;
constexpr int kPer = 8;
constexpr int G = 21;
constexpr int N = G * kThreads * kPer;

// (G, 128, 8) split over (cta, thread): each thread owns 8 contiguous elements.
__device__ auto rows_shard_layout() {
  int const g = tf::program_dim<TS::cta>();
  auto mesh = tf::make_mesh<TS::cta, TS::thread>(cute::make_layout(
      cute::make_shape(g, Int<kThreads>{}), cute::make_stride(Int<1>{}, Int<1>{})));
  auto l = cute::make_layout(cute::make_shape(g, Int<kThreads>{}, Int<kPer>{}),
                             cute::make_stride(Int<kThreads * kPer>{}, Int<kPer>{}, Int<1>{}));
  return tf::make_shard_layout(l, cute::make_tuple(tf::shard::S<0>{}, tf::shard::S<1>{}), mesh);
}

// Generated code that opens only the ops namespace.
namespace ops_only {
using namespace tilefoundry::ops;
template <class Src, class Dst>
__device__ void unqualified_copy(Src const& src, Dst&& dst) {
  copy(src, dst);
}
}  // namespace ops_only

// cute::copy gmem -> registers -> gmem (bf16 -> f32 -> bf16), then cute::fill of a second output.
__global__ void cute_algorithms(bf16 const* x, bf16* y, float* z) {
  int const t = tf::program_id<TS::cta>() * kThreads + tf::program_id<TS::thread>();
  auto src = cute::make_tensor(cute::make_gmem_ptr(x + t * kPer), cute::make_shape(Int<kPer>{}));
  auto dst = cute::make_tensor(cute::make_gmem_ptr(y + t * kPer), cute::make_shape(Int<kPer>{}));
  auto frag = cute::make_tensor<float>(cute::make_shape(Int<kPer>{}));
  cute::copy(src, frag);
  cute::copy(frag, dst);
  cute::fill(cute::make_tensor(cute::make_gmem_ptr(z + t * kPer), cute::make_shape(Int<kPer>{})),
             0.25f);
}

// A distributed cute tensor: shard_partition is local(), the ops read and write the local view,
// and a reduce over the whole row (intra-CTA tier) takes distributed operands too.
__global__ void distributed_cute_tensor(float const* x, float* y, float* row_sum, int* same_view) {
  __shared__ float ws[2 * kThreads];
  auto xt = tf::make_tensor(cute::make_gmem_ptr(x), rows_shard_layout());
  auto yt = tf::make_tensor(cute::make_gmem_ptr(y), rows_shard_layout());
  int const t = tf::program_id<TS::cta>() * kThreads + tf::program_id<TS::thread>();
  same_view[t] = tf::shard_partition(xt).data() == tf::local(xt).data() &&
                 cute::raw_pointer_cast(tf::local(xt).data()) == x + t * kPer;
  tf::ops::binary(tf::ops::add_op{}, xt, 1.0f, yt);
  auto sl = rows_shard_layout();
  int const g = tf::program_dim<TS::cta>();
  auto rl = cute::make_layout(cute::make_shape(g, Int<1>{}, Int<1>{}),
                              cute::make_stride(Int<1>{}, Int<0>{}, Int<0>{}));
  auto st = tf::make_tensor(
      cute::make_gmem_ptr(row_sum),
      tf::make_shard_layout(rl, cute::make_tuple(tf::shard::S<0>{}, tf::shard::B{}), sl.mesh));
  auto w = tf::ops::make_reduce_workspace(
      cute::make_tensor(cute::make_smem_ptr(&ws[0]), cute::make_shape(Int<2 * kThreads>{})));
  tf::ops::reduce<tf::ops::sum_op, cute::seq<1, 2>>(xt, st, w);
}

// Only thread 5 of CTA 3 copies: its 8 elements, not the 1024 of the CTA or the whole tensor.
__global__ void unqualified_copy_under_ops(float const* x, float* y) {
  auto l = rows_shard_layout().layout;
  auto xs =
      tf::make_shard_tensor(cute::make_tensor(cute::make_gmem_ptr(x), l), l, rows_shard_layout());
  auto ys =
      tf::make_shard_tensor(cute::make_tensor(cute::make_gmem_ptr(y), l), l, rows_shard_layout());
  if (tf::program_id<TS::cta>() == 3 && tf::program_id<TS::thread>() == 5) {
    ops_only::unqualified_copy(xs, ys);
  }
}

template <class T>
std::vector<T> narrow(std::vector<float> const& v) {
  std::vector<T> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = T(v[i]);
  return out;
}

int main() {
  tfgpu::Suite suite("spec_style");
  {
    auto x = narrow<bf16>(suite.uniform(N));
    tfgpu::DeviceBuffer<bf16> dx(N), dy(N);
    tfgpu::DeviceBuffer<float> dz(N);
    dx.upload(x);
    dy.poison();
    dz.poison();
    cute_algorithms<<<G, kThreads>>>(dx.ptr, dy.ptr, dz.ptr);
    TF_LAUNCHED();
    auto y = dy.download();
    auto z = dz.download();
    bool copied = true, filled = true;
    for (int i = 0; i < N; ++i) {
      copied = copied && float(y[i]) == float(x[i]);
      filled = filled && z[i] == 0.25f;
    }
    suite.check(copied, "cute::copy bf16 gmem -> f32 registers -> bf16 gmem");
    suite.check(filled, "cute::fill f32 gmem");
  }
  {
    auto x = suite.uniform(N);
    tfgpu::DeviceBuffer<float> dx(N), dy(N), ds(G);
    tfgpu::DeviceBuffer<int> dv(G * kThreads);
    dx.upload(x);
    dy.poison();
    ds.poison();
    dv.poison();
    distributed_cute_tensor<<<G, kThreads>>>(dx.ptr, dy.ptr, ds.ptr, dv.ptr);
    TF_LAUNCHED();
    auto y = dy.download();
    auto s = ds.download();
    auto v = dv.download();
    bool views = true, added = true, summed = true;
    for (int t = 0; t < G * kThreads; ++t) views = views && v[t] == 1;
    for (int i = 0; i < N; ++i) added = added && y[i] == x[i] + 1.0f;
    for (int c = 0; c < G; ++c) {
      double want = 0, mag = 0;
      for (int i = 0; i < kThreads * kPer; ++i) {
        want += x[c * kThreads * kPer + i];
        mag += std::fabs(x[c * kThreads * kPer + i]);
      }
      summed = summed && std::fabs(s[c] - want) <= 2e-6 * mag;
    }
    suite.check(views,
                "distributed cute tensor: shard_partition and local() are this thread's strip");
    suite.check(added, "distributed cute tensor: ops::binary through the local views");
    suite.check(summed, "distributed cute tensor: ops::reduce over the row (intra-CTA tier)");
  }
  {
    auto x = suite.uniform(N);
    tfgpu::DeviceBuffer<float> dx(N), dy(N);
    dx.upload(x);
    dy.poison();
    unqualified_copy_under_ops<<<G, kThreads>>>(dx.ptr, dy.ptr);
    TF_LAUNCHED();
    auto y = dy.download();
    int const first = (3 * kThreads + 5) * kPer;
    int written = 0;
    bool right = true;
    for (int i = 0; i < N; ++i) {
      bool const mine = i >= first && i < first + kPer;
      if (!std::isnan(y[i])) ++written;
      right = right && (mine ? y[i] == x[i] : std::isnan(y[i]));
    }
    suite.check(right && written == kPer,
                "unqualified copy under ops on ShardTensors copies one thread's 8 elements",
                std::to_string(written) + " written");
  }
  return suite.finish();
}

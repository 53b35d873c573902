// Compile-only (nvcc, sm_90a): every op of the CUDA target in every tier, so that a CUDA compile
// error fails `make test-cpp`. Nothing here runs; tests/gpu runs the same entries on an H200.
#include <tilefoundry/runtime.h>

TILEFOUNDRY_STATIC_PROGRAM_SHAPE(thread, 128);

namespace {

using namespace tilefoundry;
using cute::Int;
using cute::seq;
using TS = TopologyScope;
using bf16 = cutlass::bfloat16_t;
using f16 = cutlass::half_t;
using ops::detail::reduce_plan_t;
using ops::detail::reduce_tier;

// Thread mesh (cta, 4 warps, 32 lanes); a row of 256 elements per CTA, 2 per thread.
template <class T>
struct Rows {
  T* p;
  __device__ auto mesh() const {
    return make_mesh<TS::cta, TS::thread>(
        cute::make_layout(cute::make_shape(int(gridDim.x), Int<4>{}, Int<32>{}),
                          cute::make_stride(Int<1>{}, Int<32>{}, Int<1>{})));
  }
  __device__ auto layout() const {
    return cute::make_layout(cute::make_shape(int(gridDim.x), Int<4>{}, Int<32>{}, Int<2>{}),
                             cute::make_stride(Int<256>{}, Int<64>{}, Int<2>{}, Int<1>{}));
  }
  template <class... A>
  __device__ auto shard(A... attrs) const {
    auto l = layout();
    return make_shard_tensor(cute::make_tensor(cute::make_gmem_ptr(p), l), l,
                             make_shard_layout(l, cute::make_tuple(attrs...), mesh()));
  }
};

template <class T>
struct Out {
  float* p;
  template <class Shape, class Stride, class... A>
  __device__ auto shard(Shape s, Stride d, A... attrs) const {
    auto l = cute::make_layout(s, d);
    auto mesh = Rows<T>{nullptr}.mesh();
    return make_shard_tensor(cute::make_tensor(cute::make_gmem_ptr(p), l), l,
                             make_shard_layout(l, cute::make_tuple(attrs...), mesh));
  }
};

template <class Op, class T>
__device__ void every_tier(T const* x, float* y, float* ws_raw) {
  Rows<T const> rows{x};
  auto xs = rows.shard(shard::S<0>{}, shard::S<1>{}, shard::S<2>{});
  auto ws = cute::make_tensor(cute::make_smem_ptr(ws_raw), cute::make_shape(Int<256>{}));
  auto ws2 = cute::make_tensor(cute::make_smem_ptr(ws_raw), cute::make_shape(Int<512>{}));
  int const g = gridDim.x;
  Out<T> out{y};
  // plain: each thread reduces its own pair
  auto yp = out.shard(cute::make_shape(g, Int<4>{}, Int<32>{}, Int<1>{}),
                      cute::make_stride(Int<128>{}, Int<32>{}, Int<1>{}, Int<0>{}), shard::S<0>{},
                      shard::S<1>{}, shard::S<2>{});
  static_assert(reduce_plan_t<Op, seq<3>, decltype(xs), decltype(yp)>::tier == reduce_tier::plain);
  ops::reduce<Op, seq<3>>(xs, yp);
  // intra-warp: across the 32 lanes
  auto yw = out.shard(cute::make_shape(g, Int<4>{}, Int<1>{}, Int<1>{}),
                      cute::make_stride(Int<4>{}, Int<1>{}, Int<0>{}, Int<0>{}), shard::S<0>{},
                      shard::S<1>{}, shard::B{});
  static_assert(reduce_plan_t<Op, seq<2, 3>, decltype(xs), decltype(yw)>::tier ==
                reduce_tier::intra_warp);
  ops::reduce<Op, seq<2, 3>>(xs, yw);
  // cross-warp: across the 4 warps, lane by lane
  auto yx = out.shard(cute::make_shape(g, Int<1>{}, Int<32>{}, Int<2>{}),
                      cute::make_stride(Int<64>{}, Int<0>{}, Int<2>{}, Int<1>{}), shard::S<0>{},
                      shard::B{}, shard::S<2>{});
  static_assert(reduce_plan_t<Op, seq<1>, decltype(xs), decltype(yx)>::tier ==
                reduce_tier::cross_warp);
  ops::reduce<Op, seq<1>>(xs, yx, ws);
  // intra-CTA: the whole row
  auto yc = out.shard(cute::make_shape(g, Int<1>{}, Int<1>{}, Int<1>{}),
                      cute::make_stride(Int<1>{}, Int<0>{}, Int<0>{}, Int<0>{}), shard::S<0>{},
                      shard::B{}, shard::B{});
  static_assert(reduce_plan_t<Op, seq<1, 2, 3>, decltype(xs), decltype(yc)>::tier ==
                reduce_tier::intra_cta);
  ops::reduce<Op, seq<1, 2, 3>>(xs, yc, ws);
  // the same two through a reduce_workspace: one barrier each, halves alternating
  auto dw = ops::make_reduce_workspace(ws2);
  ops::reduce<Op, seq<1>>(xs, yx, dw);
  ops::reduce<Op, seq<1, 2, 3>>(xs, yc, dw);
  // plain operands
  ops::reduce<Op, seq<0>>(cute::make_tensor(x, cute::make_shape(Int<8>{})),
                          cute::make_tensor(y, cute::make_shape(Int<1>{})));
}

}  // namespace

__global__ void reduce_kernels(float const* xf, bf16 const* xb, float* y) {
  __shared__ float ws[512];
  every_tier<ops::sum_op>(xf, y, ws);
  every_tier<ops::mean_op>(xf, y, ws);
  every_tier<ops::max_op>(xf, y, ws);
  every_tier<ops::min_op>(xf, y, ws);
  every_tier<ops::absmax_op>(xf, y, ws);
  every_tier<ops::sum_op>(xb, y, ws);
  every_tier<ops::mean_op>(xb, y, ws);
  every_tier<ops::max_op>(xb, y, ws);
  every_tier<ops::min_op>(xb, y, ws);
  every_tier<ops::absmax_op>(xb, y, ws);
}

// The arg-reduction's split form: a CTA's part of its tile of two bf16 rows, then the merge of
// every CTA's parts.
__global__ void arg_split_kernels(bf16 const* x, float* values, int64_t* positions, int64_t* out) {
  auto const tile = cute::make_tensor(
      cute::make_gmem_ptr(x + blockIdx.x * 512),
      cute::make_layout(cute::make_shape(Int<2>{}, Int<512>{}), cute::make_stride(4096, Int<1>{})));
  ops::reduce_parts(tile, int64_t(blockIdx.x) * 512,
                    ops::part_of<ops::argmax_op>(
                        cute::make_tensor(cute::make_gmem_ptr(values + 2 * blockIdx.x),
                                          cute::make_shape(Int<2>{})),
                        cute::make_tensor(cute::make_gmem_ptr(positions + 2 * blockIdx.x),
                                          cute::make_shape(Int<2>{}))));
  auto const parts =
      cute::make_layout(cute::make_shape(8, Int<2>{}), cute::make_stride(Int<2>{}, Int<1>{}));
  ops::reduce_merges(int64_t(4096),
                     ops::merge_of<ops::argmax_op>(
                         cute::make_tensor(cute::make_gmem_ptr(values), parts),
                         cute::make_tensor(cute::make_gmem_ptr(positions), parts),
                         cute::make_tensor(cute::make_gmem_ptr(out), cute::make_shape(Int<2>{}))));
}

// The reduce family's split form: a CTA's part of its tile of two bf16 rows, then the merge of
// every CTA's parts (a sum and a mean of the 4096 columns).
__global__ void reduce_split_kernels(bf16 const* x, float* values, float* sums, bf16* means) {
  auto const tile = cute::make_tensor(
      cute::make_gmem_ptr(x + blockIdx.x * 512),
      cute::make_layout(cute::make_shape(Int<2>{}, Int<512>{}), cute::make_stride(4096, Int<1>{})));
  ops::reduce_parts(tile, int64_t(blockIdx.x) * 512,
                    ops::part_of<ops::sum_op>(cute::make_tensor(
                        cute::make_gmem_ptr(values + 2 * blockIdx.x), cute::make_shape(Int<2>{}))));
  auto const parts = cute::make_tensor(
      cute::make_gmem_ptr(values),
      cute::make_layout(cute::make_shape(8, Int<2>{}), cute::make_stride(Int<2>{}, Int<1>{})));
  ops::reduce_merges(
      int64_t(4096),
      ops::merge_of<ops::sum_op>(parts,
                                 cute::make_tensor(cute::make_gmem_ptr(sums), cute::make_shape(2))),
      ops::merge_of<ops::mean_op>(
          parts, cute::make_tensor(cute::make_gmem_ptr(means), cute::make_shape(2))));
}

// 128 threads as one mesh axis: lanes within each warp, then the 4 warps; a bf16 row of 1024 in
// strips of 8 per thread, reduced from gmem through the vector path into registers.
__global__ void one_thread_axis_kernel(bf16 const* x, float* y) {
  __shared__ float ws[256];
  int const g = gridDim.x;
  auto mesh = make_mesh<TS::cta, TS::thread>(
      cute::make_layout(cute::make_shape(g, Int<128>{}), cute::make_stride(Int<1>{}, Int<1>{})));
  auto xl = cute::make_layout(cute::make_shape(g, Int<128>{}, Int<8>{}),
                              cute::make_stride(Int<1024>{}, Int<8>{}, Int<1>{}));
  auto yl = cute::make_layout(cute::make_shape(g, Int<1>{}, Int<1>{}),
                              cute::make_stride(Int<1>{}, Int<0>{}, Int<0>{}));
  auto xs = tilefoundry::make_tensor(
      cute::make_gmem_ptr(x),
      make_shard_layout(xl, cute::make_tuple(shard::S<0>{}, shard::S<1>{}), mesh));
  auto ys = tilefoundry::make_tensor(
      cute::make_gmem_ptr(y),
      make_shard_layout(yl, cute::make_tuple(shard::S<0>{}, shard::B{}), mesh));
  using Plan = reduce_plan_t<ops::sum_op, seq<1, 2>, decltype(xs), decltype(ys)>;
  static_assert(Plan::tier == reduce_tier::intra_cta && Plan::n_lane_masks == 5);
  static_assert(Plan::lane_mask<0> == 1 && Plan::lane_mask<4> == 16);
  static_assert(Plan::n_warp_axes == 1 && Plan::warp_stride<0> == 32 && Plan::warp_extent<0> == 4);
  static_assert(Plan::peer_count == 4 && Plan::peer_offset<3> == 96);
  auto w = ops::make_reduce_workspace(
      cute::make_tensor(cute::make_smem_ptr(&ws[0]), cute::make_shape(Int<256>{})));
  ops::reduce<ops::sum_op, seq<1, 2>>(xs, ys, w);
  ops::reduce<ops::max_op, seq<1, 2>>(xs, ys, w);
}

// Device code in the spec's own style (spec 2.9, 3.1, 3.2, 3.3): CuTe's algorithms and a cute
// tensor whose layout is a ShardLayout. (An unqualified copy under using namespace
// tilefoundry::ops needs a translation unit that does not open tilefoundry: tests/gpu/
// test_spec_style.cu, compiled by its own check.)
__global__ void spec_style_kernels(bf16 const* x, bf16* y, float* z) {
  auto g8 = [](auto* p) {
    return cute::make_tensor(cute::make_gmem_ptr(p), cute::make_shape(Int<8>{}));
  };
  auto frag = cute::make_tensor<float>(cute::make_shape(Int<8>{}));
  cute::copy(g8(x), frag);
  cute::copy(frag, g8(y));
  cute::fill(frag, 0.5f);
  cute::fill(g8(z), 0.5f);
  Rows<bf16 const> rows{x};
  auto sl = rows.shard(shard::S<0>{}, shard::S<1>{}, shard::S<2>{}).shard_layout;
  auto xt = tilefoundry::make_tensor(cute::make_gmem_ptr(x), sl);
  auto yt = tilefoundry::make_tensor(cute::make_gmem_ptr(y), sl);
  auto mine = shard_partition(xt);
  auto same = local(xt);
  ops::unary(ops::silu_op{}, xt, yt);
  ops::binary(ops::mul_op{}, xt, mine, yt);
  ops::copy(same, yt);
  auto whole = cute::make_tensor(cute::make_gmem_ptr(y), sl.layout);
  tilefoundry::copy(xt, whole);
}

namespace {

template <class Op, class T>
__device__ void unary_on(Op op, T const* x, T* y) {
  ops::unary(op, cute::make_tensor(cute::make_gmem_ptr(x), cute::make_shape(Int<8>{})),
             cute::make_tensor(cute::make_gmem_ptr(y), cute::make_shape(Int<8>{})));
}

template <class T>
__device__ void every_unary(T const* x, T* y) {
  unary_on(ops::identity_op{}, x, y);
  unary_on(ops::cast_op{}, x, y);
  unary_on(ops::copy_n_op{{}, 5}, x, y);
  unary_on(ops::clamp_op<float>{-1.0f, 1.0f}, x, y);
  unary_on(ops::neg_op{}, x, y);
  unary_on(ops::abs_op{}, x, y);
  unary_on(ops::square_op{}, x, y);
  unary_on(ops::relu_op{}, x, y);
  unary_on(ops::exp_op{}, x, y);
  unary_on(ops::log_op{}, x, y);
  unary_on(ops::sqrt_op{}, x, y);
  unary_on(ops::rsqrt_op{}, x, y);
  unary_on(ops::tanh_op{}, x, y);
  unary_on(ops::sigmoid_op{}, x, y);
  unary_on(ops::silu_op{}, x, y);
  unary_on(ops::exp_rounded_op{}, x, y);
  unary_on(ops::sigmoid_rounded_op{}, x, y);
  unary_on(ops::silu_rounded_op{}, x, y);
  unary_on(ops::gelu_op{}, x, y);
  unary_on(ops::gelu_tanh_op{}, x, y);
}

template <class Op, class T>
__device__ void binary_on(Op op, T const* a, T const* b, T* o) {
  auto ta = cute::make_tensor(cute::make_gmem_ptr(a), cute::make_shape(Int<4>{}, Int<8>{}));
  auto col = cute::make_tensor(cute::make_gmem_ptr(b), cute::make_shape(Int<4>{}, Int<1>{}));
  auto row = cute::make_tensor(cute::make_gmem_ptr(b), cute::make_shape(Int<8>{}));
  auto to = cute::make_tensor(cute::make_gmem_ptr(o), cute::make_shape(Int<4>{}, Int<8>{}));
  ops::binary(op, ta, ta, to);
  ops::binary(op, ta, col, to);
  ops::binary(op, row, ta, to);
  ops::binary(op, ta, 2.0f, to);
}

template <class T>
__device__ void every_binary(T const* a, T const* b, T* o) {
  binary_on(ops::add_op{}, a, b, o);
  binary_on(ops::sub_op{}, a, b, o);
  binary_on(ops::mul_op{}, a, b, o);
  binary_on(ops::div_op{}, a, b, o);
  binary_on(ops::max_op{}, a, b, o);
  binary_on(ops::min_op{}, a, b, o);
  binary_on(ops::pow_op{}, a, b, o);
}

template <class T>
__device__ void every_comparison_and_select(T const* a, T const* b, bool* k, T* o) {
  auto ta = cute::make_tensor(cute::make_gmem_ptr(a), cute::make_shape(Int<4>{}, Int<8>{}));
  auto tb = cute::make_tensor(cute::make_gmem_ptr(b), cute::make_shape(Int<4>{}, Int<8>{}));
  auto tk = cute::make_tensor(cute::make_gmem_ptr(k), cute::make_shape(Int<4>{}, Int<8>{}));
  auto to = cute::make_tensor(cute::make_gmem_ptr(o), cute::make_shape(Int<4>{}, Int<8>{}));
  ops::binary(ops::lt_op{}, ta, tb, tk);
  ops::binary(ops::le_op{}, ta, tb, tk);
  ops::binary(ops::gt_op{}, ta, tb, tk);
  ops::binary(ops::ge_op{}, ta, tb, tk);
  ops::binary(ops::eq_op{}, ta, tb, tk);
  ops::binary(ops::ne_op{}, ta, 2.0f, tk);
  ops::ternary(ops::select_op{}, tk, ta, tb, to);
  ops::ternary(ops::select_op{}, tk, ta, T(0.5f), to);
}

}  // namespace

__global__ void elementwise_kernels(float const* xf, float* yf, bf16 const* xb, bf16* yb, f16* yh) {
  every_unary(xf, yf);
  every_unary(xb, yb);
  every_unary(static_cast<f16 const*>(yh), yh);
  every_binary(xf, xf + 64, yf);
  every_binary(xb, xb + 64, yb);
  every_binary(static_cast<f16 const*>(yh), static_cast<f16 const*>(yh) + 64, yh);
  ops::fill(cute::make_tensor(cute::make_gmem_ptr(yh), cute::make_shape(Int<16>{})), 0.5f);
  ops::fill(cute::make_tensor(cute::make_gmem_ptr(yf), cute::make_shape(Int<16>{})), 0.5f);
  every_comparison_and_select(xf, xf + 64, reinterpret_cast<bool*>(yh), yf);
  every_comparison_and_select(xb, xb + 64, reinterpret_cast<bool*>(yh), yb);
  Rows<float> rows{yf};
  auto s = rows.shard(shard::S<0>{}, shard::S<1>{}, shard::S<2>{});
  ops::fill(s, 1.0f);
  ops::fill(cute::make_tensor(cute::make_gmem_ptr(yb), cute::make_shape(Int<16>{})), 0.5f);
  // copy: 16-byte words (bf16 x 8), 8-byte, 4-byte, converting, and a register fragment
  auto g8 = [](auto* p) {
    return cute::make_tensor(cute::make_gmem_ptr(p), cute::make_shape(Int<8>{}));
  };
  ops::copy(g8(xb), g8(yb));
  ops::copy(cute::make_tensor(cute::make_gmem_ptr(xb), cute::make_shape(Int<4>{})),
            cute::make_tensor(cute::make_gmem_ptr(yb), cute::make_shape(Int<4>{})));
  ops::copy(cute::make_tensor(cute::make_gmem_ptr(xb), cute::make_shape(Int<2>{})),
            cute::make_tensor(cute::make_gmem_ptr(yb), cute::make_shape(Int<2>{})));
  ops::copy(g8(xf), g8(yh));
  auto frag = cute::make_tensor<float>(cute::make_shape(Int<8>{}));
  ops::copy(g8(xf), frag);
  ops::copy(frag, g8(yf));
  auto pair = cute::make_tensor<float>(cute::make_shape(Int<2>{}));
  ops::copy(local(s), pair);
  auto whole = cute::make_tensor(cute::make_gmem_ptr(yf + 1024), s.engine.layout());
  tilefoundry::copy(s, whole);
  tilefoundry::copy(whole, s);
  auto v = shard_partition(s);
  v(0) = float(program_dim<TS::cta>() + program_dim<TS::thread>() + program_id<TS::cta>());
}

__global__ void sync_kernels(unsigned int* grid_bar) {
  ops::sync<ops::SyncKind::cta>();
  ops::sync<ops::SyncKind::warp>();
  ops::sync<ops::SyncKind::warp_masked, 0, 0, 0x0000ffffu>();
  ops::sync<ops::SyncKind::named, 0, 64, 0u, 1>();
  ops::sync<ops::SyncKind::named, 64, 64, 0u, 2>();
  ops::sync<ops::SyncKind::grid>(grid_bar);
}

__global__ void copy_async_kernels(float const* xf, bf16 const* xb, char const* xc) {
  __shared__ alignas(16) float sf[16];
  __shared__ alignas(16) bf16 sb[16];
  __shared__ alignas(16) char sc[16];
  auto s = [](auto* p, auto n) {
    return cute::make_tensor(cute::make_smem_ptr(p), cute::make_shape(n));
  };
  auto g = [](auto* p, auto n) {
    return cute::make_tensor(cute::make_gmem_ptr(p), cute::make_shape(n));
  };
  ops::copy_async(g(xf, Int<4>{}), s(sf, Int<4>{}));                // 16-byte cp.async.cg
  ops::copy_async(g(xb, Int<4>{}), s(sb, Int<4>{}));                // 8-byte cp.async.ca
  ops::copy_async(g(xb, Int<2>{}), s(sb, Int<2>{}));                // 4-byte cp.async.ca
  ops::copy_async(g(xc, Int<3>{}), s(sc, Int<3>{}));                // 1-byte elements: plain copy
  ops::copy_async(g(xf, 5), s(sf, 5));                              // dynamic extent: no words
  ops::detail::copy_async_plain(g(xf, Int<4>{}), s(sf, Int<4>{}));  // the path below sm_80
  ops::cp_async_commit();
  ops::cp_async_wait<0>();
  ops::cp_async_wait<1>();
}

// The view helpers are host-device (spec 3, "Annotation convention"): host code of a CUDA
// translation unit uses them too, as the single instance it is outside any launch.
void host_views(float* p) {
  auto layout = cute::make_layout(cute::make_shape(Int<4>{}, Int<8>{}),
                                  cute::make_stride(Int<8>{}, Int<1>{}));
  auto mesh = make_mesh<TS::cta>(cute::make_layout(cute::make_shape(Int<4>{})));
  auto s = make_shard_tensor(cute::make_tensor(p, layout), layout,
                             make_shard_layout(layout, cute::make_tuple(shard::S<0>{}), mesh));
  auto mine = local(s);
  auto same = shard_partition(s);
  float buf[32];
  auto plain = cute::make_tensor(&buf[0], layout);
  tilefoundry::copy(s, plain);
  tilefoundry::copy(plain, s);
  mine(0, 0) = same(0, 1) + float(program_id<TS::cta>());
}

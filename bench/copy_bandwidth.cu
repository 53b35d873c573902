// Device-to-device copy written with the runtime: each CTA owns a tile of Iter x 256 x 4 floats,
// each thread the 4-float vectors at stride 256 within it, taken by local() and moved by
// ops::copy (which turns them into 16-byte words and loads all Iter before storing any).
// A second kernel moves bf16 the way a row kernel does: Iter strips of 8 bf16 per thread into
// float registers and back (ops::copy converting both ways, 16-byte accesses, packed
// conversions). Built as a shared library; bench/copy_bandwidth.py times both against torch in
// one process.
#include <tilefoundry/runtime.h>

TILEFOUNDRY_STATIC_PROGRAM_SHAPE(thread, 256);

namespace {

using namespace tilefoundry;
using cute::Int;
using TS = TopologyScope;

constexpr int kThreads = 256;
constexpr int kVec = 4;  // floats per 16-byte word

template <int Iter>
__global__ void __launch_bounds__(kThreads)
    copy_tiles(float const* __restrict__ x, float* __restrict__ y) {
  int const ctas = program_dim<TS::cta>();
  auto mesh = make_mesh<TS::cta, TS::thread>(cute::make_layout(
      cute::make_shape(ctas, Int<kThreads>{}), cute::make_stride(Int<1>{}, Int<1>{})));
  auto tile = cute::make_layout(cute::make_shape(ctas, Int<Iter>{}, Int<kThreads>{}, Int<kVec>{}),
                                cute::make_stride(Int<Iter * kThreads * kVec>{},
                                                  Int<kThreads * kVec>{}, Int<kVec>{}, Int<1>{}));
  auto attrs = cute::make_tuple(shard::S<0>{}, shard::S<2>{});
  auto src = make_shard_tensor(cute::make_tensor(cute::make_gmem_ptr(x), tile), tile,
                               make_shard_layout(tile, attrs, mesh));
  auto dst = make_shard_tensor(cute::make_tensor(cute::make_gmem_ptr(y), tile), tile,
                               make_shard_layout(tile, attrs, mesh));
  ops::copy(local(src), local(dst));
}

constexpr int kStrip = 8;  // bf16 per 16-byte word

template <int Iter>
__global__ void __launch_bounds__(kThreads)
    copy_bf16_via_f32(cutlass::bfloat16_t const* __restrict__ x,
                      cutlass::bfloat16_t* __restrict__ y) {
  int const ctas = program_dim<TS::cta>();
  auto mesh = make_mesh<TS::cta, TS::thread>(cute::make_layout(
      cute::make_shape(ctas, Int<kThreads>{}), cute::make_stride(Int<1>{}, Int<1>{})));
  auto tile =
      cute::make_layout(cute::make_shape(ctas, Int<Iter>{}, Int<kThreads>{}, Int<kStrip>{}),
                        cute::make_stride(Int<Iter * kThreads * kStrip>{}, Int<kThreads * kStrip>{},
                                          Int<kStrip>{}, Int<1>{}));
  auto attrs = cute::make_tuple(shard::S<0>{}, shard::S<2>{});
  auto src = tilefoundry::make_tensor(cute::make_gmem_ptr(x), make_shard_layout(tile, attrs, mesh));
  auto dst = tilefoundry::make_tensor(cute::make_gmem_ptr(y), make_shard_layout(tile, attrs, mesh));
  auto regs = cute::make_tensor<float>(cute::make_shape(Int<Iter>{}, Int<kStrip>{}));
  ops::copy(src, regs);
  ops::copy(regs, dst);
}

template <int Iter>
int launch_bf16(void const* x, void* y, long long n, cudaStream_t stream) {
  long long const per_cta = static_cast<long long>(Iter) * kThreads * kStrip;
  if (n % per_cta != 0 || n / per_cta > 0x7fffffffLL)
    return static_cast<int>(cudaErrorInvalidValue);
  copy_bf16_via_f32<Iter><<<static_cast<unsigned>(n / per_cta), kThreads, 0, stream>>>(
      static_cast<cutlass::bfloat16_t const*>(x), static_cast<cutlass::bfloat16_t*>(y));
  return static_cast<int>(cudaGetLastError());
}

template <int Iter>
int launch(float const* x, float* y, long long n, cudaStream_t stream) {
  long long const per_cta = static_cast<long long>(Iter) * kThreads * kVec;
  if (n % per_cta != 0 || n / per_cta > 0x7fffffffLL)
    return static_cast<int>(cudaErrorInvalidValue);
  copy_tiles<Iter><<<static_cast<unsigned>(n / per_cta), kThreads, 0, stream>>>(x, y);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

// Copies n floats from x to y on stream; returns a cudaError_t. iter is the number of 16-byte
// words each thread moves (2, 4 or 8).
extern "C" int tf_copy_f32(void const* x, void* y, long long n, int iter, void* stream) {
  auto const s = static_cast<cudaStream_t>(stream);
  auto const* in = static_cast<float const*>(x);
  auto* out = static_cast<float*>(y);
  switch (iter) {
    case 2:
      return launch<2>(in, out, n, s);
    case 4:
      return launch<4>(in, out, n, s);
    case 8:
      return launch<8>(in, out, n, s);
    default:
      return static_cast<int>(cudaErrorInvalidValue);
  }
}

// Copies n bf16 from x to y through float registers on stream; returns a cudaError_t. iter is the
// number of 16-byte strips each thread moves (2, 4 or 8).
extern "C" int tf_copy_bf16_via_f32(void const* x, void* y, long long n, int iter, void* stream) {
  auto const s = static_cast<cudaStream_t>(stream);
  switch (iter) {
    case 2:
      return launch_bf16<2>(x, y, n, s);
    case 4:
      return launch_bf16<4>(x, y, n, s);
    case 8:
      return launch_bf16<8>(x, y, n, s);
    default:
      return static_cast<int>(cudaErrorInvalidValue);
  }
}

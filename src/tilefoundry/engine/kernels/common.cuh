// Device helpers the decode engine's hand-written kernels share: 16-byte loads of eight bf16
// values and their conversion to float, bf16 rounding as torch rounds, warp reductions, and the
// two halves of Programmatic Dependent Launch (PDL).
//
// Weights are streamed: every decode step reads each weight once, and all of them (3.4 GB for
// Qwen3-1.7B) are far larger than L2, so weight loads skip L1 (L1::no_allocate) and ask L2 for
// 256-byte lines. Activations (x, the norm weight, the KV cache) go through the ordinary cached
// path. The runtime's ops (spec 3) move whole CuTe tiles; these kernels stream raw rows with cache
// hints and PDL, which the ops do not express: they take from the runtime its vector word type,
// its packed bf16 <-> float conversions (ops/packed.h) and its scalar math.
#pragma once

#include <tilefoundry/runtime.h>

#include <cstdint>

namespace tilefoundry {
namespace engine {

constexpr int kWarp = 32;

/// Sixteen bytes: eight bf16 values, the unit every kernel here loads and stores.
using Word = ops::detail::vector_word<16>::type;
static_assert(sizeof(Word) == 16, "a Word is 16 bytes");
constexpr int kPerWord = 8;  // bf16 values in a Word

// ---- loads -------------------------------------------------------------------------------------

/// A weight word, streamed: not kept in L1, 256-byte L2 lines. The asm is volatile so that it stays
/// after wait_for_inputs() (PDL): the previous kernel in the stream may have written the weights.
__device__ __forceinline__ Word load_weight(Word const* p) {
  Word v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

/// A word of data this kernel never writes (read-only for its whole run), through the cached
/// non-coherent path.
__device__ __forceinline__ Word load_input(Word const* p) { return __ldg(p); }

/// Asks L2 for the line holding p; no register is written, so it is safe before wait_for_inputs().
__device__ __forceinline__ void prefetch_l2(void const* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

// ---- bf16 <-> float ----------------------------------------------------------------------------

/// The eight bf16 values of w as floats (the runtime's packed bf16 conversion, two at a time).
__device__ __forceinline__ void unpack(Word const& w, float (&f)[kPerWord]) {
  using ops::detail::packed_kind;
  uint32_t const u[4] = {w.x, w.y, w.z, w.w};
  CUTE_UNROLL
  for (int i = 0; i < 4; ++i)
    ops::detail::unpack_pair<packed_kind::bf16>(u[i], f[2 * i], f[2 * i + 1]);
}

/// Eight floats rounded to bf16 (nearest even) as one word.
__device__ __forceinline__ Word pack(float const (&f)[kPerWord]) {
  using ops::detail::packed_kind;
  return make_uint4(ops::detail::pack_pair<packed_kind::bf16>(f[0], f[1]),
                    ops::detail::pack_pair<packed_kind::bf16>(f[2], f[3]),
                    ops::detail::pack_pair<packed_kind::bf16>(f[4], f[5]),
                    ops::detail::pack_pair<packed_kind::bf16>(f[6], f[7]));
}

/// x rounded to bf16 and back: what torch's bf16 tensors hold between two ops.
__device__ __forceinline__ float round_bf16(float x) {
  return __bfloat162float(__float2bfloat16_rn(x));
}

__device__ __forceinline__ float bf16_at(__nv_bfloat16 const* p) { return __bfloat162float(*p); }

/// torch's silu on a bf16 tensor: x / (1 + exp(-x)) in float, rounded to bf16.
__device__ __forceinline__ float silu_bf16(float x) {
  return round_bf16(__fdiv_rn(x, __fadd_rn(1.0f, ops::detail::exp_(-x))));
}

// ---- reductions ---------------------------------------------------------------------------------

/// The sum over the Width lanes of each aligned lane group (Width a power of two <= 32), in every
/// lane of the group.
template <int Width = kWarp>
__device__ __forceinline__ float group_sum(float v) {
  CUTE_UNROLL
  for (int off = Width / 2; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// ---- Programmatic Dependent Launch
// --------------------------------------------------------------- Every kernel here is launched
// with programmatic stream serialization allowed (launch.cuh), so it may start while the kernel
// before it in the stream is still running. It must not read anything that kernel writes, nor write
// anything that kernel reads, before wait_for_inputs(); what it may do before is prefetch its
// weights into L2. It lets the kernel after it start once every CTA has passed its own wait, so at
// most two kernels overlap.

/// Blocks until the grids this one depends on have completed and their writes are visible.
__device__ __forceinline__ void wait_for_inputs() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}

/// Allows the next kernel in the stream to launch (it still waits for this one in its own
/// wait_for_inputs()).
__device__ __forceinline__ void release_dependents() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

// ---- integer helpers ----------------------------------------------------------------------------

template <class T>
__host__ __device__ __forceinline__ constexpr T ceil_div(T a, T b) {
  return (a + b - 1) / b;
}

}  // namespace engine
}  // namespace tilefoundry

// The step from the QKV projection to the cache, fused: per-head RMSNorm of q and k (Qwen3's
// q_norm / k_norm; optional), rotary embedding (rotate-half, in f32, from cos / sin tables in bf16
// or f32) of q and k, and the write of k and v into the in-place KV cache at a position read on
// the device (so one captured CUDA graph serves every step).
//
// Input: qkv [M, (H + 2 KV) * D], the packed projection (q heads, then k heads, then v heads).
// Token m sits at position + m: its q goes to q_out[m], its k and v to cache[position + m]. A
// token whose position falls outside the cache or the tables writes nothing (the engine checks
// the capacity on the host before it launches).
//
// Work split: a group of D / 8 lanes per (token, head slot), one 16-byte word (8 values) a lane,
// 32 / (D / 8) heads a warp; the rotate-half partner of element d (d +- D/2) lives D / 16 lanes
// away in the group. Numerics follow the twin: the norm as tf.rms_norm (the normalised head rounded
// to bf16, times the weight, rounded), then x * cos + rotate_half(x) * sin in f32 without
// contraction, rounded.
#pragma once

#include "common.cuh"
#include "args.cuh"
#include "launch.cuh"

namespace tilefoundry {
namespace engine {
namespace rope {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarp;
constexpr int kMaxTokens = 16;

struct Params {
  __nv_bfloat16 const* qkv;     // [m, (h + 2 kv) * d]
  __nv_bfloat16 const* q_norm;  // [d] (norm)
  __nv_bfloat16 const* k_norm;  // [d] (norm)
  void const* cos;              // [table_rows, d]
  void const* sin;              // [table_rows, d]
  int const* position;          // tokens cached before this step (device)
  __nv_bfloat16* q_out;         // [m, h, d]
  __nv_bfloat16* cache_k;       // [capacity, kv, d]
  __nv_bfloat16* cache_v;       // [capacity, kv, d]
  float eps;
  int m, h, kv, capacity, table_rows;
};

/// Eight consecutive table values from element `at` (a multiple of 8) as floats.
__device__ __forceinline__ void load_table(__nv_bfloat16 const* t, size_t at,
                                           float (&f)[kPerWord]) {
  unpack(load_input(reinterpret_cast<Word const*>(t + at)), f);
}
__device__ __forceinline__ void load_table(float const* t, size_t at, float (&f)[kPerWord]) {
  float4 const a = __ldg(reinterpret_cast<float4 const*>(t + at));
  float4 const b = __ldg(reinterpret_cast<float4 const*>(t + at) + 1);
  float const v[kPerWord] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
  CUTE_UNROLL
  for (int i = 0; i < kPerWord; ++i) f[i] = v[i];
}

template <int D, bool Norm, class Table>
__global__ void __launch_bounds__(kThreads) rope_cache_kernel(Params const p) {
  constexpr int kLanes = D / kPerWord;  // lanes per head, one 16-byte word each
  constexpr int kHeadsPerWarp = kWarp / kLanes;
  static_assert(kWarp % kLanes == 0 && kLanes % 2 == 0, "a head is an even number of lanes");
  int const warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  int const sub = lane / kLanes, dl = lane % kLanes;
  int const slots = p.h + 2 * p.kv;

  wait_for_inputs();
  release_dependents();

  // Every lane runs the shuffles below, whatever its head (a group of lanes per head, several heads
  // a warp); only the stores depend on the head's kind and on the position.
  int const unit = (blockIdx.x * kWarps + warp) * kHeadsPerWarp + sub;
  bool const valid = unit < p.m * slots;
  int const m = valid ? unit / slots : 0, slot = valid ? unit % slots : 0;
  int const pos = max(*p.position, 0) + m;
  bool const is_q = slot < p.h, is_v = slot >= p.h + p.kv;
  bool const in_table = pos < p.table_rows;
  Word raw = make_uint4(0u, 0u, 0u, 0u);
  if (valid)
    raw = load_input(reinterpret_cast<Word const*>(p.qkv) +
                     (static_cast<size_t>(m) * slots + slot) * kLanes + dl);
  float x[kPerWord];
  unpack(raw, x);
  if constexpr (Norm) {
    float ss = 0.0f;
    CUTE_UNROLL
    for (int i = 0; i < kPerWord; ++i) ss = fmaf(x[i], x[i], ss);
    float const r = ops::detail::rsqrt_(group_sum<kLanes>(ss) / static_cast<float>(D) + p.eps);
    float g[kPerWord];
    unpack(load_input(reinterpret_cast<Word const*>(is_q ? p.q_norm : p.k_norm) + dl), g);
    CUTE_UNROLL
    for (int i = 0; i < kPerWord; ++i)
      x[i] = round_bf16(__fmul_rn(round_bf16(__fmul_rn(x[i], r)), g[i]));
  }
  float c[kPerWord], s[kPerWord];
  CUTE_UNROLL
  for (int i = 0; i < kPerWord; ++i) c[i] = s[i] = 0.0f;
  if (valid && !is_v && in_table) {
    size_t const at = static_cast<size_t>(pos) * D + dl * kPerWord;
    load_table(static_cast<Table const*>(p.cos), at, c);
    load_table(static_cast<Table const*>(p.sin), at, s);
  }
  float y[kPerWord];
  CUTE_UNROLL
  for (int i = 0; i < kPerWord; ++i) {
    float const partner = __shfl_xor_sync(0xffffffffu, x[i], kLanes / 2);
    float const rotated = dl < kLanes / 2 ? -partner : partner;
    y[i] = __fadd_rn(__fmul_rn(x[i], c[i]), __fmul_rn(rotated, s[i]));
  }
  if (!valid) return;
  if (is_v) {
    if (pos < p.capacity)
      reinterpret_cast<Word*>(
          p.cache_v)[(static_cast<size_t>(pos) * p.kv + (slot - p.h - p.kv)) * kLanes + dl] = raw;
  } else if (in_table) {
    if (is_q)
      reinterpret_cast<Word*>(p.q_out)[(static_cast<size_t>(m) * p.h + slot) * kLanes + dl] =
          pack(y);
    else if (pos < p.capacity)
      reinterpret_cast<Word*>(
          p.cache_k)[(static_cast<size_t>(pos) * p.kv + (slot - p.h)) * kLanes + dl] = pack(y);
  }
}

/// `norm` null: no q/k norm (rope_cache); else (q_norm, k_norm) (qk_norm_rope_cache).
inline void run(char const* entry, TensorView const& qkv, TensorView const* q_norm,
                TensorView const* k_norm, TensorView const& cos, TensorView const& sin,
                TensorView const& position, TensorView const& q_out, TensorView const& cache_k,
                TensorView const& cache_v, double eps) {
  Args const a(entry);
  a.rank(qkv, "qkv", 2, "(tokens M, (heads + 2 kv_heads) * head_dim), the packed projection");
  a.bf16(qkv, "qkv");
  a.rank(q_out, "q_out", 3, "(tokens M, heads H, head_dim D)");
  a.bf16(q_out, "q_out");
  a.kv_cache(cache_k, cache_v);
  int64_t const m = qkv.size(0), h = q_out.size(1), d = q_out.size(2);
  int64_t const capacity = cache_k.size(0), kv = cache_k.size(1);
  a.range(m, "the token count M (qkv's axis 0)", 1, kMaxTokens);
  a.head_dim(d, "q_out's axis 2");
  a.range(h, "the head count H (q_out's axis 1)", 1, 1024);
  a.range(kv, "the KV head count (cache_k's axis 1)", 1, 1024);
  a.extent(q_out, "q_out", 0, m, "qkv's tokens M");
  a.extent(qkv, "qkv", 1, (h + 2 * kv) * d, "(H + 2 KV) * D from q_out and cache_k");
  a.kv_cache_extents(cache_k, cache_v, d, "q_out's head_dim D");
  bool const f32 = a.bf16_or_f32(cos, "cos");
  if (a.bf16_or_f32(sin, "sin") != f32) {
    TVM_FFI_THROW(TypeError) << entry << ": cos is " << dtype_text(cos.dtype()) << " but sin is "
                             << dtype_text(sin.dtype()) << "; pass both tables in one dtype";
  }
  a.rank(cos, "cos", 2, "(positions, head_dim D)");
  a.rank(sin, "sin", 2, "(positions, head_dim D)");
  a.extent(cos, "cos", 1, d, "q_out's head_dim D");
  a.extent(sin, "sin", 0, cos.size(0), "cos's positions");
  a.extent(sin, "sin", 1, d, "q_out's head_dim D");
  if (q_norm) {
    for (auto [t, name] : {arg(*q_norm, "q_norm"), arg(*k_norm, "k_norm")}) {
      a.rank(*t, name, 1, "(head_dim D,)");
      a.bf16(*t, name);
      a.extent(*t, name, 0, d, "q_out's head_dim D");
      a.contiguous(*t, name);
    }
    if (!(eps >= 0.0 && eps < 1.0)) {
      TVM_FFI_THROW(ValueError) << entry << ": eps is " << eps << ", which must lie in [0, 1)";
    }
  }
  a.dtype(position, "position", kDLInt, 32, "int32");
  a.min_numel(position, "position", 1, "the tokens cached before this step");
  for (auto [t, name] : {arg(qkv, "qkv"), arg(q_out, "q_out"), arg(cache_k, "cache_k"),
                         arg(cache_v, "cache_v"), arg(cos, "cos"), arg(sin, "sin")}) {
    a.contiguous(*t, name);
    a.aligned(*t, name);
  }
  if (q_norm) {
    a.aligned(*q_norm, "q_norm");
    a.aligned(*k_norm, "k_norm");
  }
  a.disjoint(q_out, "q_out", qkv, "qkv");
  a.disjoint(cache_k, "cache_k", qkv, "qkv");
  a.disjoint(cache_v, "cache_v", qkv, "qkv");
  a.disjoint(cache_k, "cache_k", cache_v, "cache_v");
  a.disjoint(q_out, "q_out", cache_k, "cache_k");
  a.disjoint(q_out, "q_out", cache_v, "cache_v");
  int const device =
      a.cuda(arg(qkv, "qkv"), arg(cos, "cos"), arg(sin, "sin"), arg(position, "position"),
             arg(q_out, "q_out"), arg(cache_k, "cache_k"), arg(cache_v, "cache_v"));
  if (q_norm) a.cuda(arg(qkv, "qkv"), arg(*q_norm, "q_norm"), arg(*k_norm, "k_norm"));

  Params p = {};
  p.qkv = data<__nv_bfloat16 const>(qkv);
  p.q_norm = q_norm ? data<__nv_bfloat16 const>(*q_norm) : nullptr;
  p.k_norm = k_norm ? data<__nv_bfloat16 const>(*k_norm) : nullptr;
  p.cos = data<void const>(cos);
  p.sin = data<void const>(sin);
  p.position = data<int const>(position);
  p.q_out = data<__nv_bfloat16>(q_out);
  p.cache_k = data<__nv_bfloat16>(cache_k);
  p.cache_v = data<__nv_bfloat16>(cache_v);
  p.eps = static_cast<float>(eps);
  p.m = int(m);
  p.h = int(h);
  p.kv = int(kv);
  p.capacity = int(std::min<int64_t>(capacity, INT32_MAX));
  p.table_rows = int(std::min<int64_t>(cos.size(0), INT32_MAX));
  int const heads_per_warp = kWarp / int(d / kPerWord);
  dim3 const grid(ceil_div(ceil_div(int(m * (h + 2 * kv)), heads_per_warp), kWarps));
  auto go = [&](auto kernel) { launch(entry, device, kernel, grid, dim3(kThreads), 0, p); };
  bool const norm = q_norm != nullptr;
  if (d == 64) {
    if (norm)
      f32 ? go(rope_cache_kernel<64, true, float>) : go(rope_cache_kernel<64, true, __nv_bfloat16>);
    else
      f32 ? go(rope_cache_kernel<64, false, float>)
          : go(rope_cache_kernel<64, false, __nv_bfloat16>);
  } else {
    if (norm)
      f32 ? go(rope_cache_kernel<128, true, float>)
          : go(rope_cache_kernel<128, true, __nv_bfloat16>);
    else
      f32 ? go(rope_cache_kernel<128, false, float>)
          : go(rope_cache_kernel<128, false, __nv_bfloat16>);
  }
}

}  // namespace rope
}  // namespace engine
}  // namespace tilefoundry

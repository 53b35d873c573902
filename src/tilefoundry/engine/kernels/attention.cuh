// Decode attention over an in-place KV cache, for M <= 16 new tokens (decode: M = 1; a short
// prefill chunk: M > 1, causal).
//
// The cache is [capacity, KV, D] bf16 per layer, already holding this step's keys and values
// (written by the rope/cache kernel). `position` is a device int32: the tokens cached before this
// step, so token m sits at position + m and attends to cache positions [0, position + m]; it is
// read on the device, so one captured CUDA graph serves every step. Grouped-query attention: query
// head h reads KV head h / G (G = H / KV), as torch's repeat_interleave of the KV heads does.
//
// Work split. Grid (splits, KV, token tiles); a CTA of 4 warps takes one KV head, the G query
// heads that share it for a tile of tokens (ROWS = G x tile query rows, at most 8), and one slice
// of the context. The number of splits is fixed at launch (at most 16 by default, about one CTA
// per SM), the slice length is chosen on the device from the context (a multiple of one CTA pass of
// keys, at least one pass), so short contexts use few CTAs and long ones all. Before waiting for
// the kernel before it (PDL), a CTA asks L2 for its slice's K and V rows cached by earlier steps
// (the position was written before that kernel ran), so their DRAM latency overlaps that kernel's
// tail. Within a CTA each key is read by a group of D / 8 lanes (one 16-byte word each, K and V), U
// = 8 keys per group in flight for decode (4 for 4 rows, 2 for 8); scores for every row come from a
// dot product over the group, and each group keeps an online softmax (running max, sum, and output
// accumulator in f32, base-2 exponentials with the scale folded into q). Groups merge by shuffles,
// warps through shared memory. A single active slice writes the output directly; otherwise each
// slice writes its normalised output and log-sum-exp to the workspace, takes a ticket, and the CTA
// drawing the last ticket of its (KV head, tile) merges the slices (reading 16 slices' partial
// outputs at a time, all in flight together) and resets the ticket: one pass over K and V, one
// kernel.
#pragma once

#include "common.cuh"
#include "args.cuh"
#include "launch.cuh"

namespace tilefoundry {
namespace engine {
namespace attention {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / kWarp;
constexpr int kMaxRows = 8;  // query rows per CTA
constexpr int kMaxSplits = 64;
constexpr int kAutoSplits = 16;  // the automatic split count's cap: the merge reads 16 at a time
constexpr int kMaxTokens = 16;

struct Params {
  __nv_bfloat16 const* q;  // [m, h, d]
  __nv_bfloat16 const* k;  // [capacity, kv, d]
  __nv_bfloat16 const* v;  // [capacity, kv, d]
  int const* position;     // tokens cached before this step (device)
  __nv_bfloat16* out;      // [m, h, d]
  int* tickets;            // [tiles, kv]
  float* lse;              // [tiles, kv, splits, rows]      log2-sum-exp of each slice
  float* partial;          // [tiles, kv, splits, rows, d]   each slice's normalised output
  float scale_log2;        // softmax scale * log2(e)
  int m, h, kv, group, capacity, splits, tile;
};

/// The workspace: tickets, then the per-slice log-sum-exps and outputs.
struct Layout {
  int rows, tile, tiles, splits;
  size_t lse_offset, partial_offset, bytes;
};

inline Layout layout(int m, int h, int kv, int d, int splits) {
  Layout l = {};
  int const g = h / kv;
  int const rows_needed = m == 1 ? g : kMaxRows;
  l.rows = rows_needed <= 1 ? 1 : rows_needed <= 2 ? 2 : rows_needed <= 4 ? 4 : 8;
  l.tile = m == 1 ? 1 : l.rows / g;
  l.tiles = ceil_div(m, l.tile);
  l.splits = splits;
  size_t const tickets = static_cast<size_t>(l.tiles) * kv * sizeof(int);
  l.lse_offset = ceil_div<size_t>(tickets, 256) * 256;
  size_t const slices = static_cast<size_t>(l.tiles) * kv * splits * l.rows;
  l.partial_offset = l.lse_offset + ceil_div<size_t>(slices * sizeof(float), 256) * 256;
  l.bytes = l.partial_offset + slices * d * sizeof(float);
  return l;
}

/// Splits giving about one CTA per SM, at most kAutoSplits: a slice of fewer keys costs more to
/// merge than it saves.
inline int auto_splits(int kv, int tiles, int sms) {
  return std::max(1, std::min(kAutoSplits, ceil_div(sms, kv * tiles)));
}

/// Folds the softmax state (mo, lo, oo) into (m, l, o); either may be empty (max -inf).
__device__ __forceinline__ void merge_weights(float m, float mo, float& a, float& b, float& mx) {
  mx = fmaxf(m, mo);
  a = m == -INFINITY ? 0.0f : exp2f(m - mx);
  b = mo == -INFINITY ? 0.0f : exp2f(mo - mx);
}

// Decode (ROWS <= 2) keeps eight keys per lane group in flight and asks for room for two CTAs
// per SM (the grid is about one CTA per SM).
template <int D, int ROWS>
__global__ void __launch_bounds__(kThreads, ROWS <= 2 ? 2 : 1) attention_kernel(Params const p) {
  constexpr int U = ROWS <= 2 ? 8 : ROWS <= 4 ? 4 : 2;  // keys per lane group in flight
  constexpr int kLanesPerKey = D / kPerWord;
  constexpr int kKeysPerWarp = kWarp / kLanesPerKey;
  constexpr int kKeysPerPass = kWarps * kKeysPerWarp * U;
  static_assert(kLanesPerKey <= kWarp && kWarp % kLanesPerKey == 0, "D / 8 lanes per key");
  __shared__ float sm_max[kWarps][ROWS], sm_sum[kWarps][ROWS];
  __shared__ __align__(16) float sm_out[kWarps][ROWS][D];
  __shared__ float sm_lse[kMaxSplits][ROWS];
  __shared__ int last_cta;

  int const split = blockIdx.x, kvh = blockIdx.y, tile = blockIdx.z;
  int const warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  int const sub = lane / kLanesPerKey, dl = lane % kLanesPerKey;

  // The position was written before the kernel this one follows ran (that kernel has passed its
  // own wait when this one starts), so it may be read before wait_for_inputs().
  int const pos = max(*p.position, 0);
  int const m0 = tile * p.tile;
  int const mt = min(p.tile, p.m - m0);
  int const ctx = min(pos + m0 + mt, p.capacity);  // keys the tile's last token sees
  int const chunk = ceil_div(ceil_div(ctx, p.splits), kKeysPerPass) * kKeysPerPass;
  int const active = chunk > 0 ? ceil_div(ctx, chunk) : 0;
  int const rows = p.group * mt;
  size_t const slot = static_cast<size_t>(tile) * p.kv + kvh;
  size_t const stride = static_cast<size_t>(p.kv) * D / kPerWord;  // words between positions
  Word const* kp = reinterpret_cast<Word const*>(p.k) + kvh * (D / kPerWord) + dl;
  Word const* vp = reinterpret_cast<Word const*>(p.v) + kvh * (D / kPerWord) + dl;
  int const kb = split * chunk, ke = min(kb + chunk, ctx);

  // Keys cached by earlier steps (below pos) into L2 while the kernel before finishes; this step's
  // own entries are being written by it. One prefetch per 128-byte line (8 lanes share one).
  if (dl % 8 == 0) {
    for (int key = kb + warp * kKeysPerWarp + sub; key < min(ke, pos);
         key += kWarps * kKeysPerWarp) {
      prefetch_l2(kp + key * stride);
      prefetch_l2(vp + key * stride);
    }
  }
  wait_for_inputs();  // q and this step's cache entries come from the kernel before
  release_dependents();

  if (split < active) {
    float q[ROWS][kPerWord];
    int limit[ROWS];
    CUTE_UNROLL
    for (int r = 0; r < ROWS; ++r) {
      int const mq = r / p.group, g = r % p.group;
      limit[r] = 0;
      CUTE_UNROLL
      for (int i = 0; i < kPerWord; ++i) q[r][i] = 0.0f;
      if (r < rows) {
        limit[r] = min(pos + m0 + mq + 1, p.capacity);
        size_t const at = (static_cast<size_t>(m0 + mq) * p.h + kvh * p.group + g) * D;
        unpack(load_input(reinterpret_cast<Word const*>(p.q + at) + dl), q[r]);
        CUTE_UNROLL
        for (int i = 0; i < kPerWord; ++i) q[r][i] *= p.scale_log2;
      }
    }

    float run_max[ROWS], run_sum[ROWS], acc[ROWS][kPerWord];
    CUTE_UNROLL
    for (int r = 0; r < ROWS; ++r) {
      run_max[r] = -INFINITY;
      run_sum[r] = 0.0f;
      CUTE_UNROLL
      for (int i = 0; i < kPerWord; ++i) acc[r][i] = 0.0f;
    }

    // The loop bound is the same for every lane of a warp (the group shuffles need them all).
    for (int b = kb + warp * kKeysPerWarp; b < ke; b += kKeysPerPass) {
      Word kw[U], vw[U];
      int key[U];
      CUTE_UNROLL
      for (int u = 0; u < U; ++u) {
        key[u] = b + sub + u * kWarps * kKeysPerWarp;
        kw[u] = make_uint4(0u, 0u, 0u, 0u);
        vw[u] = kw[u];
        if (key[u] < ke) {
          kw[u] = load_input(kp + key[u] * stride);
          vw[u] = load_input(vp + key[u] * stride);
        }
      }
      float s[ROWS][U];
      CUTE_UNROLL
      for (int u = 0; u < U; ++u) {
        float kf[kPerWord];
        unpack(kw[u], kf);
        CUTE_UNROLL
        for (int r = 0; r < ROWS; ++r) {
          float dot = 0.0f;
          CUTE_UNROLL
          for (int i = 0; i < kPerWord; ++i) dot = fmaf(q[r][i], kf[i], dot);
          dot = group_sum<kLanesPerKey>(dot);
          s[r][u] = key[u] < ke && key[u] < limit[r] ? dot : -INFINITY;
        }
      }
      float vf[U][kPerWord];
      CUTE_UNROLL
      for (int u = 0; u < U; ++u) unpack(vw[u], vf[u]);
      CUTE_UNROLL
      for (int r = 0; r < ROWS; ++r) {
        float mx = run_max[r];
        CUTE_UNROLL
        for (int u = 0; u < U; ++u) mx = fmaxf(mx, s[r][u]);
        if (mx == -INFINITY) continue;  // nothing visible to this row yet
        float const corr = exp2f(run_max[r] - mx);
        run_sum[r] *= corr;
        CUTE_UNROLL
        for (int i = 0; i < kPerWord; ++i) acc[r][i] *= corr;
        CUTE_UNROLL
        for (int u = 0; u < U; ++u) {
          float const pr = exp2f(s[r][u] - mx);
          run_sum[r] += pr;
          CUTE_UNROLL
          for (int i = 0; i < kPerWord; ++i) acc[r][i] = fmaf(pr, vf[u][i], acc[r][i]);
        }
        run_max[r] = mx;
      }
    }

    // The key groups of a warp, then the warps.
    CUTE_UNROLL
    for (int off = kLanesPerKey; off < kWarp; off *= 2) {
      CUTE_UNROLL
      for (int r = 0; r < ROWS; ++r) {
        float const mo = __shfl_xor_sync(0xffffffffu, run_max[r], off);
        float const so = __shfl_xor_sync(0xffffffffu, run_sum[r], off);
        float a, c, mx;
        merge_weights(run_max[r], mo, a, c, mx);
        run_sum[r] = run_sum[r] * a + so * c;
        CUTE_UNROLL
        for (int i = 0; i < kPerWord; ++i)
          acc[r][i] = acc[r][i] * a + __shfl_xor_sync(0xffffffffu, acc[r][i], off) * c;
        run_max[r] = mx;
      }
    }
    if (lane < kLanesPerKey) {
      CUTE_UNROLL
      for (int r = 0; r < ROWS; ++r) {
        float4* o = reinterpret_cast<float4*>(&sm_out[warp][r][dl * kPerWord]);
        o[0] = make_float4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]);
        o[1] = make_float4(acc[r][4], acc[r][5], acc[r][6], acc[r][7]);
        if (lane == 0) {
          sm_max[warp][r] = run_max[r];
          sm_sum[warp][r] = run_sum[r];
        }
      }
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < rows * D; idx += kThreads) {
      int const r = idx / D, d = idx % D;
      float mx = -INFINITY;
      CUTE_UNROLL
      for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, sm_max[w][r]);
      float sum = 0.0f, o = 0.0f;
      if (mx != -INFINITY) {
        CUTE_UNROLL
        for (int w = 0; w < kWarps; ++w) {
          float const e = sm_max[w][r] == -INFINITY ? 0.0f : exp2f(sm_max[w][r] - mx);
          sum += sm_sum[w][r] * e;
          o += sm_out[w][r][d] * e;
        }
      }
      float const value = sum > 0.0f ? o / sum : 0.0f;
      if (active == 1) {
        int const mq = r / p.group, g = r % p.group;
        p.out[(static_cast<size_t>(m0 + mq) * p.h + kvh * p.group + g) * D + d] =
            __float2bfloat16_rn(value);
      } else {
        size_t const at = (slot * p.splits + split) * ROWS + r;
        p.partial[at * D + d] = value;
        if (d == 0) p.lse[at] = sum > 0.0f ? mx + log2f(sum) : -INFINITY;
      }
    }
  }
  if (active <= 1) return;

  // Several slices: the last CTA of this (KV head, tile) to finish merges them.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0)
    last_cta = atomicAdd(&p.tickets[slot], 1) == static_cast<int>(gridDim.x) - 1;
  __syncthreads();
  if (!last_cta) return;
  __threadfence();
  for (int idx = threadIdx.x; idx < active * rows; idx += kThreads) {
    int const s = idx / rows, r = idx % rows;
    sm_lse[s][r] = __ldcg(&p.lse[(slot * p.splits + s) * ROWS + r]);
  }
  __syncthreads();
  constexpr int kBatch = 16;  // slices whose partial outputs are read together
  for (int idx = threadIdx.x; idx < rows * D; idx += kThreads) {
    int const r = idx / D, d = idx % D;
    float mx = -INFINITY;
    for (int s = 0; s < active; ++s) mx = fmaxf(mx, sm_lse[s][r]);
    float sum = 0.0f, o = 0.0f;
    if (mx != -INFINITY) {
      for (int s0 = 0; s0 < active; s0 += kBatch) {
        float part[kBatch];
        CUTE_UNROLL
        for (int j = 0; j < kBatch; ++j) {
          part[j] = s0 + j < active
                        ? __ldcg(&p.partial[((slot * p.splits + s0 + j) * ROWS + r) * D + d])
                        : 0.0f;
        }
        CUTE_UNROLL
        for (int j = 0; j < kBatch; ++j) {
          if (s0 + j >= active) break;
          float const lse = sm_lse[s0 + j][r];
          float const e = lse == -INFINITY ? 0.0f : exp2f(lse - mx);
          sum += e;
          o += e * part[j];
        }
      }
    }
    int const mq = r / p.group, g = r % p.group;
    p.out[(static_cast<size_t>(m0 + mq) * p.h + kvh * p.group + g) * D + d] =
        __float2bfloat16_rn(sum > 0.0f ? o / sum : 0.0f);
  }
  if (threadIdx.x == 0) atomicExch(&p.tickets[slot], 0);
}

inline void run(TensorView const& q, TensorView const& cache_k, TensorView const& cache_v,
                TensorView const& position, TensorView const& out, TensorView const& workspace,
                double scale, int64_t splits) {
  char const* entry = "decode_attention";
  Args const a(entry);
  a.rank(q, "q", 3, "(tokens M, heads H, head_dim D)");
  a.bf16(q, "q");
  a.kv_cache(cache_k, cache_v);
  int64_t const m = q.size(0), h = q.size(1), d = q.size(2);
  int64_t const capacity = cache_k.size(0), kv = cache_k.size(1);
  a.range(m, "the token count M (q's axis 0)", 1, kMaxTokens);
  a.head_dim(d, "q's axis 2");
  a.range(capacity, "the cache capacity (cache_k's axis 0)", 1, int64_t(1) << 30);
  a.range(kv, "the KV head count (cache_k's axis 1)", 1, 1024);
  a.kv_cache_extents(cache_k, cache_v, d, "q's head_dim D");
  if (h % kv != 0 || h / kv > kMaxRows) {
    TVM_FFI_THROW(ValueError) << entry << ": q has " << h << " heads and the cache " << kv
                              << " KV heads; the heads must be a multiple of the KV heads, at most "
                              << kMaxRows << " query heads per KV head";
  }
  a.dtype(position, "position", kDLInt, 32, "int32");
  a.min_numel(position, "position", 1, "the tokens cached before this step");
  a.rank(out, "out", 3, "(tokens M, heads H, head_dim D)");
  a.bf16(out, "out");
  a.extent(out, "out", 0, m, "q's tokens M");
  a.extent(out, "out", 1, h, "q's heads H");
  a.extent(out, "out", 2, d, "q's head_dim D");
  for (auto [t, name] :
       {arg(q, "q"), arg(cache_k, "cache_k"), arg(cache_v, "cache_v"), arg(out, "out")}) {
    a.contiguous(*t, name);
    a.aligned(*t, name);
  }
  a.dtype(workspace, "workspace", kDLUInt, 8, "uint8");
  a.rank(workspace, "workspace", 1, "(bytes,), zero-filled once");
  a.contiguous(workspace, "workspace");
  a.aligned(workspace, "workspace");
  if (!(scale > 0.0)) {
    TVM_FFI_THROW(ValueError) << entry << ": scale is " << scale
                              << "; pass the softmax scale, e.g. head_dim ** -0.5";
  }
  if (splits < 0 || splits > kMaxSplits) {
    TVM_FFI_THROW(ValueError) << entry << ": splits is " << splits << "; use 1 to " << kMaxSplits
                              << ", or 0 to choose";
  }
  a.disjoint(out, "out", q, "q");
  a.disjoint(out, "out", cache_k, "cache_k");
  a.disjoint(out, "out", cache_v, "cache_v");
  a.disjoint(workspace, "workspace", out, "out");
  char const* sized = "tickets and per-slice results; attention_workspace_bytes gives the size";
  Layout l = layout(int(m), int(h), int(kv), int(d), int(splits));
  if (splits) a.min_numel(workspace, "workspace", static_cast<int64_t>(l.bytes), sized);
  int const device =
      a.cuda(arg(q, "q"), arg(cache_k, "cache_k"), arg(cache_v, "cache_v"),
             arg(position, "position"), arg(out, "out"), arg(workspace, "workspace"));
  if (!splits) {  // the automatic count depends on the device
    l = layout(int(m), int(h), int(kv), int(d), auto_splits(int(kv), l.tiles, sm_count(device)));
    a.min_numel(workspace, "workspace", static_cast<int64_t>(l.bytes), sized);
  }
  int const s = l.splits;

  Params p = {};
  p.q = data<__nv_bfloat16 const>(q);
  p.k = data<__nv_bfloat16 const>(cache_k);
  p.v = data<__nv_bfloat16 const>(cache_v);
  p.position = data<int const>(position);
  p.out = data<__nv_bfloat16>(out);
  char* ws = data<char>(workspace);
  p.tickets = reinterpret_cast<int*>(ws);
  p.lse = reinterpret_cast<float*>(ws + l.lse_offset);
  p.partial = reinterpret_cast<float*>(ws + l.partial_offset);
  p.scale_log2 = static_cast<float>(scale * 1.4426950408889634);
  p.m = int(m);
  p.h = int(h);
  p.kv = int(kv);
  p.group = int(h / kv);
  p.capacity = int(capacity);
  p.splits = s;
  p.tile = l.tile;
  dim3 const grid(s, kv, l.tiles);
  auto go = [&](auto kernel) { launch(entry, device, kernel, grid, dim3(kThreads), 0, p); };
  if (d == 64) {
    if (l.rows == 1)
      go(attention_kernel<64, 1>);
    else if (l.rows == 2)
      go(attention_kernel<64, 2>);
    else if (l.rows == 4)
      go(attention_kernel<64, 4>);
    else
      go(attention_kernel<64, 8>);
  } else {
    if (l.rows == 1)
      go(attention_kernel<128, 1>);
    else if (l.rows == 2)
      go(attention_kernel<128, 2>);
    else if (l.rows == 4)
      go(attention_kernel<128, 4>);
    else
      go(attention_kernel<128, 8>);
  }
}

/// The workspace bytes decode_attention needs (splits 0: the automatic count on `device`).
inline int64_t workspace_bytes(int64_t m, int64_t h, int64_t kv, int64_t d, int64_t splits,
                               int64_t device) {
  char const* entry = "attention_workspace_bytes";
  Args const a(entry);
  a.range(m, "tokens", 1, kMaxTokens);
  a.range(kv, "kv_heads", 1, 1024);
  a.range(d, "head_dim", 1, 1024);
  a.range(splits, "splits", 0, kMaxSplits);
  if (h % kv != 0 || h / kv > kMaxRows) {
    TVM_FFI_THROW(ValueError) << entry << ": heads " << h << " must be a multiple of kv_heads "
                              << kv << ", at most " << kMaxRows << " per KV head";
  }
  Layout l = layout(int(m), int(h), int(kv), int(d), 1);
  int const s = splits ? int(splits) : auto_splits(int(kv), l.tiles, sm_count(int(device)));
  return static_cast<int64_t>(layout(int(m), int(h), int(kv), int(d), s).bytes);
}

}  // namespace attention
}  // namespace engine
}  // namespace tilefoundry

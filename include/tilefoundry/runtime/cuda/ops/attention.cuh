// ops::attention and ops::attention_combine on the CUDA target: the general tier and the combine
// are attention_impl's (the CPU target's entries run them too); rows of 16-byte words take the
// grouped tier below.
//
// The grouped tier (the decode step's attention, and short chunks of queries): a CTA of 128
// threads takes its slice of the keys for the query rows of one KV head, ROWS rows at a time (the G
// query heads that share the KV head, for as many tokens as fit in 8 rows), so each key and value
// row is read once for all of them. A key is read by a group of D / W lanes (W elements a 16-byte
// word), each group keeping U keys in flight; the scores of every row come from a dot product over
// the group (shuffles), and each group keeps its own online softmax (running maximum, sum and
// weighted sum in float). The groups of a warp merge by shuffles, the warps through shared memory,
// and the slice's state goes to `part` for attention_combine, whose fast tier (a static count of
// at most 32 slices) reads every slice's maximum and sum once a row and its values all at once.
// On sm_90 and later the combine may run in the slices' own kernel: a key head's slices are one
// thread-block cluster, which waits at the cluster's barrier and merges them, a share a CTA, each
// slice's state read from its CTA's shared memory across the cluster (distributed shared memory)
// where the states fit, from global memory otherwise.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/attention_impl.h>
#include <tilefoundry/runtime/common/ops/packed.h>
#include <tilefoundry/runtime/cuda/cluster.cuh>
#include <tilefoundry/runtime/cuda/ops/attention_gmma.cuh>
#include <tilefoundry/runtime/cuda/ops/attention_mma.cuh>

#include <cstdint>
#include <cuda_bf16.h>
#include <type_traits>

namespace tilefoundry {
namespace ops {
namespace attention_impl {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxRows = 8;  // query rows a pass over the keys serves

template <class T>
using elem_t = cute::remove_cvref_t<T>;

/// Whether q (G x M x D), k (D x N), v (N x D) have their head_dim contiguous and static, one
/// packed element type, and D a whole number of 16-byte words read by at most a warp.
template <class Q, class K, class V>
TILEFOUNDRY_HOST_DEVICE constexpr bool grouped_tier() {
  using E = elem_t<decltype(std::declval<Q const&>()(0, 0, 0))>;
  constexpr int D = contiguous_head_dim<Q, K, V>();
  if constexpr (!detail::is_packed_v<E> || D == 0) {
    return false;
  } else {
    constexpr int W = int(16 / sizeof(E));
    constexpr int lanes = D / W;
    return D % W == 0 && lanes <= 32 && 32 % lanes == 0;
  }
}

/// The W elements of type E in a 16-byte word (read whole, through the read-only data path: the
/// keys and values are not written while the kernel runs) as floats. A pass unpacks its words only
/// after issuing every load: a conversion beside its load would wait for it (converted at the load,
/// 15.5 us at context 1024 and 30.7 us at 4096 against 13.6 and 22.1; H200, Qwen3-1.7B's heads).
template <class E, int W>
__device__ __forceinline__ void unpack_word(uint4 const v, float (&out)[W]) {
  detail::word4 const w{{v.x, v.y, v.z, v.w}};
  CUTE_UNROLL
  for (int i = 0; i < 4; ++i) {
    if constexpr (detail::packed_kind_v<E> == detail::packed_kind::f32) {
      out[i] = detail::bits_as<float>(w.u[i]);
    } else {
      detail::unpack_pair<detail::packed_kind_v<E>>(w.u[i], out[2 * i], out[2 * i + 1]);
    }
  }
}

template <int LANES>
__device__ __forceinline__ float group_sum(float x) {
  CUTE_UNROLL
  for (int off = LANES / 2; off > 0; off /= 2) x += __shfl_xor_sync(0xffffffffu, x, off);
  return x;
}

/// e^(a - b) scaled states merged: (m, l, o) and (mo, lo, oo) -> weights a, b of the two.
__device__ __forceinline__ void merge_weights(float m, float mo, float& a, float& b, float& mx) {
  mx = fmaxf(m, mo);
  a = m == -INFINITY ? 0.0f : softmax_exp(m - mx);
  b = mo == -INFINITY ? 0.0f : softmax_exp(mo - mx);
}

/// One pass of the grouped tier over the keys `keys`, for query rows [r0, r0 + ROWS) of the CTA's
/// G x M (row r is token r / G of head r % G), its state written to part. Out of line: a kernel
/// holds the pass of each row count (and the general tier) and runs one (config.h).
template <class Acc, int ROWS, int D, class Scores, class Visible, class Q, class K, class V,
          class Part>
TILEFOUNDRY_DEVICE_OUTLINED void grouped_rows(Scores scores, Visible const& visible, Q const& q,
                                              K const& k, V const& v, Part& part, KeyRange keys,
                                              int64_t r0, float* sm_out, float* sm_max,
                                              float* sm_sum, float* state) {
  using E = elem_t<decltype(q(0, 0, 0))>;
  constexpr int W = int(16 / sizeof(E));
  constexpr int kLanes = D / W;  // lanes reading one key
  constexpr int kKeysPerWarp = 32 / kLanes;
  constexpr int U = ROWS <= 2 ? 8 : ROWS <= 4 ? 4 : 2;  // keys a lane group keeps in flight
  constexpr int kStep = kWarps * kKeysPerWarp;
  int64_t const groups = int64_t(cute::size<0>(q));
  int64_t const total = groups * int64_t(cute::size<1>(q));
  int const warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  int const sub = lane / kLanes, dl = lane % kLanes;
  int64_t const kstride = int64_t(cute::stride<1>(k));
  int64_t const vstride = int64_t(cute::stride<0>(v));
  E const* const kp = &k(0, 0) + dl * W;
  E const* const vp = &v(0, 0) + dl * W;

  using P = typename Visible::position_t;
  using Key = key_index_t<K>;  // the loop counts in int where the keys' extent is one
  float qf[ROWS][W], acc[ROWS][W], run_max[ROWS], run_sum[ROWS];
  P qpos[ROWS];
  bool live[ROWS];
  CUTE_UNROLL
  for (int j = 0; j < ROWS; ++j) {
    int64_t const r = r0 + j;
    live[j] = r < total;
    qpos[j] = live[j] ? visible.query(r / groups) : P{};
    run_max[j] = -INFINITY;
    run_sum[j] = 0.0f;
    CUTE_UNROLL
    for (int i = 0; i < W; ++i) {
      qf[j][i] = 0.0f;
      acc[j][i] = 0.0f;
    }
    if (live[j]) detail::load_group(&q(r % groups, r / groups, 0) + dl * W, qf[j]);
  }

  Key const end = Key(keys.end);
  for (Key b = Key(keys.begin) + warp * kKeysPerWarp; b < end; b += Key(kStep) * U) {
    uint4 kw[U], vw[U];
    Key key[U];
    P kpos[U];
    CUTE_UNROLL
    for (int u = 0; u < U; ++u) {  // every load of the pass in flight before any is used
      key[u] = b + sub + Key(u) * kStep;
      kpos[u] = P{};
      kw[u] = vw[u] = make_uint4(0u, 0u, 0u, 0u);
      if (key[u] < end) {
        kw[u] = __ldg(reinterpret_cast<uint4 const*>(kp + key[u] * kstride));
        vw[u] = __ldg(reinterpret_cast<uint4 const*>(vp + key[u] * vstride));
        kpos[u] = visible.key(key[u]);
      }
    }
    float s[ROWS][U];
    CUTE_UNROLL
    for (int u = 0; u < U; ++u) {
      float kf[W];
      unpack_word<E, W>(kw[u], kf);
      CUTE_UNROLL
      for (int j = 0; j < ROWS; ++j) {
        float dot = 0.0f;
        CUTE_UNROLL
        for (int i = 0; i < W; ++i) dot = fmaf(qf[j][i], kf[i], dot);
        dot = group_sum<kLanes>(dot);
        bool const seen = key[u] < end && live[j] && visible.test(kpos[u], qpos[j]);
        s[j][u] = seen ? score<E>(scores, dot) : -INFINITY;
      }
    }
    float vf[U][W];
    CUTE_UNROLL
    for (int u = 0; u < U; ++u) unpack_word<E, W>(vw[u], vf[u]);
    CUTE_UNROLL
    for (int j = 0; j < ROWS; ++j) {
      float mx = run_max[j];
      CUTE_UNROLL
      for (int u = 0; u < U; ++u) mx = fmaxf(mx, s[j][u]);
      if (mx == -INFINITY) continue;  // nothing visible to this row yet
      float const corr = softmax_exp(run_max[j] - mx);
      run_sum[j] *= corr;
      CUTE_UNROLL
      for (int i = 0; i < W; ++i) acc[j][i] *= corr;
      CUTE_UNROLL
      for (int u = 0; u < U; ++u) {
        float const p = softmax_exp(s[j][u] - mx);
        run_sum[j] += p;
        CUTE_UNROLL
        for (int i = 0; i < W; ++i) acc[j][i] = fmaf(p, vf[u][i], acc[j][i]);
      }
      run_max[j] = mx;
    }
  }

  // The lane groups of a warp, then the warps through shared memory.
  CUTE_UNROLL
  for (int off = kLanes; off < 32; off *= 2) {
    CUTE_UNROLL
    for (int j = 0; j < ROWS; ++j) {
      float const mo = __shfl_xor_sync(0xffffffffu, run_max[j], off);
      float const so = __shfl_xor_sync(0xffffffffu, run_sum[j], off);
      float a, c, mx;
      merge_weights(run_max[j], mo, a, c, mx);
      run_sum[j] = run_sum[j] * a + so * c;
      CUTE_UNROLL
      for (int i = 0; i < W; ++i)
        acc[j][i] = acc[j][i] * a + __shfl_xor_sync(0xffffffffu, acc[j][i], off) * c;
      run_max[j] = mx;
    }
  }
  if (lane < kLanes) {
    CUTE_UNROLL
    for (int j = 0; j < ROWS; ++j) {
      CUTE_UNROLL
      for (int i = 0; i < W; ++i) sm_out[(warp * ROWS + j) * D + dl * W + i] = acc[j][i];
      if (lane == 0) {
        sm_max[warp * ROWS + j] = run_max[j];
        sm_sum[warp * ROWS + j] = run_sum[j];
      }
    }
  }
  __syncthreads();
  for (int idx = int(threadIdx.x); idx < ROWS * D; idx += kThreads) {
    int const j = idx / D, d = idx % D;
    int64_t const r = r0 + j;
    if (r >= total) continue;
    float mx = -INFINITY;
    CUTE_UNROLL
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, sm_max[w * ROWS + j]);
    float sum = 0.0f, o = 0.0f;
    if (mx != -INFINITY) {
      CUTE_UNROLL
      for (int w = 0; w < kWarps; ++w) {
        float const ms = sm_max[w * ROWS + j];
        float const e = ms == -INFINITY ? 0.0f : softmax_exp(ms - mx);
        sum += sm_sum[w * ROWS + j] * e;
        o += sm_out[(w * ROWS + j) * D + d] * e;
      }
    }
    if (state != nullptr) {  // kept for the cluster's combine (cluster_state)
      state[r * (D + 2) + d] = o;
      if (d == 0) {
        state[r * (D + 2) + D] = mx;
        state[r * (D + 2) + D + 1] = sum;
      }
      continue;
    }
    int64_t const g = r % groups, m = r / groups;
    part(g, m, d) = o;
    if (d == 0) {
      part(g, m, D) = mx;
      part(g, m, D + 1) = sum;
    }
  }
  __syncthreads();  // shared memory is the next pass's
}

/// The grouped tier: the CTA's G x M query rows in passes of ROWS (2, 4 or 8: the fewest that hold
/// them, 8 at most), each pass over the slice's keys.
template <class Acc, class Scores, class Visible, class Q, class K, class V, class Part>
__device__ void grouped(Scores scores, Visible const& visible, Q const& q, K const& k, V const& v,
                        Part& part, int64_t split, int64_t splits, float* state) {
  using E = elem_t<decltype(q(0, 0, 0))>;
  constexpr int D = int(decltype(cute::shape<2>(q.layout()))::value);
  constexpr int W = int(16 / sizeof(E));
  constexpr int kKeysPerWarp = 32 / (D / W);
  __shared__ __align__(16) float sm_out[kWarps * kMaxRows * D];
  __shared__ float sm_max[kWarps * kMaxRows], sm_sum[kWarps * kMaxRows];
  int64_t const total = int64_t(cute::size<0>(q)) * int64_t(cute::size<1>(q));
  int64_t const keys = int64_t(cute::size<1>(k));
  auto pass = [&](auto rows) {
    constexpr int R = decltype(rows)::value;
    constexpr int U = R <= 2 ? 8 : R <= 4 ? 4 : 2;
    KeyRange const range =
        slice_of(visible.keys(keys), split, splits, int64_t(kWarps) * kKeysPerWarp * U);
    for (int64_t r0 = 0; r0 < total; r0 += R) {
      grouped_rows<Acc, R, D>(scores, visible, q, k, v, part, range, r0, sm_out, sm_max, sm_sum,
                              state);
    }
  };
  if (total <= 2) {
    pass(cute::Int<2>{});
  } else if (total <= 4) {
    pass(cute::Int<4>{});
  } else {
    pass(cute::Int<kMaxRows>{});
  }
}

/// Floats of a slice's state (each of its G x M rows: Dv weighted sums, the maximum, the sum of
/// exponentials) a CTA keeps in its shared memory for its cluster's combine: 32 rows of Dv = 128.
constexpr int kClusterStateFloats = 32 * 130;

/// The CTA's slice state for its cluster (one array of the kernel, at the same offset in every
/// CTA, so a peer finds it by rank).
__device__ __forceinline__ float* cluster_state() {
  __shared__ __align__(16) float state[kClusterStateFloats];
  return state;
}

/// Element `at` of the cluster state of the cluster's CTA `rank` (distributed shared memory).
__device__ __forceinline__ float peer_state(unsigned rank, int64_t at) {
  return cluster::peer_float(cluster_state() + at, rank);
}

/// Whether a key head's slices, `splits` CTAs of one cluster (the combine's cluster form), hand
/// their states to its combine through shared memory (distributed across the cluster) rather than
/// global memory: `rows` of `width` floats fit cluster_state. ops::attention and the cluster form
/// of ops::attention_combine decide it alike from the same sizes. On the H200 (Qwen3-1.7B's decode
/// step through the compiled slots, context 300) the combine through global memory cost 43 us of
/// a 1563 us step; the cluster's barrier alone 7.
__device__ __forceinline__ bool states_in_cluster(int64_t rows, int64_t width, int64_t splits) {
  return splits > 1 && cluster::ctas() == unsigned(splits) && rows * width <= kClusterStateFloats;
}

/// ... and whether every slice's state fits the cluster state of one CTA, the cluster's first,
/// which then merges them alone: each CTA stores its state there (slice s at s x rows x width)
/// with stores that count their bytes on the first CTA's mbarrier (st.async: no fence, which a
/// cluster barrier's release makes a GPU-wide MEMBAR), the first waits on that mbarrier and merges
/// them from its own memory, and no other CTA waits at a second barrier. A decode step of
/// Qwen3-1.7B (16 slices of 2 rows of 130) fits. Measured on an H100 (the slot alone, CUDA-graph
/// replays, context 128 / 1024): 7.24 / 8.66 us with each CTA reading its share of the outputs
/// from every peer; without the merge's reads (its two barriers kept) 6.27 / 7.86, without them
/// and the barriers 4.97 / 6.49. Tried and measured slower on the H200 (2026-12-05, the slot alone,
/// two rounds): the slices without keys (at 128, 14 of 16) leaving at once, their exit counted as
/// the barrier's arrival, and the first CTA merging only those with keys: 6.42 -> 7.61-7.79 us at
/// context 128, 7.86 -> 8.67-8.82 at 1024 (where every slice has keys). So did (an H100, the same
/// day) each CTA arriving on an mbarrier of the first after a cluster-scope fence instead of the
/// cluster's barrier: 6.78 -> 7.17 us at 128, 8.46 -> 8.81 at 1024. The states stored with
/// st.async instead of plain stores and the cluster's barrier (an H100, 2026-12-05, the slot alone,
/// three rounds against the version before it): 6.70-6.71 -> 6.12-6.16 us at context 128, 8.39-8.42
/// -> 7.73-7.78 at 1024; in bench/engine_kernels.py's run 6.26 us against the hand-written
/// kernel's 6.12 at 128 (0.98x) and 8.07 against 8.71 at 1024.
__device__ __forceinline__ bool states_gathered(int64_t rows, int64_t width, int64_t splits) {
  return states_in_cluster(rows, width, splits) && splits * rows * width <= kClusterStateFloats;
}

/// The mbarrier of the cluster's first CTA that counts the bytes of the other slices' states as
/// they land there (states_gathered): at the same offset in every CTA, made by the first.
__device__ __forceinline__ uint64_t* gathered_barrier() {
  __shared__ __align__(8) uint64_t bar;
  return &bar;
}

/// This CTA's state (its slice `split`'s, the first `count` floats of its cluster state) into the
/// cluster state of the cluster's first CTA at split x count (states_gathered), once every CTA
/// of the cluster has started (apply arrived at the cluster's barrier first): stores that count
/// their bytes on the first CTA's gathered_barrier, which it waits on; no other CTA waits again.
__device__ inline void gather_state(int64_t split, int64_t count) {
  __syncthreads();         // the state written whole
  cluster::wait();         // every CTA of the cluster started (apply arrived before its pass)
  if (split == 0) return;  // already in place
  float* const state = cluster_state();
  unsigned const to = cluster::peer_address(state + split * count, 0u);
  unsigned const bar = cluster::peer_address(gathered_barrier(), 0u);
  if (count % 4 == 0) {
    for (int64_t i = threadIdx.x; i < count / 4; i += blockDim.x) {
      cluster::store_async(to + unsigned(i * 16), reinterpret_cast<float4 const*>(state)[i], bar);
    }
  } else {
    for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
      cluster::store_async(to + unsigned(i * 4), state[i], bar);
    }
  }
}

/// Whether the operands' memory allows the grouped tier's 16-byte reads.
template <class Q, class K, class V>
__device__ bool words_aligned(Q const& q, K const& k, V const& v) {
  using E = elem_t<decltype(q(0, 0, 0))>;
  constexpr int64_t W = 16 / sizeof(E);
  auto aligned = [](void const* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  return aligned(&q(0, 0, 0)) && aligned(&k(0, 0)) && aligned(&v(0, 0)) &&
         int64_t(cute::stride<0>(q)) % W == 0 && int64_t(cute::stride<1>(q)) % W == 0 &&
         int64_t(cute::stride<1>(k)) % W == 0 && int64_t(cute::stride<0>(v)) % W == 0 &&
         blockDim.x == kThreads;
}

/// The slice's state into part (G x M x (Dv + 2)), or where the cluster's combine takes it from
/// shared memory (states_in_cluster), into cluster_state instead (row r = token r / G of head r %
/// G).
template <class Acc, class Scores, class Visible, class Q, class K, class V, class Part>
__device__ void apply(Scores scores, Visible const& visible, Q const& q, K const& k, V const& v,
                      Part&& part, int64_t split, int64_t splits) {
  int64_t const groups = int64_t(cute::size<0>(part)), tokens = int64_t(cute::size<1>(part));
  int64_t const width = int64_t(cute::size<2>(part));
  int64_t const rows = groups * tokens;
  bool const in_cluster = states_in_cluster(rows, width, splits);
  bool const gathered = states_gathered(rows, width, splits);
  if (gathered) {  // gather_state waits: the first CTA has started and made its barrier by then
    if (split == 0 && threadIdx.x == 0) {
      cluster::expect_bytes(gathered_barrier(), unsigned((splits - 1) * rows * width * 4));
    }
    __syncwarp();  // the warp whole again: the arrival is an aligned one
    cluster::arrive();
  }
  if constexpr (grouped_tier<Q, K, V>()) {
    constexpr int64_t most_keys = largest_key_v<key_index_t<K>> / 2;
    if (words_aligned(q, k, v) && int64_t(cute::size<1>(k)) <= most_keys) {
      grouped<Acc>(scores, visible, q, k, v, part, split, splits,
                   in_cluster ? cluster_state() : nullptr);
      if (gathered) gather_state(split, rows * width);
      return;
    }
  }
  general<Acc>(scores, visible, q, k, v, part, split, splits);
  if (in_cluster) {  // the general tier accumulates in part: its rows copied where peers read
    __syncthreads();
    float* const state = cluster_state();
    for (int64_t i = threadIdx.x; i < rows * width; i += blockDim.x) {
      int64_t const r = i / width, c = i % width;
      state[i] = part(r % groups, r / groups, c);
    }
    if (gathered) gather_state(split, rows * width);
  }
}

/// Whether part (S x G x M x (Dv + 2)) has a static slice count of at most a warp and a static row
/// length: the combine's fast tier.
template <class Part>
TILEFOUNDRY_HOST_DEVICE constexpr bool combine_tier() {
  using PL = decltype(std::declval<Part const&>().layout());
  using S = decltype(cute::shape<0>(std::declval<PL>()));
  using W = decltype(cute::shape<3>(std::declval<PL>()));
  if constexpr (!cute::is_static<S>::value || !cute::is_static<W>::value) {
    return false;
  } else {
    return int(S::value) <= 32 && int(W::value) > 2;
  }
}

constexpr int kCombineRows = 32;  // rows whose slices' weights a pass keeps in shared memory

/// The combine's fast tier, over the outputs [first, end) of the rows' G x M x Dv (row r = token
/// r / G of head r % G). A pass takes up to kCombineRows of the rows those outputs lie in: a warp
/// a row reads the slices' maxima and sums (a lane a slice, all at once), and keeps each slice's
/// weight e^(max_s - max) / sum_t e^(max_t - max) sum_t in shared memory; then every thread takes
/// outputs (row, d), each the weighted sum of the S slices' values, read together. Two waits on
/// memory a pass, where the general combine waits once a slice for every output. read(s, g, m, d):
/// element d of row (g, m) of slice s's state (Dv values, then its maximum and sum).
template <int S, int DV, class Read, class Out>
__device__ void combine_fast(Read const& read, Out& out, int64_t first, int64_t end) {
  using T = cute::remove_cvref_t<decltype(out(0, 0, 0))>;
  __shared__ float weight[kCombineRows][S];
  int64_t const groups = int64_t(cute::size<0>(out));
  int const warps = int(blockDim.x) / 32, warp = int(threadIdx.x) / 32,
            lane = int(threadIdx.x) % 32;
  int64_t const row_end = (end + DV - 1) / DV;
  for (int64_t r0 = first / DV; r0 < row_end; r0 += kCombineRows) {
    int const count = int(row_end - r0 < kCombineRows ? row_end - r0 : kCombineRows);
    for (int j = warp; j < count; j += warps) {
      int64_t const g = (r0 + j) % groups, m = (r0 + j) / groups;
      float const ms = lane < S ? read(lane, g, m, DV) : -INFINITY;
      float const sum = lane < S ? read(lane, g, m, DV + 1) : 0.0f;
      float mx = ms;
      CUTE_UNROLL
      for (int off = 16; off > 0; off /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
      float const e = ms == -INFINITY ? 0.0f : detail::exp_(ms - mx);
      float total = e * sum;
      CUTE_UNROLL
      for (int off = 16; off > 0; off /= 2) total += __shfl_xor_sync(0xffffffffu, total, off);
      if (lane < S) weight[j][lane] = e / total;  // no key seen: 0 / 0, NaN as softmax over nothing
    }
    __syncthreads();
    int64_t const lo = first > r0 * DV ? first : r0 * DV;
    int64_t const hi = end < (r0 + count) * DV ? end : (r0 + count) * DV;
    for (int64_t idx = lo + int64_t(threadIdx.x); idx < hi; idx += int64_t(blockDim.x)) {
      int const j = int(idx / DV - r0), d = int(idx % DV);
      int64_t const g = (r0 + j) % groups, m = (r0 + j) / groups;
      float value[S];
      CUTE_UNROLL
      for (int s = 0; s < S; ++s) value[s] = read(s, g, m, d);
      float acc = 0.0f;
      CUTE_UNROLL
      for (int s = 0; s < S; ++s) acc = fmaf(weight[j][s], value[s], acc);
      out(g, m, d) = detail::convert<T>(acc);
    }
    __syncthreads();  // the weights are the next pass's
  }
}

/// The outputs [first, end) of the merge (in the fast tier's order where it applies, else the
/// general one's: each a partition of the same outputs).
template <class Part, class Out>
__device__ void combine_range(Part const& part, Out& out, int64_t first, int64_t end) {
  if constexpr (combine_tier<Part>()) {
    if (blockDim.x % 32 == 0) {
      constexpr int S = int(decltype(cute::shape<0>(part.layout()))::value);
      constexpr int DV = int(decltype(cute::shape<3>(part.layout()))::value) - 2;
      auto const read = [&](int s, int64_t g, int64_t m, int d) { return float(part(s, g, m, d)); };
      combine_fast<S, DV>(read, out, first, end);
      return;
    }
  }
  combine(part, out, first, end);
}

/// The outputs [first, end) of the merge, each slice's state read through read(s, g, m, d) (part's
/// layout, which gives the sizes only): the fast tier where part's sizes allow it, else each
/// output reading every slice's state one at a time.
template <class Part, class Read, class Out>
__device__ void combine_states(Part const& part, Read const& read, Out& out, int64_t first,
                               int64_t end) {
  if constexpr (combine_tier<Part>()) {
    constexpr int S = int(decltype(cute::shape<0>(part.layout()))::value);
    constexpr int W = int(decltype(cute::shape<3>(part.layout()))::value);
    combine_fast<S, W - 2>(read, out, first, end);
  } else {
    combine_with(read, int64_t(cute::size<0>(part)), out, first, end);
  }
}

/// ... every output, by the cluster's first CTA, each slice's state read from its own shared
/// memory, where the slices' CTAs stored them (states_gathered). Part gives the sizes only.
template <class Part, class Out>
__device__ void combine_gathered(Part const& part, Out& out) {
  int64_t const groups = int64_t(cute::size<0>(out));
  int64_t const width = int64_t(cute::size<3>(part));
  int64_t const count = int64_t(cute::size<1>(part)) * int64_t(cute::size<2>(part)) * width;
  float const* const state = cluster_state();
  auto const read = [&](int64_t s, int64_t g, int64_t m, int64_t d) {
    return state[s * count + (m * groups + g) * width + d];
  };
  combine_states(part, read, out, 0, int64_t(cute::size(out)));
}

/// ... each slice's state read from the shared memory of the cluster's CTA of its rank, where
/// ops::attention kept it (states_in_cluster); then the cluster's barrier again, so that no CTA
/// leaves while a peer still reads its state. Part gives the sizes only.
template <class Part, class Out>
__device__ void combine_in_cluster(Part const& part, Out& out, int64_t first, int64_t end) {
  int64_t const groups = int64_t(cute::size<0>(out));
  int64_t const width = int64_t(cute::size<3>(part));
  auto const read = [&](int64_t s, int64_t g, int64_t m, int64_t d) {
    return peer_state(unsigned(s), (m * groups + g) * width + d);
  };
  combine_states(part, read, out, first, end);
  cluster::barrier();
}

}  // namespace attention_impl

/// The attention family's entry: this CTA's slice `split` of `splits` of the keys, softmax(scores)
/// @ v for q (G x M x D) against keys k (D x N) and values v (N x Dv), the slice's state into part
/// (G x M x (Dv + 2) floats) for attention_combine. Every key visible.
template <class Acc, class Scores, class Q, class K, class V, class Part>
__device__ void attention(Scores scores, Q const& q, K const& k, V const& v, Part&& part,
                          int64_t split, int64_t splits) {
  attention_impl::apply<Acc>(scores, attention_impl::visible_always{}, q, k, v, part, split,
                             splits);
}

/// ... key n visible to query row m where cmp(kpos(n), qpos(m)) (a causal mask from positions).
template <class Acc, class Scores, class Cmp, class QPos, class KPos, class Q, class K, class V,
          class Part>
__device__ void attention(Scores scores, Cmp cmp, QPos const& qpos, KPos const& kpos, Q const& q,
                          K const& k, V const& v, Part&& part, int64_t split, int64_t splits) {
  attention_impl::visible_where<Cmp, QPos, KPos> const visible{cmp, qpos, kpos};
  attention_impl::apply<Acc>(scores, visible, q, k, v, part, split, splits);
}

/// ... key n visible to query row m where cmp(n, qpos(m)): the keys are a cache in position order,
/// and a causal comparison scans only the entries up to the largest query position (read here, on
/// the device: the launch is the same at every context length).
template <class Acc, class Scores, class Cmp, class QPos, class Q, class K, class V, class Part>
__device__ void attention(Scores scores, Cmp cmp, QPos const& qpos, Q const& q, K const& k,
                          V const& v, Part&& part, int64_t split, int64_t splits) {
  attention_impl::visible_index<Cmp, QPos, attention_impl::key_index_t<K>> const visible{cmp, qpos};
  attention_impl::apply<Acc>(scores, visible, q, k, v, part, split, splits);
}

/// The shared memory a prompt's attention takes its tiles in (ops::attention_rows' last argument,
/// lower/attention.py's ring in the dynamic shared memory).
template <class Tensor>
struct attention_ring {
  Tensor smem;
  __device__ unsigned char* bytes() const {
    return reinterpret_cast<unsigned char*>(cute::raw_pointer_cast(smem.data()));
  }
};
template <class Tensor>
__device__ attention_ring<Tensor> make_attention_ring(Tensor const& smem) {
  return attention_ring<Tensor>{smem};
}
/// No ring (ops::attention_rows without its last argument): mma.sync's tier, in its own static
/// shared memory.
struct no_attention_ring {};

namespace attention_impl {
template <class Ring>
constexpr bool is_ring_v = false;
template <class Tensor>
constexpr bool is_ring_v<attention_ring<Tensor>> = true;

/// A block of query rows written whole (ops::attention_rows): the tensor-core tier's, which
/// lower/attention.py asks for only where it applies (attention_mma::tier, sm_80 and later). Given
/// a ring (attention_ring: attention_gmma::kRingBytes of dynamic shared memory, which
/// lower/attention.py gives at a head_dim of 128 on sm_90a) the wgmma tier where it applies; else
/// (no_attention_ring) mma.sync's, in its own static shared memory.
template <class Acc, class Scores, class Visible, class Q, class K, class V, class Out, class Ring>
__device__ void rows(Scores scores, Visible const& visible, Q const& q, K const& k, V const& v,
                     Out& out, int64_t block, Ring const& ring) {
  static_assert(attention_mma::tier<Acc, Q, K, V>(),
                "ops::attention_rows takes 16-bit q, k, v of one type, rows of a static head_dim "
                "(a multiple of 16, at most 128) with their elements contiguous, sums in float");
  constexpr bool kRing = is_ring_v<Ring>;
  static_assert(kRing || std::is_same_v<Ring, no_attention_ring>,
                "ops::attention_rows' last argument is a ring (ops::make_attention_ring) or none");
  // the blocks in reverse: a causal prompt's last rows see the most keys, and start first
  int64_t const rows_of_q = int64_t(cute::size<0>(q)) * int64_t(cute::size<1>(q));
  int64_t const blocks = (rows_of_q + attention_mma::kBlockRows - 1) / attention_mma::kBlockRows;
  int64_t const r0 = (blocks - 1 - block) * attention_mma::kBlockRows;
#if TILEFOUNDRY_ATTENTION_GMMA
  if constexpr (kRing && attention_gmma::tier<Acc, Q, K, V>()) {
    using Layout = decltype(ring.smem.layout());
    if constexpr (cute::is_static<Layout>::value) {
      static_assert(cute::size(Layout{}) * sizeof(elem_t<decltype(ring.smem(0))>) >=
                        attention_gmma::kRingBytes,
                    "the ring is smaller than the wgmma tier's tiles: lower/attention.py's "
                    "CUDA_ATTENTION_RING_BYTES and attention_gmma.cuh's kRingBytes must agree");
    }
    attention_gmma::block<Acc>(scores, visible, q, k, v, out, r0, ring.bytes());
  } else {
    (void)ring;
    attention_mma::block<Acc>(scores, visible, q, k, v, out, r0);
  }
#elif TILEFOUNDRY_ATTENTION_MMA
  (void)ring;
  attention_mma::block<Acc>(scores, visible, q, k, v, out, r0);
#else
  (void)scores, (void)visible, (void)q, (void)k, (void)v, (void)out, (void)r0, (void)ring;
  __trap();  // built for a GPU before sm_80, which lower/attention.py never gives this op
#endif
}
}  // namespace attention_impl

/// Many query rows at once (a prompt's attention): block `block` of attention_mma::kBlockRows rows
/// of the G x M query rows of q (row r: token r / G of query head r % G), softmax(scores) @ v
/// written to out (G x M x Dv), each row over every key it sees, through the tensor cores
/// (cuda/ops/attention_mma.cuh; given a ring, attention_ring, the wgmma tier's tiles in it where
/// that tier applies, cuda/ops/attention_gmma.cuh). Every key visible.
template <class Acc, class Scores, class Q, class K, class V, class Out,
          class Ring = no_attention_ring>
__device__ void attention_rows(Scores scores, Q const& q, K const& k, V const& v, Out&& out,
                               int64_t block, Ring const& ring = {}) {
  attention_impl::rows<Acc>(scores, attention_impl::visible_always{}, q, k, v, out, block, ring);
}

/// ... key n visible to query row m where cmp(kpos(n), qpos(m)).
template <class Acc, class Scores, class Cmp, class QPos, class KPos, class Q, class K, class V,
          class Out, class Ring = no_attention_ring>
__device__ void attention_rows(Scores scores, Cmp cmp, QPos const& qpos, KPos const& kpos,
                               Q const& q, K const& k, V const& v, Out&& out, int64_t block,
                               Ring const& ring = {}) {
  attention_impl::visible_where<Cmp, QPos, KPos> const visible{cmp, qpos, kpos};
  attention_impl::rows<Acc>(scores, visible, q, k, v, out, block, ring);
}

/// ... key n visible to query row m where cmp(n, qpos(m)) (the keys a cache in position order: a
/// block reads the keys up to its largest position only).
template <class Acc, class Scores, class Cmp, class QPos, class Q, class K, class V, class Out,
          class Ring = no_attention_ring>
__device__ void attention_rows(Scores scores, Cmp cmp, QPos const& qpos, Q const& q, K const& k,
                               V const& v, Out&& out, int64_t block, Ring const& ring = {}) {
  attention_impl::visible_index<Cmp, QPos, attention_impl::key_index_t<K>> const visible{cmp, qpos};
  attention_impl::rows<Acc>(scores, visible, q, k, v, out, block, ring);
}

/// The slices' states part (S x G x M x (Dv + 2)) merged into out (G x M x Dv).
template <class Part, class Out>
__device__ void attention_combine(Part const& part, Out&& out) {
  attention_impl::combine_range(part, out, 0, int64_t(cute::size(out)));
}

/// ... by the `ranks` CTAs of a thread-block cluster, in the kernel whose CTAs wrote the slices'
/// states (sm_90 and later; the entry launches it in clusters of `ranks` CTAs, this one `rank`):
/// each waits at the cluster's barrier for every slice's state, then merges its share of the
/// outputs, [rank n / ranks, (rank + 1) n / ranks) of the n of out. One kernel where a second
/// launch would merge them: no launch between the slices and their merge, and the states read
/// from the peers' shared memory where they fit (states_in_cluster), else from L2 right after
/// they are written.
template <class Part, class Out>
__device__ void attention_combine(Part const& part, Out&& out, int64_t rank, int64_t ranks) {
  if (cluster::ctas() != unsigned(ranks)) __trap();  // launched in other clusters
  int64_t const n = int64_t(cute::size(out));
  int64_t const rows = int64_t(cute::size<1>(part)) * int64_t(cute::size<2>(part));
  if (attention_impl::states_gathered(rows, int64_t(cute::size<3>(part)), ranks)) {
    if (rank == 0) {  // the others leave once their states are on their way here
      cluster::wait_bytes(attention_impl::gathered_barrier());
      attention_impl::combine_gathered(part, out);
    }
    return;
  }
  cluster::barrier();
  if (attention_impl::states_in_cluster(rows, int64_t(cute::size<3>(part)), ranks)) {
    attention_impl::combine_in_cluster(part, out, n * rank / ranks, n * (rank + 1) / ranks);
    return;
  }
  attention_impl::combine_range(part, out, n * rank / ranks, n * (rank + 1) / ranks);
}

}  // namespace ops
}  // namespace tilefoundry

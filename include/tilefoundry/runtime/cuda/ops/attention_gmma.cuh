// ops::attention_rows's Hopper tier (sm_90a): the blocks of query rows of attention_mma.cuh, the
// same CTA of one warpgroup taking kBlockRows rows of one key head over kKeyTile keys at a time,
// with both products on wgmma instead of mma.sync, in the ring of dynamic shared memory the call
// is given (lower/attention.py's, kRingBytes).
//
// The warpgroup's wgmma reads the block's q and the tile's keys (scores = q k^T, m64 n kKeyTile,
// both K-major) and values (o += p v, m64 n D, values MN-major) from shared memory itself: a tile
// is read once a CTA where mma.sync read it once a warp. The accumulators have mma.sync's m16n8
// layout, so the tile's scores become weights by attention_mma::weights, and the weights, rounded
// to T, are the A fragments (registers) of the values' product as they stand. The tensor cores run
// a tile ahead of the softmax: tile i + 1's scores are made while tile i's weights multiply its
// values.
//
// A tile of rows (q's, the keys', the values') is stored as wgmma's 128-byte swizzle wants it:
// D / 64 blocks of 64 columns, each row of a block 128 bytes, its 16-byte words permuted by the
// row's index mod 8 (word w of row r at w ^ (r % 8)), so both products take their operands with
// one descriptor each k16 step (tile_offset).
//
// Measured (bench/compiled_prefill_attention_cuda.py: Qwen3-1.7B's 16 / 8 heads of 128, bf16, a
// causal prompt from position 0, CUDA-graph medians, 2026-12-05): on the H100, 1024
// tokens 62.8-64.1 us and 8192 tokens 1421-1427 us, against 66.8-67.7 and 1560-1569 on mma.sync
// (SDPA's flash backend 36.0-36.5 and 951-958); with weigh's tiles tested whole below the diagonal
// and the hardware's flushing 2^x (H200, same run as the version before it): 60.6-61.2 and
// 1336-1338 us against 62.9-63.7 and 1434-1435 (SDPA 35.9-36.8, 956-966): 0.60x and 0.72x. Profiled
// there (ncu, 8192 tokens): the issue slots 55% busy, the integer pipe the busiest (47%), 4.8
// cycles a warp between instructions with three CTAs (12 warps) an SM, the registers' limit: the
// softmax's instructions and their latency bound it, not the tensor cores. This version (the next
// tile's scores issued with this tile's values' product, q from shared memory, the tiles in the
// ring, the scores rounded two at a time; 150 registers, three CTAs an SM), on the H100 in the same
// run as the one before it (two rounds, 2026-12-05): 1024 tokens 54.1-55.3 us against 58.8-59.9
// (SDPA 36.2-36.8: 0.67x), 8192 tokens 1195-1202 against 1317-1321 (SDPA 955-957: 0.80x). The
// first step alone (q in registers, 185 registers, two CTAs an SM) had been faster at 1024 tokens
// (53.5 us) but slower at 8192 (1407-1422). With whole tiles of keys and values copied at constant
// steps (attention_mma.cuh's fill_rows; 166 registers, three CTAs an SM), on the H100 in the same
// run as the version before it (two rounds, 2026-12-06): 1024 tokens 34.3-34.7 us against
// 54.1-54.5 (SDPA 36.5-36.9: 1.06x), 8192 tokens 664-666 against 1196-1201 (SDPA 963-981: 1.45x):
// the copies' address arithmetic had been most of the integer pipe's work.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/attention_impl.h>
#include <tilefoundry/runtime/cuda/ops/attention_mma.cuh>
#include <tilefoundry/runtime/cuda/ops/copy_async.cuh>

#include <cute/arch/mma_sm90.hpp>
#include <cute/arch/mma_sm90_desc.hpp>
#include <cute/arch/mma_sm90_gmma.hpp>

#include <cstdint>
#include <type_traits>
#include <utility>

namespace tilefoundry {
namespace ops {
namespace attention_gmma {

using attention_mma::kBlockRows;
using attention_mma::kKeyTile;
using attention_mma::kThreads;
static_assert(kThreads == 128 && kBlockRows == 64, "one warpgroup, wgmma's 64 rows");

/// Whether the tier's static conditions hold: attention_mma's, and D 128 (two whole 128-byte rows
/// of the swizzle). At a head_dim of 64 (one row) this tier passed the prompt test's cases whose
/// blocks see one tile of keys and failed the first whose blocks see several (H100,
/// tests/gpu/test_compile_stages.py: 100 rows from position 37 over 300 keys, 39% of the outputs
/// outside bf16's bound, with the values' copies in one stage or two): not understood yet, so 64
/// takes attention_mma's tier.
template <class Acc, class Q, class K, class V>
TILEFOUNDRY_HOST_DEVICE constexpr bool tier() {
  return attention_mma::tier<Acc, Q, K, V>() &&
         attention_impl::contiguous_head_dim<Q, K, V>() == 128;
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TILEFOUNDRY_ATTENTION_GMMA 1
#else
#define TILEFOUNDRY_ATTENTION_GMMA 0
#endif

/// Where element (row, col) of a tile of kKeyTile rows of D columns lies (in elements from the
/// tile's start, which is 1024-byte aligned): column block col / 64 of kKeyTile rows of 64, the
/// 16-byte word (col % 64) / 8 of the row swizzled by row % 8.
template <int D>
TILEFOUNDRY_HOST_DEVICE constexpr int tile_offset(int row, int col) {
  return col / 64 * (kKeyTile * 64) + row * 64 + (((col % 64) / 8) ^ (row % 8)) * 8 + col % 8;
}

/// Bytes of the ring a call of this tier takes (lower/attention.py's CUDA_ATTENTION_RING_BYTES): q,
/// a tile of keys and two of values at a head_dim of 128, and the slack that aligns them to 1024.
constexpr int kRingBytes = 4 * kKeyTile * 128 * 2 + 1024;

#if TILEFOUNDRY_ATTENTION_GMMA
/// A wgmma descriptor of the tile at shared address `address` in the 128-byte swizzle: 8-row
/// groups 1024 bytes apart and, read MN-major (`mn`, the values), column blocks kKeyTile * 128
/// bytes apart (a K-major read stays in one 128-byte row a step: the field is unused, 1).
__device__ __forceinline__ uint64_t descriptor(uint32_t address, bool mn) {
  cute::GmmaDescriptor desc;
  desc.bitfield.start_address_ = uint16_t(address >> 4);
  desc.bitfield.leading_byte_offset_ = uint16_t(mn ? kKeyTile * 128 >> 4 : 1);
  desc.bitfield.stride_byte_offset_ = uint16_t(1024 >> 4);  // 8-row groups
  desc.bitfield.base_offset_ = 0;
  desc.bitfield.layout_type_ = uint8_t(cute::GMMA::LayoutType::B128);
  return desc.desc_;
}

/// Rows [0, count) of `src` (row i at src(i), D contiguous elements) into the swizzled tile at
/// `dst` (tile_offset), zeros past `count`; one group of copies (attention_mma::fill_rows).
template <int D, class E, class Src>
__device__ __forceinline__ void fill(E* dst, Src const& src, int64_t count, bool words) {
  attention_mma::fill_rows<D>(dst, tile_offset<D>, src, count, words);
}

/// The copies this thread waited for seen by every thread's wgmma: the async proxy's fence, then
/// the CTA's barrier.
__device__ __forceinline__ void publish() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
}

/// d (rows x N floats, m16n8 fragments d[j][e]) = or += a b for the k16 step whose A fragments
/// are `a` and whose B the descriptor `b` gives: one wgmma of the warpgroup, issued, not waited on.
template <class Op, int J, size_t... I>
__device__ __forceinline__ void wgmma(float (&d)[J][4], uint32_t const (&a)[4], uint64_t b,
                                      bool accumulate, std::index_sequence<I...>) {
  Op::fma(a[0], a[1], a[2], a[3], b, d[I / 4][I % 4]...,
          accumulate ? cute::GMMA::ScaleOut::One : cute::GMMA::ScaleOut::Zero);
}

/// ... for the k16 step whose A the descriptor `a` gives (from shared memory).
template <class Op, int J, size_t... I>
__device__ __forceinline__ void wgmma(float (&d)[J][4], uint64_t a, uint64_t b, bool accumulate,
                                      std::index_sequence<I...>) {
  Op::fma(a, b, d[I / 4][I % 4]...,
          accumulate ? cute::GMMA::ScaleOut::One : cute::GMMA::ScaleOut::Zero);
}

/// Registers a wgmma reads or writes while it runs, pinned here: the compiler neither moves their
/// uses across this point nor gives them to other values before it (a register operand that dies
/// at the wgmma's issue would otherwise be reused while the tensor cores still read it).
template <int J, class R>
__device__ __forceinline__ void fence(R (&d)[J][4]) {
  CUTE_UNROLL
  for (int j = 0; j < J; ++j) {
    CUTE_UNROLL
    for (int e = 0; e < 4; ++e) cute::warpgroup_fence_operand(d[j][e]);
  }
}

/// Rows [r0, r0 + kBlockRows) of a key head's G x M rows: softmax(scores(q k^T), visible) v into
/// out.
template <class Acc, class Scores, class Visible, class Q, class K, class V, class Out>
__device__ void block(Scores scores, Visible const& visible, Q const& q, K const& k, V const& v,
                      Out& out, int64_t r0, unsigned char* ring) {
  using E = attention_mma::elem_t<decltype(q(0, 0, 0))>;
  constexpr int D = int(decltype(cute::shape<2>(q.layout()))::value);
  constexpr int kDTiles = D / 8;
  constexpr int kTile = kKeyTile * D;  // elements of a tile
  using Major = cute::GMMA::Major;
  static_assert(kTile * 2 * 4 + 1024 <= kRingBytes, "the ring holds q, the keys, two value stages");
  using ScoresOp = decltype(cute::SM90::GMMA::ss_op_selector<
                            E, E, float, cute::Shape<cute::_64, cute::Int<kKeyTile>, cute::_16>,
                            Major::K, Major::K>());
  using ValuesOp =
      decltype(cute::SM90::GMMA::rs_op_selector<E, E, float,
                                                cute::Shape<cute::_64, cute::Int<D>, cute::_16>,
                                                Major::K, Major::MN>());
  // the ring, from its first 1024-byte boundary: q, the keys, the values' two stages
  E* const sQ = reinterpret_cast<E*>(ring + (-reinterpret_cast<uintptr_t>(ring) & 1023));
  E* const sK = sQ + kTile;
  E* const sV = sK + kTile;

  auto const b = attention_mma::block_rows(visible, q, k, v, r0);
  int64_t const seen = b.seen;
  bool const words = b.words;
  fill<D>(
      sQ, [&](int i) { return b.q_row(q, i); }, b.rows_here, words);  // read by every tile

  float o[kDTiles][4];
  CUTE_UNROLL
  for (int j = 0; j < kDTiles; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
  float mx[2] = {-INFINITY, -INFINITY}, sum[2] = {0.0f, 0.0f};
  uint32_t const q_at = unsigned(__cvta_generic_to_shared(sQ));
  uint32_t const k_at = unsigned(__cvta_generic_to_shared(sK));
  uint32_t const v_at = unsigned(__cvta_generic_to_shared(sV));

  auto const key_row = [&](int64_t n0) { return attention_mma::key_rows(k, n0); };
  auto const val_row = [&](int64_t n0) { return attention_mma::value_rows(v, n0); };
  auto const keys_in = [seen](int64_t n0) { return seen - n0 < kKeyTile ? seen - n0 : kKeyTile; };
  // scores = q k^T of the keys in sK, issued: k16 step kk reads columns [16 kk, 16 kk + 16) of
  // the keys, 32 bytes a step into a 128-byte row of column block kk / 4
  float s[kKeyTile / 8][4];
  auto const issue_scores = [&]() {
    fence(s);
    cute::warpgroup_arrive();
    CUTE_UNROLL
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t const step = uint32_t(kk / 4 * kKeyTile * 128 + kk % 4 * 32);
      wgmma<ScoresOp>(s, descriptor(q_at + step, false), descriptor(k_at + step, false), kk > 0,
                      std::make_index_sequence<kKeyTile / 2>{});
    }
    cute::warpgroup_commit_batch();
  };
  if (seen <= 0) {
    ops::cp_async_wait<0>();
    attention_mma::finish<E>(o, sum, out, b.ra, b.rb, b.total, b.groups);  // no key: 0 / 0
    return;
  }
  // The tensor cores run a tile ahead of the softmax: while tile i's weights multiply its values
  // (o += p v), tile i + 1's scores are made and weighed; the weighted sums are rescaled for tile
  // i + 1's maxima once tile i's product is done. The copies: tile i + 1's values (into stage
  // (i + 1) % 2 of sV) start at the top of tile i, tile i + 2's keys (into sK) once tile i + 1's
  // scores are made; at the top of a tile every group but the newest is waited for.
  fill<D>(sK, key_row(0), keys_in(0), words);
  fill<D>(sV, val_row(0), keys_in(0), words);
  ops::cp_async_wait<1>();
  publish();  // q and tile 0's keys are in
  issue_scores();
  cute::warpgroup_wait<0>();
  fence(s);
  float scale[2];
  __syncthreads();  // every warp's product has read the keys: sK takes tile 1's
  if (kKeyTile < seen) {
    fill<D>(sK, key_row(kKeyTile), keys_in(kKeyTile), words);
  } else {
    ops::cp_async_commit();
  }
  attention_mma::weights<E>(scores, visible, s, mx, sum, scale, 0, keys_in(0), b.pos_a, b.pos_b);
  uint32_t pf[kKeyTile / 16][4];
  attention_mma::pack_weights<E>(s, pf);
  // o += weights @ values of the stage: k16 step kk reads the values' rows [16 kk, 16 kk + 16),
  // two 8-row groups of 1024 bytes
  auto const issue_values = [&](int stage) {
    fence(o);
    fence(pf);
    cute::warpgroup_arrive();
    CUTE_UNROLL
    for (int kk = 0; kk < kKeyTile / 16; ++kk) {
      uint32_t const at = v_at + uint32_t(stage * kTile * 2 + kk * 2048);
      wgmma<ValuesOp>(o, pf[kk], descriptor(at, true), true, std::make_index_sequence<D / 2>{});
    }
    cute::warpgroup_commit_batch();
  };
  int stage = 0;
  int64_t n0 = 0;
  for (; n0 + kKeyTile < seen; n0 += kKeyTile, stage ^= 1) {  // the tiles a next one follows
    int64_t const n1 = n0 + kKeyTile;
    fill<D>(sV + (stage ^ 1) * kTile, val_row(n1), keys_in(n1), words);
    ops::cp_async_wait<1>();
    publish();  // this tile's values and the next tile's keys are in
    issue_scores();
    issue_values(stage);
    cute::warpgroup_wait<1>();  // the next tile's scores (the values' product may still run)
    fence(s);
    __syncthreads();  // every warp's product has read the keys: sK takes tile + 2's
    if (n1 + kKeyTile < seen) {
      fill<D>(sK, key_row(n1 + kKeyTile), keys_in(n1 + kKeyTile), words);
    } else {
      ops::cp_async_commit();  // an empty group: the count at the top holds
    }
    attention_mma::weights<E>(scores, visible, s, mx, sum, scale, n1, keys_in(n1), b.pos_a,
                              b.pos_b);
    cute::warpgroup_wait<0>();
    fence(o);
    fence(pf);
    attention_mma::rescale(o, scale);
    attention_mma::pack_weights<E>(s, pf);
    __syncthreads();  // every warp's product has read this stage of the values: it takes tile + 2's
  }
  ops::cp_async_wait<0>();
  publish();  // the last tile's values are in
  issue_values(stage);
  cute::warpgroup_wait<0>();
  fence(o);
  fence(pf);
  ops::cp_async_wait<0>();
  attention_mma::finish<E>(o, sum, out, b.ra, b.rb, b.total, b.groups);
}
#endif

}  // namespace attention_gmma
}  // namespace ops
}  // namespace tilefoundry

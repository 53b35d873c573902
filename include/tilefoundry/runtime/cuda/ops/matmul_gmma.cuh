// ops::matmul's tensor-core tier on Hopper (sm_90a): many rows (a prefill's projections) as a GEMM
// on wgmma, out = a @ b with a (M x K) and b (K x N) both contiguous along K (activations
// row-major, a weight stored (N, K) read as its transpose), 16-bit elements (bf16 or f16), sums in
// f32.
//
// The schedule (lower/matmul.py's GEMM schedule): a CTA of one warpgroup (128 threads) owns a
// column tile of at most kTileN columns and takes the row tiles of kTileM rows rank, rank + ranks,
// ... of the rows the call was given. For each row tile it runs K in steps of kTileK through a ring
// of kStages stages in shared memory (the call's ring, carved from the kernel's dynamic shared
// memory): every thread copies 16-byte words of the next stages' a and b tiles with cp.async
// (zero-filled past M, N and K), while the warpgroup's wgmma (operands read from shared memory in
// the 128-byte swizzle GMMA expects, CuTe's Layout_K_SW128_Atom) accumulates the current stage into
// registers. The epilogue passes each sum through the call's epilogue (a residual add, a cast) and
// stores it.
//
// Where the tier does not apply (another architecture, other element types, K or a row's stride not
// a multiple of 8 elements, a pointer not 16-byte aligned) the row tiles go to the tiers of
// matmul_impl.h instead, so the call is correct for any operands it accepts.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/matmul_impl.h>

#include <cute/arch/mma_sm90.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cute/tensor.hpp>

#include <cstdint>
#include <type_traits>

namespace tilefoundry {
namespace ops {
namespace matmul_gmma {

// Build-time knobs for measuring other shapes of the tier (lower/matmul.py's comment has the
// numbers): they must agree with lower/matmul.py's CUDA_GEMM_TILE_M, CUDA_GEMM_THREADS and
// CUDA_GEMM_RING_BYTES (a smaller static ring is a compile error below; a CTA of another size runs
// the other tiers).
#ifndef TILEFOUNDRY_MATMUL_GMMA_WARPGROUPS
#define TILEFOUNDRY_MATMUL_GMMA_WARPGROUPS 1
#endif
#ifndef TILEFOUNDRY_MATMUL_GMMA_STAGES
#define TILEFOUNDRY_MATMUL_GMMA_STAGES 4
#endif
constexpr int kWarpgroups = TILEFOUNDRY_MATMUL_GMMA_WARPGROUPS;  // each 128 rows of a row tile
constexpr int kTileM = 128 * kWarpgroups;  // rows of a row tile (wgmma atoms of 64 rows)
constexpr int kTileN = 128;  // columns of the widest column tile the schedule gives a CTA
constexpr int kTileK = 64;   // K a stage: one 128-byte swizzle row of 16-bit elements
constexpr int kStages = TILEFOUNDRY_MATMUL_GMMA_STAGES;  // stages: kStages - 1 loading, one read
constexpr int kThreads = 128 * kWarpgroups;
constexpr int kAlign = 1024;  // the 128-byte swizzle repeats every 8 rows of 128 bytes
constexpr int64_t kStageBytes = int64_t(kTileM + kTileN) * kTileK * 2;
/// Bytes of the ring a call of this tier needs (lower/matmul.py's CUDA_GEMM_RING_BYTES): the stages
/// of a and b, and the slack that aligns its start to the swizzle.
constexpr int64_t kRingBytes = kStages * kStageBytes + kAlign;

template <class A>
using element_t = matmul_impl::element_t<A>;

/// Whether the tier's static conditions hold: both operands contiguous along K, one 16-bit
/// floating type, and a kernel for sm_90a or later (wgmma).
template <class A, class B>
constexpr bool tier_v =
    ::tilefoundry::detail::unit_stride_v<1, A>&& ::tilefoundry::detail::unit_stride_v<0, B>&&
        std::is_same_v<element_t<A>, element_t<B>> &&
    (std::is_same_v<element_t<A>, cute::bfloat16_t> || std::is_same_v<element_t<A>, cute::half_t>);

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TILEFOUNDRY_MATMUL_GMMA 1
#else
#define TILEFOUNDRY_MATMUL_GMMA 0
#endif

/// The shared-memory layouts and the wgmma of element type E.
template <class E>
struct Config {
  using TileM = cute::Int<kTileM>;
  using TileN = cute::Int<kTileN>;
  using TileK = cute::Int<kTileK>;
  using Stages = cute::Int<kStages>;
  using SmemA = decltype(cute::tile_to_shape(cute::GMMA::Layout_K_SW128_Atom<E>{},
                                             cute::Shape<TileM, TileK, Stages>{}));
  using SmemB = decltype(cute::tile_to_shape(cute::GMMA::Layout_K_SW128_Atom<E>{},
                                             cute::Shape<TileN, TileK, Stages>{}));
  using Atom = decltype(cute::SM90::GMMA::ss_op_selector<E, E, float,
                                                         cute::Shape<cute::_64, TileN, TileK>>());
  using Mma = decltype(cute::make_tiled_mma(
      Atom{}, cute::Layout<cute::Shape<cute::Int<kWarpgroups>, cute::_1, cute::_1>>{}));
};

/// Whether the run-time conditions hold: K, both operands' row strides and their starts allow
/// 16-byte words, and the CTA is one warpgroup.
template <class A, class B>
__device__ bool runtime_ok(A const& a, B const& b) {
  using E = element_t<A>;
  constexpr int64_t V = 16 / int64_t(sizeof(E));
  int64_t const depth = int64_t(cute::size<1>(a));
  auto const aligned = [](void const* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  return blockDim.x == kThreads && depth % V == 0 && int64_t(cute::stride<0>(a)) % V == 0 &&
         int64_t(cute::stride<1>(b)) % V == 0 && aligned(&a(0, 0)) && aligned(&b(0, 0));
}

#if TILEFOUNDRY_MATMUL_GMMA
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int N>
__device__ __forceinline__ void wait_copies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/// One thread's share of the copies of a tile's K steps into the ring: a thread always copies the
/// same 16-byte word (w) of rows r0, r0 + kRowsApart, ... (threads side by side take a row's words
/// side by side), so where each word goes in the swizzled stage and where it comes from are found
/// once a row tile, and a step adds only its K offset and its stage.
template <int Rows, class E>
struct Loader {
  static constexpr int kWords = kTileK * int(sizeof(E)) / 16;  // words of a row's step
  static constexpr int V = 16 / int(sizeof(E));
  static constexpr int kRowsApart = kThreads / kWords;
  static constexpr int kCopies = Rows / kRowsApart;
  static_assert(Rows % kRowsApart == 0, "a tile's rows are a whole number of the threads' passes");

  E const* src;           // the thread's first row, its word at k = 0
  int64_t stride;         // between rows of the operand
  int64_t col;            // the word's first K
  int64_t valid;          // rows of the tile that exist past the thread's first
  unsigned stage_bytes;   // between stages of the ring
  unsigned dst[kCopies];  // shared-memory addresses of the words in stage 0

  /// The copies of rows [0, count) of the operand at base (rows `stride` apart) into tile s.
  template <class Smem>
  __device__ Loader(Smem& s, E const* base, int64_t stride_, int64_t count) {
    int const w = int(threadIdx.x) % kWords;
    int const r0 = int(threadIdx.x) / kWords;
    src = base + int64_t(r0) * stride_ + int64_t(w) * V;
    stride = stride_;
    col = int64_t(w) * V;
    valid = count - r0;
    auto const at = [](auto& x) { return unsigned(__cvta_generic_to_shared(&x)); };
    stage_bytes = at(s(0, 0, 1)) - at(s(0, 0, 0));
    CUTE_UNROLL
    for (int c = 0; c < kCopies; ++c) dst[c] = at(s(r0 + c * kRowsApart, w * V, 0));
  }

  /// Issues the copies of the K step starting at k0 (of `depth`) into `stage`.
  __device__ __forceinline__ void copy(int64_t k0, int64_t depth, int stage) const {
    bool const inside = col + k0 < depth;
    unsigned const offset = unsigned(stage) * stage_bytes;
    CUTE_UNROLL
    for (int c = 0; c < kCopies; ++c) {
      bool const ok = inside && c * kRowsApart < valid;
      E const* const from = ok ? src + int64_t(c) * kRowsApart * stride + k0 : src;
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst[c] + offset),
                   "l"(from), "r"(ok ? 16 : 0)
                   : "memory");
    }
  }
};

/// The row tile of `rows` rows starting at row m0: out(m0 + m, n) = epi(m0 + m, n, sum_k a(m0 + m,
/// k) * b(k, n)) for m < rows, n < the tile's columns.
template <class A, class B, class Out, class Epi>
__device__ void row_tile(A const& a, B const& b, Out& out, Epi const& epi, int64_t m0, int64_t rows,
                         unsigned char* ring) {
  using E = element_t<A>;
  using T = cute::remove_cvref_t<decltype(out(0, 0))>;
  using C = Config<E>;
  int64_t const depth = int64_t(cute::size<1>(a));
  int64_t const cols = int64_t(cute::size<1>(b));
  E* const smem_a = reinterpret_cast<E*>(ring);
  E* const smem_b = smem_a + int64_t(kTileM) * kTileK * kStages;
  auto sA = cute::make_tensor(cute::make_smem_ptr(smem_a), typename C::SmemA{});
  auto sB = cute::make_tensor(cute::make_smem_ptr(smem_b), typename C::SmemB{});
  E const* const a_base = &a(m0, 0);
  E const* const b_base = &b(0, 0);
  int64_t const a_stride = int64_t(cute::stride<0>(a));
  int64_t const b_stride = int64_t(cute::stride<1>(b));

  typename C::Mma mma;
  auto thr = mma.get_slice(threadIdx.x);
  auto tCsA = thr.partition_A(sA);  // (MMA, MMA_M, MMA_K, stages)
  auto tCsB = thr.partition_B(sB);
  auto tCrA = thr.make_fragment_A(tCsA);
  auto tCrB = thr.make_fragment_B(tCsB);
  auto acc = cute::partition_fragment_C(mma, cute::Shape<typename C::TileM, typename C::TileN>{});

  int64_t const steps = (depth + kTileK - 1) / kTileK;
  Loader<kTileM, E> const load_a(sA, a_base, a_stride, rows);
  Loader<kTileN, E> const load_b(sB, b_base, b_stride, cols);
  auto const load = [&](int64_t step) {
    int const stage = int(step % kStages);
    load_a.copy(step * kTileK, depth, stage);
    load_b.copy(step * kTileK, depth, stage);
  };
  CUTE_UNROLL
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < steps) load(s);
    commit();  // one group a step, empty past the last: the wait below counts steps
  }
  mma.accumulate_ = cute::GMMA::ScaleOut::Zero;
  for (int64_t step = 0; step < steps; ++step) {
    wait_copies<kStages - 2>();  // this thread's words of `step` have landed
    __syncthreads();             // ... and every thread's
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // seen by wgmma's reads
    int const stage = int(step % kStages);
    cute::warpgroup_fence_operand(acc);
    cute::warpgroup_arrive();
    CUTE_UNROLL
    for (int kb = 0; kb < int(cute::size<2>(tCrA)); ++kb) {
      cute::gemm(mma, tCrA(cute::_, cute::_, kb, stage), tCrB(cute::_, cute::_, kb, stage), acc);
      mma.accumulate_ = cute::GMMA::ScaleOut::One;
    }
    cute::warpgroup_commit_batch();
    cute::warpgroup_wait<1>();  // the step before has been read: its stage may be refilled
    cute::warpgroup_fence_operand(acc);
    __syncthreads();  // ... by every warp of the warpgroup
    if (step + kStages - 1 < steps) load(step + kStages - 1);
    commit();
  }
  cute::warpgroup_wait<0>();
  cute::warpgroup_fence_operand(acc);
  if (steps == 0) cute::clear(acc);  // K = 0: every sum is zero

  auto const coords = thr.partition_C(
      cute::make_identity_tensor(cute::Shape<typename C::TileM, typename C::TileN>{}));
  CUTE_UNROLL
  for (int i = 0; i < int(cute::size(acc)); ++i) {
    int64_t const m = int64_t(cute::get<0>(coords(i)));
    int64_t const n = int64_t(cute::get<1>(coords(i)));
    if (m < rows && n < cols) {
      matmul_impl::store<T>(out, epi, m0 + m, n, float(acc(i)), 0.0f);
    }
  }
  __syncthreads();  // the ring is reused by the next row tile
}
#endif

/// The call of the GEMM schedule: this CTA's row tiles rank, rank + ranks, ... of a's rows through
/// the tensor cores where the tier applies (true), else nothing done (false: the caller takes the
/// other tiers).
template <class A, class B, class Out, class Epi, class Ring>
__device__ bool apply(A const& a, B const& b, Out& out, Epi const& epi, Ring const& ring,
                      int64_t rank, int64_t ranks) {
#if TILEFOUNDRY_MATMUL_GMMA
  if constexpr (tier_v<A, B>) {
    using R = cute::remove_cvref_t<decltype(ring(0))>;
    if constexpr (cute::is_static<decltype(ring.layout())>::value) {
      static_assert(
          cute::size(decltype(ring.layout()){}) * sizeof(R) >= kRingBytes,
          "the ring is smaller than the tier's stages: lower/matmul.py's CUDA_GEMM_RING_BYTES "
          "and matmul_gmma.cuh's kRingBytes must agree");
    }
    if (int64_t(cute::size(ring)) * int64_t(sizeof(R)) < kRingBytes || !runtime_ok(a, b) ||
        int64_t(cute::size<1>(b)) > kTileN) {
      return false;
    }
    auto* const raw = reinterpret_cast<unsigned char*>(cute::raw_pointer_cast(&ring(0)));
    auto* const aligned = reinterpret_cast<unsigned char*>(
        (reinterpret_cast<uintptr_t>(raw) + kAlign - 1) / kAlign * kAlign);
    int64_t const total = int64_t(cute::size<0>(a));
    for (int64_t tile = rank; tile * kTileM < total; tile += ranks) {
      int64_t const m0 = tile * kTileM;
      int64_t const rows = total - m0 < kTileM ? total - m0 : kTileM;
      row_tile(a, b, out, epi, m0, rows, aligned);
    }
    return true;
  }
#endif
  (void)a, (void)b, (void)out, (void)epi, (void)ring, (void)rank, (void)ranks;
  return false;
}

}  // namespace matmul_gmma
}  // namespace ops
}  // namespace tilefoundry

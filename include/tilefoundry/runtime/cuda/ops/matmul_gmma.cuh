// ops::matmul's tensor-core tier on Hopper (sm_90a): many rows (a prefill's projections) as a GEMM
// on wgmma, out = a @ b with a (M x K) and b (K x N) both contiguous along K (activations
// row-major, a weight stored (N, K) read as its transpose), 16-bit elements (bf16 or f16), sums in
// f32.
//
// The schedule (lower/matmul.py's GEMM schedule): a CTA of kWarpgroups warpgroups of math (each
// S::kWarpgroupRows rows of a row tile: Shape) and one copy warpgroup, one CTA an SM, takes the
// output tiles of S::kTileM x kTileN rank, rank + ranks, ... (Tiles) of the columns and rows the
// call was given. For each tile, K runs in steps of kTileK through a ring of S::kStages stages in
// shared memory (the call's ring, carved from the kernel's dynamic shared memory), read by the
// warpgroups' wgmma in the 128-byte swizzle GMMA expects (CuTe's Layout_K_SW128_Atom), the sums
// held in registers (the copy warpgroup gives the math most of its registers: setmaxnreg). The
// epilogue passes each sum through the call's epilogue (a residual add, a cast) and stores it, in
// 16-byte words through a staging of each warp's rows in shared memory (Math::store); an epilogue
// that reads tensors (ops::reads_at: a residual) reads a 16-byte word of each at once. The stages
// are filled in one of two ways:
//
// - Given tensor maps of both operands (cuda/tensor_map.cuh, built by the host entry), the copy
//   warpgroup fills them: one lane issues the copy engine's (TMA's) box copies of a stage's a and
//   b tiles, which complete on the stage's `full` barrier, and waits on the stage's `empty` barrier
//   before refilling it, which each math warp arrives on once its wgmma has read the stage. The
//   copy engine fills zeros past M, N and K. The copies of the next tile run under this one's
//   epilogue. Built with TILEFOUNDRY_MATMUL_GMMA_SHARE_B=1 (measured slower, below), a cluster's
//   two CTAs taking tiles of the same columns each copy half of the b tile into both.
// - Otherwise (no map: a batch of matrices, a view the host could not describe) the math threads
//   copy 16-byte words with cp.async (zero-filled past M, N and K) between their wgmma steps, and
//   the copy warpgroup does nothing.
//
// Measured on the H200 at Qwen3-1.7B's projections (bf16, CUDA-graph medians, M = 1024 and 4096,
// bench/compiled_gemm_cuda.py): one warpgroup a CTA of 128 x 128 tiles, its stages copied with
// cp.async, 0.31-0.62x cuBLAS; the same through the copy engine, three stages and two CTAs an SM,
// 0.37-0.57x; two warpgroups (256 x 128 tiles), four stages, 0.41-0.80x. Profiled (ncu, q/k/v at
// M = 1024, K = 2048: 49 us against cuBLAS's 26; 36% of L2's throughput, so not bound there), that
// version spent about half its warps' samples in the epilogue's 2-byte stores (each touching a
// 32-byte sector of its own) and spilled 80 bytes (168 registers, the cap of 9 warps an SM); the
// staging and the register move answer those two. Profiled again (ncu's SASS samples through
// bench/sass_samples.py, an H100, 2026-12-06, o_proj alone at M = 1024: 27.3 us against cuBLAS's
// 18.2 under ncu's clocks): 43.9% of the warps' samples in the main loop (20.1% on a stage's
// `full` barrier), 24.3% in the epilogue (15.2% stalled on instruction fetch there: its straight
// code runs once a warp), 11.5% in the code before the loop (6.5% waiting for the first stage),
// 9.8% in the prologue's parameter loads; cuBLAS's kernel is 1,256 instructions (this one 9,432,
// every tier of the call inlined), alternates two accumulators a warpgroup, waiting for all its
// wgmma each step, and stages its epilogue through stmatrix (7.4% of its samples).
//
// Where neither applies (another architecture, other element types, K or a row's stride not a
// multiple of 8 elements, a pointer not 16-byte aligned) the row tiles go to the tiers of
// matmul_impl.h instead, so the call is correct for any operands it accepts.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/matmul_impl.h>
#include <tilefoundry/runtime/cuda/bulk_copy.cuh>
#include <tilefoundry/runtime/cuda/cluster.cuh>
#include <tilefoundry/runtime/cuda/tensor_map.cuh>

#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>

#include <cute/arch/copy_sm90_desc.hpp>
#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/arch/mma_sm90.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cute/tensor.hpp>

#include <cstdint>
#include <type_traits>

namespace tilefoundry {
namespace ops {
namespace matmul_gmma {

// Build-time knobs for measuring other shapes of the tier (lower/matmul.py's comment has the
// numbers): they must agree with lower/matmul.py's CUDA_GEMM_THREADS and CUDA_GEMM_RING_BYTES (a
// smaller static ring is a compile error below; a CTA of another size runs the other tiers).
// TILEFOUNDRY_MATMUL_GMMA_STAGES counts stages of the 128-row warpgroups' tiles; 64-row ones take
// the stages that fill the same bytes. TILEFOUNDRY_MATMUL_GMMA_WARPGROUP_ROWS 64 or 128 makes
// every call take that shape (0: each call picks, rows_of).
#ifndef TILEFOUNDRY_MATMUL_GMMA_WARPGROUPS
#define TILEFOUNDRY_MATMUL_GMMA_WARPGROUPS 2
#endif
#ifndef TILEFOUNDRY_MATMUL_GMMA_WARPGROUP_ROWS
#define TILEFOUNDRY_MATMUL_GMMA_WARPGROUP_ROWS 0
#endif
#ifndef TILEFOUNDRY_MATMUL_GMMA_STAGES
#define TILEFOUNDRY_MATMUL_GMMA_STAGES 4
#endif
// TILEFOUNDRY_MATMUL_GMMA_SHARE_B 1: the two CTAs of a cluster taking tiles of the same columns
// each copy half of their b tile into both (TMA multicast, Tiles::share_b), halving what L2 sends
// of the weights. Measured on an H100 (2026-12-06, bench/compiled_gemm_cuda.py, CUDA-graph medians,
// us, multicast / not, cuBLAS): at 1024 rows q/k/v 29.6 / 28.4 (25.3), o_proj + residual 21.8 /
// 21.2 (18.5), gate/up 79.5 / 77.2 (73.1), down + residual 47.8 / 48.5 (42.7), o_proj 19.6 / 19.0
// (16.1); at 4096 107.6 / 101.1 (93.7), 75.2 / 73.7 (64.3), 348.0 / 335.9 (306.6), 170.5 / 167.8
// (156.5), 63.4 / 61.3 (52.9): slower in nine cases of ten (each CTA then waits for its peer's
// release of a stage too), so off; kept as a knob, its values tested on the GPU
// (tests/gpu/test_compile_stages.py).
#ifndef TILEFOUNDRY_MATMUL_GMMA_SHARE_B
#define TILEFOUNDRY_MATMUL_GMMA_SHARE_B 0
#endif
constexpr int kWarpgroups = TILEFOUNDRY_MATMUL_GMMA_WARPGROUPS;
constexpr int kForcedRows = TILEFOUNDRY_MATMUL_GMMA_WARPGROUP_ROWS;
static_assert(kForcedRows == 0 || kForcedRows == 64 || kForcedRows == 128,
              "TILEFOUNDRY_MATMUL_GMMA_WARPGROUP_ROWS: 0 (each call picks), 64 or 128");
constexpr int kTileN = 128;  // columns of an output tile
constexpr int kTileK = 64;   // K a stage: one 128-byte swizzle row of 16-bit elements
// Bytes of the ring's stages: TILEFOUNDRY_MATMUL_GMMA_STAGES stages of 256 x 64 and 128 x 64
// elements (a and b tiles of 128-row warpgroups).
constexpr int64_t kStagesBytes =
    int64_t(TILEFOUNDRY_MATMUL_GMMA_STAGES) * (128 * kWarpgroups + kTileN) * kTileK * 2;
// Rows of a tensor map's box (lower/matmul.py's CUDA_GEMM_BOX_ROWS): a stage's a tile is
// S::kTileM / kBoxRows boxes one under the other and its b tile kTileN / kBoxRows (a K-major
// 128-byte-swizzled tile is its rows' 128 bytes one after the other, so a box of rows r.. lands
// r * 128 bytes in). Half a b tile, so that each CTA of a pair sharing their b tiles copies one
// half into both (mapped_tiles).
constexpr int kBoxRows = 64;
constexpr int kMathThreads = 128 * kWarpgroups;
constexpr int kMathWarps = kMathThreads / 32;
constexpr int kThreads = kMathThreads + 128;  // and the copy warpgroup
// Registers a thread once the CTA starts (setmaxnreg): the copy warpgroup gives all but
// kCopyRegisters of the 65536 / kThreads each thread starts with (__launch_bounds__(kThreads, 1))
// to the math.
constexpr int kCopyRegisters = 40;
constexpr int kMathRegisters = (65536 / 128 - kCopyRegisters) / kWarpgroups / 8 * 8 < 240
                                   ? (65536 / 128 - kCopyRegisters) / kWarpgroups / 8 * 8
                                   : 240;
constexpr int kAlign = 1024;            // the 128-byte swizzle repeats every 8 rows of 128 bytes
constexpr int64_t kBarrierBytes = 128;  // a stage's `full` and `empty` barriers, 8 bytes each,
                                        // and the K split's barrier of the peer's sums
constexpr int kOutRows = 8;  // rows of sums a math warp stages on their way out (Math::store)
constexpr int64_t kOutBytes = int64_t(kMathWarps) * kOutRows * kTileN * 4;
/// Bytes of the ring a call of this tier needs (lower/matmul.py's CUDA_GEMM_RING_BYTES): the stages
/// of a and b, the slack that aligns its start to the swizzle, the stages' barriers and the math
/// warps' staging of their sums.
constexpr int64_t kRingBytes = kStagesBytes + kAlign + kBarrierBytes + kOutBytes;

/// The shape of a call's tiles: each math warpgroup WR rows of a row tile (128: two wgmma atoms of
/// 64 rows, 256 x 128 tiles; 64: one, 128 x 128 tiles, as cuBLAS's 128x128_64x6_2x1 kernel that
/// took o_proj + residual at M = 1024 in 19.0 us against 39.8 of our 256 x 128 tiles, ncu on an
/// H100), in as many stages as fill the ring's stage bytes (4 or 6).
template <int WR>
struct Shape {
  static_assert(WR == 64 || WR == 128, "wgmma atoms of 64 rows, one or two");
  static constexpr int kWarpgroupRows = WR;
  static constexpr int kTileM = WR * kWarpgroups;  // rows of a row tile
  static constexpr int64_t kStageBytes = int64_t(kTileM + kTileN) * kTileK * 2;
  static constexpr int kStages = int(kStagesBytes / kStageBytes);  // stages of the ring
  // Bytes of sums one CTA of a K-split pair gives the other: a warpgroup's rows (Math::give).
  static constexpr unsigned kGivenBytes = unsigned(WR * kTileN * 4);
  static_assert(kTileM % kBoxRows == 0 && kTileN == 2 * kBoxRows,
                "the tiles are whole boxes, a b tile two of them");
  static_assert(kStages >= 2, "two stages at least: one read while the next is filled");
  static_assert(2 * 8 * kStages + 8 <= kBarrierBytes, "the barriers fit their bytes (and kept's)");
  static_assert(int64_t(kTileM) * kTileN * 4 <= kStages * kStageBytes,
                "a tile's sums fit the stages");
};

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

/// The shared-memory layouts and the wgmma of element type E in tiles of shape S.
template <class S, class E>
struct Config {
  using TileM = cute::Int<S::kTileM>;
  using TileN = cute::Int<kTileN>;
  using TileK = cute::Int<kTileK>;
  using Stages = cute::Int<S::kStages>;
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
/// 16-byte words, and the CTA is the schedule's (the warpgroups of math and the copy warpgroup).
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
/// Two floats into shared memory at `at` (an address of the shared window, 8-byte aligned).
__device__ __forceinline__ void store_shared(unsigned at, float a, float b) {
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(at), "f"(a), "f"(b) : "memory");
}

/// A float from shared memory at `at` (4-byte aligned).
__device__ __forceinline__ float load_shared_f32(unsigned at) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(v) : "r"(at) : "memory");
  return v;
}

/// Four floats from shared memory at `at` (16-byte aligned).
__device__ __forceinline__ float4 load_shared(unsigned at) {
  float4 v;
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(at)
               : "memory");
  return v;
}

/// A barrier among the math threads alone (named barrier 1; the copy warpgroup is not waited for).
__device__ __forceinline__ void sync_math() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(kMathThreads) : "memory");
}

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
  static constexpr int kRowsApart = kMathThreads / kWords;
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
    auto const at = [](auto& x) { return bulk::smem_address(&x); };
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

/// The math threads' share of a row tile's wgmma: the tiled wgmma, this thread's slice of it, its
/// partitions of the ring's stages and the tile's sums in registers (make_math).
template <class S, class E, class Mma, class Thr, class FragA, class FragB, class Acc>
struct Math {
  using C = Config<S, E>;
  Mma mma;
  Thr thr;
  FragA tCrA;
  FragB tCrB;
  Acc acc;

  // (Where a warpgroup's rows were one wgmma atom, K's odd steps adding into a second set of sums,
  // as cuBLAS's 128x128_64x6 kernel alternates two accumulators a warpgroup, measured on an H100,
  // 2026-12-06, CUDA-graph medians, us, two sets / one, cuBLAS: at 1024 rows o_proj + residual
  // 20.3 / 20.0 (18.8), down + residual 47.2 / 46.4 (44.1), o_proj 16.5 / 16.4 (15.1): no gain;
  // and its members, unused, made three of the test kernels spill 40-124 bytes. Removed.)

  /// Starts a tile: the next step overwrites the sums.
  __device__ void begin() { mma.accumulate_ = cute::GMMA::ScaleOut::Zero; }

  /// Issues the wgmma of the K step in `stage` and waits until the one before it has read its
  /// stage (the stage may then be refilled).
  __device__ __forceinline__ void step(int stage) {
    cute::warpgroup_fence_operand(acc);
    cute::warpgroup_arrive();
    CUTE_UNROLL
    for (int kb = 0; kb < int(cute::size<2>(tCrA)); ++kb) {
      cute::gemm(mma, tCrA(cute::_, cute::_, kb, stage), tCrB(cute::_, cute::_, kb, stage), acc);
      mma.accumulate_ = cute::GMMA::ScaleOut::One;
    }
    cute::warpgroup_commit_batch();
    cute::warpgroup_wait<1>();
    cute::warpgroup_fence_operand(acc);
  }

  /// Waits for the last step; `steps == 0` (K = 0) makes every sum zero.
  __device__ void finish(int64_t steps) {
    cute::warpgroup_wait<0>();
    cute::warpgroup_fence_operand(acc);
    if (steps == 0) cute::clear(acc);
  }

  /// out(m0 + m, n0 + n) = epi(m0 + m, n0 + n, the sum) for m < rows, n < cols of the tile,
  /// through `staging` (this warp's kOutRows x kTileN floats of the ring); of a Pair (the tile's
  /// columns c < kTileN / 2 the first product's sums, c + kTileN / 2 the second's at the same
  /// output column: mapped_tiles), epi(m0 + m, n0 + n, the first sum, the second) for n < cols <=
  /// kTileN / 2, the two read back from the staging side by side. A thread's sums are pairs of
  /// adjacent columns in two rows of each 64-row atom (wgmma's layout of C), which stored as they
  /// are make 2-byte writes each touching a sector of its own (measured on the H200: half a 256 x
  /// 128 tile's time at K = 2048). So the warp passes its rows through shared memory, 8 at a time
  /// (a row each quad of lanes), and reads them back 8 columns a lane: 16 lanes a row, passed
  /// through the epilogue and written as 16-byte words where the 8 columns exist, are contiguous in
  /// out and aligned (else one element at a time). A row's 8-column blocks are swizzled by its row
  /// (block ^ row % 4), so a quad's writes of four rows meet no bank twice.
  template <bool Pair = false, class Out, class Epi>
  __device__ void store(Out& out, Epi const& epi, int64_t m0, int64_t n0, int64_t rows,
                        int64_t cols, float* staging) const {
    using T = cute::remove_cvref_t<decltype(out(0, 0))>;
    static_assert(cute::size<0, 0>(Acc{}) == 2 && cute::size<0, 1>(Acc{}) == 2 &&
                      cute::size<0, 2>(Acc{}) * 8 == kTileN && cute::size<2>(Acc{}) == 1,
                  "wgmma's C: (column pair, row half, 8-column block) x atoms of rows");
    auto const coords = thr.partition_C(
        cute::make_identity_tensor(cute::Shape<typename C::TileM, typename C::TileN>{}));
    int const lane = int(threadIdx.x) % 32;
    int const quad_row = lane / 4;
    auto const swizzled = [](int row, int col) { return row * kTileN + (col ^ ((row & 3) << 3)); };
    bool const contiguous = int64_t(cute::stride<1>(out)) == 1 && sizeof(T) == 2;
    // The staging's address in the shared window: ld/st.shared, not generic loads and stores (the
    // compiler cannot tell the ring's pointer is shared). Measured on an H100 (2026-12-06,
    // CUDA-graph medians, us, shared / generic): at 1024 rows q/k/v 27.6 / 28.0, o_proj + residual
    // 20.8 / 21.0, gate/up 74.0 / 74.7, down + residual 46.2 / 46.8, o_proj 18.7 / 18.3; at 4096
    // 99.4 / 100.5, 72.7 / 75.1, 330.5 / 334.6, 158.6 / 161.8, 58.3 / 59.3 (cuBLAS 24.8, 18.3,
    // 70.9, 41.5, 15.6; 93.1, 65.8, 304.6, 150.8, 53.0); ptxas: 440 fewer instructions in o_proj +
    // residual's kernel and no spill (8 bytes before).
    unsigned const staged_at = bulk::smem_address(staging);
    // The warp's rows go out in slices of 8 (two a 64-row atom), one turn of a loop that is not
    // unrolled each: the code is one slice's, where unrolled it was every slice's (about 880
    // instructions run once a warp where a warpgroup's rows are 64, 15% of the kernel's samples
    // stalled on instruction fetch there: the straight code was cold every time). A slice's passes
    // (a 16-byte word of out each, four a lane) are unrolled: their whole words first, then their
    // stores, so the epilogue's reads (a residual) of a slice are in flight together; where a
    // warpgroup's rows are 128, one pass at a time (groups of 2 and 4 measured no faster there,
    // below). A tile's edge goes one element at a time in loops of their own. Measured on an H100
    // (2026-12-06, bench/compiled_gemm_cuda.py, CUDA-graph medians, us, slices rolled / passes
    // rolled too / neither, cuBLAS): at 1024 rows q/k/v 27.1 / 27.6 / 27.4 (25.1), o_proj +
    // residual 20.7 / 20.5 / 20.8 (18.7), gate/up 73.7 / 75.1 / 73.6 (70.2), down + residual 43.4
    // / 43.7 / 44.3 (39.6), o_proj 18.2 / 18.1 / 18.9 (15.9); at 4096 101.5 / 104.0 / 101.7
    // (96.0), 69.2 / 69.9 / 69.5 (62.4), 333.0 / 339.9 / 330.2 (303.9), 163.2 / 163.6 / 163.7
    // (155.6), 53.9 / 55.1 / 54.4 (49.7). (Earlier, on the unrolled code: neither the residual's
    // 2-byte loads, eight a word, nor their latency was the gap: groups of 2 and 4 passes where the
    // rows are 128, and the copy warpgroup's idle lanes reading each tile's residual rows into L2
    // while its products ran, measured within 1%.)
    constexpr int kSlices = 2 * int(cute::size<1>(Acc{}));   // 8-row slices of the warp's rows
    constexpr int kOutCols = Pair ? kTileN / 2 : kTileN;     // columns of out a tile
    constexpr unsigned kSecond = 4u * unsigned(kTileN / 2);  // a pair's second sums, past its first
    constexpr int kPasses = kOutRows * kOutCols / 8 / 32;
    constexpr int kGroup = S::kWarpgroupRows == 64 ? kPasses : 1;
    // where pass p's word lies: row row_of(p) of the staged rows, columns col_of(p) .. + 7 (and,
    // of a pair, its second sums col_of(p) + kTileN / 2 .. + 7: the swizzle keeps them side by
    // side, as it moves a block by a multiple of 8 columns below 32)
    auto const row_of = [&](int p) { return (lane + 32 * p) / (kOutCols / 8); };
    auto const col_of = [&](int p) { return (lane + 32 * p) % (kOutCols / 8) * 8; };
#pragma unroll 1
    for (int slice = 0; slice < kSlices; ++slice) {
      __syncwarp();  // the reads of the slice before are done
      int row0 = 0;  // the slice's first row in the tile
      CUTE_UNROLL
      for (int s = 0; s < kSlices; ++s) {
        if (s != slice) continue;
        int const atom = s / 2, half = s % 2;
        CUTE_UNROLL
        for (int block = 0; block < kTileN / 8; ++block) {
          auto const at = cute::make_coord(cute::make_coord(0, half, block), atom, 0);
          int const col = int(cute::get<1>(coords(at)));
          auto const next = cute::make_coord(cute::make_coord(1, half, block), atom, 0);
          store_shared(staged_at + 4u * unsigned(swizzled(quad_row, col)), float(acc(at)),
                       float(acc(next)));
        }
        row0 = int(cute::get<0>(coords(cute::make_coord(cute::make_coord(0, half, 0), atom, 0))));
      }
      __syncwarp();
      int64_t const first = m0 + __shfl_sync(0xffffffffu, row0, 0);
      CUTE_UNROLL
      for (int group = 0; group < kPasses; group += kGroup) {
        alignas(16) T packed[kGroup][8];
        unsigned whole = 0;  // bit g: pass group + g is a whole, aligned word of out
        CUTE_UNROLL
        for (int g = 0; g < kGroup; ++g) {
          int const row = row_of(group + g), col = col_of(group + g);
          int64_t const m = first + row, n = n0 + col;
          if (first - m0 + row < rows && col + 8 <= cols && contiguous &&
              (reinterpret_cast<uintptr_t>(&out(m, n)) & 15) == 0) {
            whole |= 1u << g;
            unsigned const word = staged_at + 4u * unsigned(swizzled(row, col));
            float4 const lo = load_shared(word), hi = load_shared(word + 16u);
            float const v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
            // the word's epilogue of its sums (a pair's: both products' words)
            auto const pass = [&](auto const&... sums) {
              if constexpr (is_reading_v<Epi>) {
                // the tensors it reads, a word of each at once (common/ops/matmul_epilogue.h), not
                // eight 2-byte loads; measured on an H100 (2026-12-06, CUDA-graph medians, us,
                // words / elements, both with the second set of sums of Math's comment): o_proj +
                // residual 20.3 / 20.3 at 1024 rows, 67.4 / 67.8 at 4096; down + residual 47.2
                // / 47.4, 164.0 / 164.6
                epi.word(m, n, sums..., packed[g]);
              } else {
                CUTE_UNROLL
                for (int e = 0; e < 8; ++e) {
                  packed[g][e] = ::tilefoundry::detail::convert<T>(epi(m, n + e, sums[e]...));
                }
              }
            };
            if constexpr (Pair) {
              float4 const lo1 = load_shared(word + kSecond),
                           hi1 = load_shared(word + kSecond + 16u);
              float const v1[8] = {lo1.x, lo1.y, lo1.z, lo1.w, hi1.x, hi1.y, hi1.z, hi1.w};
              pass(v, v1);
            } else {
              pass(v);
            }
          }
        }
        CUTE_UNROLL
        for (int g = 0; g < kGroup; ++g) {
          if constexpr (sizeof(T) == 2) {  // (whole only where T is 16-bit: `contiguous`)
            if (whole >> g & 1u) {         // one st.global.v4 (a uint4 assignment made four stores)
              int64_t const m = first + row_of(group + g), n = n0 + col_of(group + g);
              detail::store_word<true>(&out(m, n), detail::bits_as<detail::word4>(packed[g]));
            }
          }
        }
        // a tile's edge (or an out that is not whole words): one element at a time
#pragma unroll 1
        for (int g = 0; g < kGroup; ++g) {
          int const row = row_of(group + g), col = col_of(group + g);
          if ((whole >> g & 1u) || first - m0 + row >= rows || col >= cols) continue;
          unsigned const word = staged_at + 4u * unsigned(swizzled(row, col));
#pragma unroll 1
          for (int e = 0; e < 8 && col + e < cols; ++e) {
            unsigned const at = word + 4u * unsigned(e);
            matmul_impl::store<T>(out, epi, first + row, n0 + col + e, load_shared_f32(at),
                                  Pair ? load_shared_f32(at + kSecond) : 0.0f);
          }
        }
      }
    }
  }

  /// The tile's sums into `kept` in the shared memory of the cluster's CTA `peer` (kMathThreads x
  /// the sums a thread holds, in float4s), thread by thread: each thread of that CTA holds the sums
  /// of the same elements and adds these to them (add_kept). The stores do not wait for each other.
  /// Measured on an H100 (a 1024 x 2048 x 2048 product + residual, CUDA-graph medians): reading the
  /// peer's memory instead, a round trip a word, 31.7 us, of which the move of the 128 KiB of sums
  /// 4.4 (leaving it out: 27.4); these stores of all the sums one way 30.4; half of them each way,
  /// each CTA storing half the tile (mapped_tiles), 28.5-28.8 (down + residual, 6144 deep: 52.6
  /// -> 50.5-50.9; cuBLAS 18.0 and 39.2-40.0 in the same run). Through st.async, the bytes counted
  /// on the peer's barrier and no cluster barrier after the stores (an H100, 2026-12-05, two rounds
  /// against the cluster barriers' version): o_proj 28.3-28.5 -> 27.4-27.5 us, down 49.5-49.8 ->
  /// 48.5 (cuBLAS 17.6 and 38.7).
  __device__ void give(float4* kept, uint64_t* landed, unsigned peer) const {
    constexpr int kWords = int(decltype(cute::size(acc))::value) / 4;
    int const tid = int(threadIdx.x);
    unsigned const base = cluster::peer_address(kept + tid, peer);
    unsigned const bar = cluster::peer_address(landed, peer);
    static_assert(kWords * 16 * 128 == S::kGivenBytes, "a warpgroup gives its rows' sums");
    CUTE_UNROLL
    for (int j = 0; j < kWords; ++j) {
      cluster::store_async(base + unsigned(j * kMathThreads * sizeof(float4)),
                           make_float4(acc(4 * j), acc(4 * j + 1), acc(4 * j + 2), acc(4 * j + 3)),
                           bar);
    }
  }

  /// Adds to the tile's sums those the cluster's other CTA gave this one (give), in `kept`.
  __device__ void add_kept(float4 const* kept) {
    constexpr int kWords = int(decltype(cute::size(acc))::value) / 4;
    int const tid = int(threadIdx.x);
    CUTE_UNROLL
    for (int j = 0; j < kWords; ++j) {
      float4 const v = kept[j * kMathThreads + tid];
      acc(4 * j) += v.x;
      acc(4 * j + 1) += v.y;
      acc(4 * j + 2) += v.z;
      acc(4 * j + 3) += v.w;
    }
  }
};

/// The math of a thread over the stages sA and sB (stages_of).
template <class S, class E, class SA, class SB>
__device__ auto make_math(SA const& sA, SB const& sB) {
  using C = Config<S, E>;
  typename C::Mma mma;
  auto thr = mma.get_slice(threadIdx.x);
  auto tCrA = thr.make_fragment_A(thr.partition_A(sA));
  auto tCrB = thr.make_fragment_B(thr.partition_B(sB));
  auto acc = cute::partition_fragment_C(mma, cute::Shape<typename C::TileM, typename C::TileN>{});
  return Math<S, E, decltype(mma), decltype(thr), decltype(tCrA), decltype(tCrB), decltype(acc)>{
      mma, thr, tCrA, tCrB, acc};
}

/// The ring's stages as CuTe tensors of a's and b's tiles.
template <class S, class E>
__device__ auto stages_of(unsigned char* ring) {
  using C = Config<S, E>;
  E* const smem_a = reinterpret_cast<E*>(ring);
  E* const smem_b = smem_a + int64_t(S::kTileM) * kTileK * S::kStages;
  return cute::make_tuple(cute::make_tensor(cute::make_smem_ptr(smem_a), typename C::SmemA{}),
                          cute::make_tensor(cute::make_smem_ptr(smem_b), typename C::SmemB{}));
}

/// This math warp's staging of its sums in the ring (Math::store), past the stages' barriers.
__device__ inline float* staging_of(unsigned char* ring) {
  auto* const all = reinterpret_cast<float*>(ring + kStagesBytes + kBarrierBytes);
  return all + int64_t(threadIdx.x / 32) * kOutRows * kTileN;
}

/// The output tiles of an M x N product, S::kTileM x Cols each (Cols: kTileN, or kTileN / 2 for a
/// pair, whose b tile is Cols columns of each weight), numbered down the rows first:
/// tile t covers rows m0(t) up to rows(t) of them and columns n0(t) up to cols(t) of them. CTA
/// `rank` of `ranks` takes tiles rank, rank + ranks, ...: at(0), at(1), ... until one is -1.
/// (32-bit arithmetic: a GPU divides 64-bit integers in a long subroutine.) Measured on the H200 at
/// Qwen3-1.7B's projections against two other orders (CUDA-graph medians, M = 1024 and 4096): tiles
/// numbered along the columns first, 12.7% slower at gate/up and down at M = 4096, the other six
/// cases within 4.5%; each CTA keeping one column tile (where the CTAs outnumber them), 24-27%
/// slower at gate/up (both M) and 6% at down at M = 4096, the other five within 4%.
template <class S, int Cols = kTileN>
struct Tiles {
  static constexpr int kTileM = S::kTileM;
  int m, n, rank, ranks, row_tiles, count;

  __device__ Tiles(int64_t m_, int64_t n_, int64_t rank_, int64_t ranks_)
      : m(int(m_)),
        n(int(n_)),
        rank(int(rank_)),
        ranks(int(ranks_)),
        row_tiles(int((m_ + kTileM - 1) / kTileM)),
        count(row_tiles * int((n_ + Cols - 1) / Cols)) {}

  __device__ int at(int i) const { return rank + i * ranks < count ? rank + i * ranks : -1; }
  __device__ int m0(int t) const { return t % row_tiles * kTileM; }
  __device__ int n0(int t) const { return t / row_tiles * Cols; }
  __device__ int rows(int t) const { return m - m0(t) < kTileM ? m - m0(t) : kTileM; }
  __device__ int cols(int t) const { return n - n0(t) < Cols ? n - n0(t) : Cols; }

  /// Whether the two CTAs of each cluster split every tile's K steps between them (split_k):
  /// the kernel was launched in clusters of two, CTA `rank` is rank % 2 of its cluster, and the
  /// tiles leave at least half the CTAs idle (each pair then takes at most one tile), of at least
  /// two steps of K. Every CTA of a cluster finds the same.
  __device__ bool split(int64_t steps) const {
    return cluster::ctas() == 2 && ranks % 2 == 0 && unsigned(rank % 2) == cluster::rank() &&
           2 * count <= ranks && steps >= 2;
  }

  /// Whether the two CTAs of each cluster take tiles of the same columns at every turn, so that
  /// each copies half of their b tile into both (mapped_tiles): clusters of two, CTA `rank` rank %
  /// 2 of its cluster, and an even count of row tiles (tile t, even, and t + 1 then share their
  /// columns, and exist together). Every CTA of a cluster finds the same.
  __device__ bool share_b() const {
    return TILEFOUNDRY_MATMUL_GMMA_SHARE_B && Cols == kTileN && cluster::ctas() == 2 &&
           ranks % 2 == 0 && unsigned(rank % 2) == cluster::rank() && row_tiles % 2 == 0;
  }

  /// The tiles of the cluster's pair of CTAs, where they split K (split): pair rank / 2 of
  /// ranks / 2.
  __device__ Tiles pairs() const { return Tiles(m, n, rank / 2, ranks / 2); }
};

/// A step's place in a ring of kStages stages: its stage, and the parity of the rounds of the ring
/// before it (the phase an mbarrier of that stage completes in). Counted as the steps go, not found
/// from a 64-bit step count: a division by the stage count (6 where a stage is 128 x 128 tiles)
/// was a chain of 20 uniform multiplies and adds in every step of the main loop, between one wgmma
/// batch and the next (SASS; ncu on an H100: the kernel executed 2.7 times cuBLAS's instructions
/// for o_proj at 1024 rows, its tensor pipe 40% busy against cuBLAS's 62%). Counted, the loop is 56
/// instructions a step instead of 82; the bench (H100, CUDA-graph medians, us, before / after in
/// two runs, cuBLAS in each): o_proj + residual at 1024 rows 21.1 / 20.9 (17.7, 18.8), down +
/// residual 43.3 / 42.8 (38.4, 39.7), o_proj alone 16.8 / 17.1 (14.5, 15.2): within the runs'
/// noise; the gap to cuBLAS is elsewhere.
template <int kStages>
struct RingPosition {
  int stage = 0;
  uint32_t phase = 0;

  __device__ __forceinline__ void advance() {
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1u;
    }
  }
};

/// Output tile t, its stages copied by the math threads with cp.async: out(m, n) = epi(m, n, sum_k
/// a(m, k) * b(k, n)) for the tile's rows m and columns n.
template <class S, class A, class B, class Out, class Epi>
__device__ __forceinline__ void row_tile(A const& a, B const& b, Out& out, Epi const& epi,
                                         Tiles<S> const& tiles, int t, unsigned char* ring) {
  using E = element_t<A>;
  constexpr int kStages = S::kStages;
  int64_t const depth = int64_t(cute::size<1>(a));
  int64_t const m0 = tiles.m0(t), n0 = tiles.n0(t), rows = tiles.rows(t), cols = tiles.cols(t);
  auto [sA, sB] = stages_of<S, E>(ring);
  auto math = make_math<S, E>(sA, sB);
  int64_t const steps = (depth + kTileK - 1) / kTileK;
  Loader<S::kTileM, E> const load_a(sA, &a(m0, 0), int64_t(cute::stride<0>(a)), rows);
  Loader<kTileN, E> const load_b(sB, &b(0, n0), int64_t(cute::stride<1>(b)), cols);
  auto const load = [&](int64_t step, int stage) {
    load_a.copy(step * kTileK, depth, stage);
    load_b.copy(step * kTileK, depth, stage);
  };
  CUTE_UNROLL
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < steps) load(s, s);
    commit();  // one group a step, empty past the last: the wait below counts steps
  }
  math.begin();
  // the stages of the step read and of the step copied (kStages - 1 ahead), counted (RingPosition)
  RingPosition<kStages> reading, filling{kStages - 1};
  for (int64_t step = 0; step < steps; ++step, reading.advance(), filling.advance()) {
    wait_copies<kStages - 2>();  // this thread's words of `step` have landed
    sync_math();                 // ... and every math thread's
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // seen by wgmma's reads
    math.step(reading.stage);  // ... and the step before has been read
    sync_math();               // ... by every warp of the warpgroup
    if (step + kStages - 1 < steps) load(step + kStages - 1, filling.stage);
    commit();
  }
  math.finish(steps);
  math.store(out, epi, m0, n0, rows, cols, staging_of(ring));
  sync_math();  // the ring is reused by the next tile
}

/// Where a view starting at `first` lies in map `m`: its first row, or -1 where it does not start
/// a row of the map.
template <class E>
__device__ int64_t map_row(tensor_map const& m, E const* first) {
  int64_t const at = int64_t(first - static_cast<E const*>(m.base));
  if (at == 0) return 0;  // the map's first row (a map of the view itself): no 64-bit division
  return at > 0 && at % m.stride == 0 ? at / m.stride : -1;
}

/// Whether the tensor maps describe a and b: made, of their row strides and depth, and a's rows
/// and b's columns inside them.
template <class A, class B>
__device__ bool maps_ok(A const& a, B const& b, tensor_map const& ma, tensor_map const& mb) {
  using E = element_t<A>;
  int64_t const depth = int64_t(cute::size<1>(a));
  int64_t const ra = map_row(ma, &a(0, 0));
  int64_t const rb = map_row(mb, &b(0, 0));
  return ma.ok && mb.ok && ma.box_rows == kBoxRows && mb.box_rows == kBoxRows &&
         ma.depth == depth && mb.depth == depth && ma.stride == int64_t(cute::stride<0>(a)) &&
         mb.stride == int64_t(cute::stride<1>(b)) && ra >= 0 &&
         ra + int64_t(cute::size<0>(a)) <= ma.rows && rb >= 0 &&
         rb + int64_t(cute::size<1>(b)) <= mb.rows && ra < (int64_t(1) << 31) &&
         rb < (int64_t(1) << 31) && sizeof(E) == 2;
}

/// This CTA's tiles rank, rank + ranks, ... with their stages filled by the copy warpgroup through
/// the tensor maps (the file's first comment). Where the tiles leave at least half the CTAs idle
/// and the kernel runs in clusters of two (Tiles::split: o_proj and down at 1024 rows of
/// Qwen3-1.7B, 64 tiles of 256 x 128 for 132 SMs), each pair of CTAs takes one tile, the first CTA
/// its first half of K's steps and the second the rest; past the cluster's barrier (their stages
/// read by then) each CTA stores the sums of one warpgroup's rows (half the tile's) into the
/// peer's stages (distributed shared memory), and past a second barrier each adds the peer's sums
/// to its other warpgroup's and stores those rows. Otherwise, where the pair shares b's tiles
/// (Tiles::share_b, TILEFOUNDRY_MATMUL_GMMA_SHARE_B), each CTA's copy lane copies half of each b
/// tile into the same stage of both CTAs (TMA multicast, counted on both `full` barriers), and a
/// stage is refilled once the math warps of both have read it (each arrives on both `empty`
/// barriers).
///
/// A pair of products sharing a (Pair: silu(a @ gate) * (a @ up), b1 of b's shape through `mb1`)
/// takes output tiles of kTileN / 2 columns (Tiles<S, kTileN / 2>): a stage's b tile is a box of
/// those columns of b over a box of the same columns of b1, so one wgmma makes both products of
/// the tile, b's in the sums' first kTileN / 2 columns and b1's in the rest, and Math::store
/// passes each pair of sums through the epilogue. (Each CTA's tile is half as wide; the a tile
/// is copied once for both products.)
template <class S, bool Pair, class A, class B, class B1, class Out, class Epi, int Cols>
__device__ __forceinline__ void mapped_tiles(A const& a, B const& b, B1 const& b1, Out& out,
                                             Epi const& epi, Tiles<S, Cols> const& all,
                                             tensor_map const& ma, tensor_map const& mb,
                                             tensor_map const& mb1, unsigned char* ring) {
  static_assert(Cols == (Pair ? kTileN / 2 : kTileN), "a pair's tiles are half as wide");
  static_assert(!Pair || Cols == kBoxRows, "a pair's b tile is a box of each weight");
  using E = element_t<A>;
  constexpr int kStages = S::kStages;
  constexpr int64_t kStageBytes = S::kStageBytes;
  using Full = cutlass::arch::ClusterTransactionBarrier;
  using Empty = cutlass::arch::ClusterBarrier;
  int64_t const depth = int64_t(cute::size<1>(a));
  int64_t const steps = (depth + kTileK - 1) / kTileK;
  bool const split = all.split(steps);
  bool const multicast = !split && all.share_b();  // the CTAs copy b's tiles for both
  unsigned const half = split || multicast ? cluster::rank() : 0u;
  Tiles<S, Cols> const tiles = split ? all.pairs() : all;
  // This CTA's steps of K: `count` of them from step `first`.
  int64_t const first = split && half == 1 ? steps / 2 : 0;
  int const count = int(split ? (half == 0 ? steps / 2 : steps - steps / 2) : steps);
  auto* const full = reinterpret_cast<uint64_t*>(ring + kStages * kStageBytes);
  auto* const empty = full + kStages;
  auto* const kept = reinterpret_cast<float4*>(ring);  // the second CTA's sums, where K is split
  auto* const landed = empty + kStages;                // ... and the barrier counting their bytes
  // the copy lane: its maps fetched while the barriers are made (as CUTLASS's kernels do; not timed
  // on its own)
  if (int(threadIdx.x) == kMathThreads) {
    cute::prefetch_tma_descriptor(&ma.map);
    cute::prefetch_tma_descriptor(&mb.map);
    if constexpr (Pair) cute::prefetch_tma_descriptor(&mb1.map);
  }
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      Full::init(&full[s], 1);  // the copy lane's arrival, then the copies' bytes
      // a lane of each math warp, its wgmma done: of both CTAs where the pair shares b (a stage is
      // refilled in both by either)
      Empty::init(&empty[s], multicast ? 2 * kMathWarps : kMathWarps);
    }
    if (split) cluster::expect_bytes(landed, S::kGivenBytes);  // (its own init's fence)
    cutlass::arch::fence_barrier_init();
  }
  if (multicast) {
    cluster::barrier();  // the peer's barriers are made before this CTA's copies count on them
  } else {
    __syncthreads();
  }
  bool const lead = threadIdx.x % 32 == 0;
  if (int(threadIdx.x) >= kMathThreads) {  // the copy warpgroup: one lane issues every copy
    cutlass::arch::warpgroup_reg_dealloc<kCopyRegisters>();
    if (int(threadIdx.x) == kMathThreads) {
      int32_t const a_row = int32_t(map_row(ma, &a(0, 0)));
      int32_t const b_row = int32_t(map_row(mb, &b(0, 0)));
      int32_t const b1_row = Pair ? int32_t(map_row(mb1, &b1(0, 0))) : 0;
      auto [sA, sB] = stages_of<S, E>(ring);
      uint64_t const hint = uint64_t(cute::TMA::CacheHintSm90::EVICT_NORMAL);
      RingPosition<kStages> at;  // the K steps of every tile, one after the other through the ring
      for (int i = 0, t = tiles.at(0); t >= 0; t = tiles.at(++i)) {
        int32_t const m0 = a_row + int32_t(tiles.m0(t));
        int32_t const n0 = int32_t(tiles.n0(t));
        for (int step = 0; step < count; ++step, at.advance()) {
          int const s = at.stage;
          Empty::wait(&empty[s], at.phase ^ 1u);  // read in the round before
          Full::arrive_and_expect_tx(&full[s], uint32_t(kStageBytes));
          int32_t const k0 = int32_t((first + step) * kTileK);
          CUTE_UNROLL
          for (int box = 0; box < S::kTileM / kBoxRows; ++box) {
            cute::SM90_TMA_LOAD_2D::copy(&ma.map, &full[s], hint, &sA(box * kBoxRows, 0, s), k0,
                                         m0 + box * kBoxRows);
          }
          if constexpr (Pair) {  // the tile's columns of b, then of b1
            cute::SM90_TMA_LOAD_2D::copy(&mb.map, &full[s], hint, &sB(0, 0, s), k0, b_row + n0);
            cute::SM90_TMA_LOAD_2D::copy(&mb1.map, &full[s], hint, &sB(int(kBoxRows), 0, s), k0,
                                         b1_row + n0);
          } else if (multicast) {  // this CTA's half of b's tile, into the same stage of both CTAs
            int const box = int(half) * kBoxRows;
            cute::SM90_TMA_LOAD_MULTICAST_2D::copy(&mb.map, &full[s], uint16_t(0x3), hint,
                                                   &sB(box, 0, s), k0, b_row + n0 + box);
          } else {
            CUTE_UNROLL
            for (int box = 0; box < kTileN; box += kBoxRows) {
              cute::SM90_TMA_LOAD_2D::copy(&mb.map, &full[s], hint, &sB(box, 0, s), k0,
                                           b_row + n0 + box);
            }
          }
        }
      }
      // Where the pair shares b, the peer's math warps arrive on this CTA's `empty` barriers: the
      // CTA leaves only once the last round of each stage has been released by both CTAs (no
      // arrival then lands in the memory of a CTA that has left).
      for (int s = 0; multicast && s < kStages; ++s, at.advance())
        Empty::wait(&empty[at.stage], at.phase ^ 1u);
    }
    if (split) {  // the math threads' cluster barrier, which every thread of the cluster meets
      __syncwarp();
      cluster::arrive();
      cluster::wait();
    }
    return;
  }
  cutlass::arch::warpgroup_reg_alloc<kMathRegisters>();
  auto [sA, sB] = stages_of<S, E>(ring);
  auto math = make_math<S, E>(sA, sB);
  RingPosition<kStages> at;
  int read = 0;  // the stage of the step before
  // A stage read: this warp's arrival on its `empty` barrier, and on the peer's where it refills
  // this CTA's stages too.
  auto const release = [&](int stage) {
    Empty::arrive(&empty[stage]);
    if (multicast) Empty::arrive(&empty[stage], half ^ 1u, 1u);
  };
  for (int i = 0, t = tiles.at(0); t >= 0; t = tiles.at(++i)) {
    math.begin();
    for (int step = 0; step < count; ++step, at.advance()) {
      Full::wait(&full[at.stage], at.phase);
      math.step(at.stage);  // ... and the step before has been read: its stage may be refilled
      if (step > 0 && lead) release(read);
      read = at.stage;
    }
    math.finish(count);
    if (count > 0 && lead) release(read);
    // Where K is split, CTA h's warpgroup h stores its rows of the tile, the other warpgroup's sums
    // going to the peer CTA's same warpgroup.
    bool const stores = !split || int(threadIdx.x) / 128 == int(half);
    if (split) {          // at most one tile a pair
      cluster::arrive();  // both CTAs' products done: their stages are free (read, the reads
      cluster::wait();    // waited for: no release needed), and `landed` made in both
      if (!stores) math.give(kept, landed, half ^ 1u);
      if (stores) {
        cluster::wait_bytes(landed);  // the peer's sums have landed here
        math.add_kept(kept);
      }
    }
    if (stores) {  // (one call of store: a second one left a call in the kernel, which serialises
                   // its wgmma, ptxas said)
      math.template store<Pair>(out, epi, tiles.m0(t), tiles.n0(t), tiles.rows(t), tiles.cols(t),
                                staging_of(ring));
    }
    if (split) return;
  }
  if (split) {  // a pair with no tile meets its barrier all the same
    cluster::arrive();
    cluster::wait();
  }
}
#endif

/// A warpgroup's rows of the tiles of an M x N product over `ranks` CTAs (Shape): 64 (128 x 128
/// tiles) where those tiles are one wave at most, 128 (256 x 128) otherwise; or
/// TILEFOUNDRY_MATMUL_GMMA_WARPGROUP_ROWS where set. On an H100 (bf16, CUDA-graph medians, us,
/// 256 x 128 / 128 x 128 tiles, cuBLAS), Qwen3-1.7B's projections at M = 1024: q/k/v 28.9 / 30.0
/// (24.8), o_proj + residual 28.1 / 21.3 (18.2), gate/up 75.8 / 82.4 (71.0), down + residual 48.9 /
/// 43.8 (38.5); at M = 4096 every one faster at 256 x 128 (0.88-0.93x cuBLAS against 0.81-0.83x).
/// Where 128 x 128 tiles are one wave (o_proj and down at 1024 rows: 128 tiles for 132 SMs) they
/// were the faster; where they are more (q/k/v at 1024: 256), the slower.
TILEFOUNDRY_HOST_DEVICE constexpr int rows_of(int64_t m, int64_t n, int64_t ranks) {
  if (kForcedRows != 0) return kForcedRows;
  int64_t const tiles =
      (m + Shape<64>::kTileM - 1) / Shape<64>::kTileM * ((n + kTileN - 1) / kTileN);
  return tiles <= ranks ? 64 : 128;
}
// The picks the measurements above chose, on 132 SMs: o_proj and down at 1024 rows 128 x 128 tiles;
// q/k/v (N = 4096) at 1024 and o_proj at 4096 256 x 128.
static_assert(kForcedRows != 0 ||
                  (rows_of(1024, 2048, 132) == 64 && rows_of(1024, 4096, 132) == 128 &&
                   rows_of(4096, 2048, 132) == 128),
              "rows_of picks as measured");

#if TILEFOUNDRY_MATMUL_GMMA
/// The mapped tiles of a call (mapped_tiles) in the shape rows_of picks for its `tiles` output
/// tiles of kTileN columns (a pair's count of kTileN / 2 columns each), or the forced one.
template <bool Pair, class A, class B, class B1, class Out, class Epi>
__device__ __forceinline__ void mapped_call(A const& a, B const& b, B1 const& b1, Out& out,
                                            Epi const& epi, int64_t rank, int64_t ranks,
                                            tensor_map const& ma, tensor_map const& mb,
                                            tensor_map const& mb1, unsigned char* ring) {
  constexpr int kCols = Pair ? kTileN / 2 : kTileN;
  int64_t const m = int64_t(cute::size<0>(a)), n = int64_t(cute::size<1>(b));
  // (a forced shape, TILEFOUNDRY_MATMUL_GMMA_WARPGROUP_ROWS, is the kernel's only one)
  if constexpr (kForcedRows != 0) {
    Tiles<Shape<kForcedRows>, kCols> const tiles(m, n, rank, ranks);
    mapped_tiles<Shape<kForcedRows>, Pair>(a, b, b1, out, epi, tiles, ma, mb, mb1, ring);
  } else if (rows_of(m, Pair ? 2 * n : n, ranks) == 64) {
    Tiles<Shape<64>, kCols> const tiles(m, n, rank, ranks);
    mapped_tiles<Shape<64>, Pair>(a, b, b1, out, epi, tiles, ma, mb, mb1, ring);
  } else {
    Tiles<Shape<128>, kCols> const tiles(m, n, rank, ranks);
    mapped_tiles<Shape<128>, Pair>(a, b, b1, out, epi, tiles, ma, mb, mb1, ring);
  }
}

/// The ring's start, aligned to the swizzle, where the ring holds the tier's bytes (else null).
template <class Ring>
__device__ __forceinline__ unsigned char* aligned_ring(Ring const& ring) {
  using R = cute::remove_cvref_t<decltype(ring(0))>;
  if constexpr (cute::is_static<decltype(ring.layout())>::value) {
    static_assert(
        cute::size(decltype(ring.layout()){}) * sizeof(R) >= kRingBytes,
        "the ring is smaller than the tier's stages: lower/matmul.py's CUDA_GEMM_RING_BYTES "
        "and matmul_gmma.cuh's kRingBytes must agree");
  }
  if (int64_t(cute::size(ring)) * int64_t(sizeof(R)) < kRingBytes) return nullptr;
  auto* const raw = reinterpret_cast<unsigned char*>(cute::raw_pointer_cast(&ring(0)));
  return reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(raw) + kAlign - 1) / kAlign *
                                          kAlign);
}
#endif

/// The call of the GEMM schedule: this CTA's output tiles rank, rank + ranks, ... (Tiles) through
/// the tensor cores where the tier applies (true), else nothing done (false: the caller takes the
/// other tiers). `ma` and `mb`, where given, are tensor maps of a's and b's memory.
template <class A, class B, class Out, class Epi, class Ring>
__device__ __forceinline__ bool apply(A const& a, B const& b, Out& out, Epi const& epi,
                                      Ring const& ring, int64_t rank, int64_t ranks,
                                      tensor_map const* ma = nullptr,
                                      tensor_map const* mb = nullptr) {
#if TILEFOUNDRY_MATMUL_GMMA
  if constexpr (tier_v<A, B>) {
    unsigned char* const aligned = aligned_ring(ring);
    if (aligned == nullptr || !runtime_ok(a, b)) return false;
    if (ma != nullptr && mb != nullptr && maps_ok(a, b, *ma, *mb)) {
      mapped_call<false>(a, b, b, out, epi, rank, ranks, *ma, *mb, *mb, aligned);
      return true;
    }
    // No maps (a batch of matrices, a view the host could not describe): 256 x 128 tiles, copied
    // by the math threads (one shape only: a second made the kernel call row_tile out of line,
    // which serialises its wgmma).
    if (int(threadIdx.x) >= kMathThreads) {  // the copy warpgroup has nothing to do
      cutlass::arch::warpgroup_reg_dealloc<kCopyRegisters>();
      return true;
    }
    cutlass::arch::warpgroup_reg_alloc<kMathRegisters>();
    int64_t const m = int64_t(cute::size<0>(a)), n = int64_t(cute::size<1>(b));
    Tiles<Shape<128>> const tiles(m, n, rank, ranks);
    for (int i = 0, t = tiles.at(0); t >= 0; t = tiles.at(++i)) {
      row_tile(a, b, out, epi, tiles, t, aligned);
    }
    return true;
  }
#endif
  (void)a, (void)b, (void)out, (void)epi, (void)ring, (void)rank, (void)ranks, (void)ma, (void)mb;
  return false;
}

/// ... of a pair of products sharing a (b1 of b's shape): out(m, n) = epi(m, n, (a @ b)(m, n), (a @
/// b1)(m, n)), both through one wgmma a step (mapped_tiles), where tensor maps of all three
/// operands describe them; else nothing done (false: the caller takes the other tiers; a pair has
/// no cp.async path).
template <class A, class B, class B1, class Out, class Epi, class Ring>
__device__ __forceinline__ bool apply_pair(A const& a, B const& b, B1 const& b1, Out& out,
                                           Epi const& epi, Ring const& ring, int64_t rank,
                                           int64_t ranks, tensor_map const& ma,
                                           tensor_map const& mb, tensor_map const& mb1) {
#if TILEFOUNDRY_MATMUL_GMMA
  if constexpr (tier_v<A, B> && tier_v<A, B1>) {
    unsigned char* const aligned = aligned_ring(ring);
    if (aligned == nullptr || !runtime_ok(a, b) || !runtime_ok(a, b1) ||
        cute::size<1>(b1) != cute::size<1>(b) || !maps_ok(a, b, ma, mb) ||
        !maps_ok(a, b1, ma, mb1)) {
      return false;
    }
    mapped_call<true>(a, b, b1, out, epi, rank, ranks, ma, mb, mb1, aligned);
    return true;
  }
#endif
  (void)a, (void)b, (void)b1, (void)out, (void)epi, (void)ring, (void)rank, (void)ranks, (void)ma,
      (void)mb, (void)mb1;
  return false;
}

}  // namespace matmul_gmma
}  // namespace ops
}  // namespace tilefoundry

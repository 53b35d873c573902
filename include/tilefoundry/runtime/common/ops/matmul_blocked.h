// The CPU's blocked tier of ops::matmul: out = a @ b for a tile of many rows (a prompt's prefill),
// where each row of a and each column of b is a contiguous run of K (a weight stored (N, K), read
// as its transpose). A register-blocked micro-kernel computes kRows x kCols outputs at once: per
// k, one row of a packed panel of b (kCols values of K-major copy, made once per panel and reused
// by every block of rows) against kRows values of a, each broadcast, into kRows x kCols partial
// sums held in vector registers (the last rows by a kernel of fewer, the last columns in a panel
// padded with zeros). Sums accumulate in float, in order of k. On a CPU with AVX-512 the panels
// are twice as wide, two vectors of sixteen floats (f32_wide); bf16 operands run on AMX's tiles
// where the CPU has them (bf16_amx), else on its AVX512_BF16 dot-product instructions (bf16_dot:
// pairs of k a step).
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/host_buffer.h>
#include <tilefoundry/runtime/common/numeric.h>

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#if defined(TILEFOUNDRY_TARGET_CPU) && defined(__x86_64__) && \
    (defined(__clang__) ? __clang_major__ >= 15 : (defined(__GNUC__) && __GNUC__ >= 11))
#define TILEFOUNDRY_BF16_DOT 1  // a compiler that knows AVX512_BF16, for functions that ask for it
#else
#define TILEFOUNDRY_BF16_DOT 0
#endif

#if defined(TILEFOUNDRY_TARGET_CPU) && \
    ((defined(__FMA__) && defined(__AVX__)) || TILEFOUNDRY_BF16_DOT)
#include <immintrin.h>
#endif
#if TILEFOUNDRY_BF16_DOT && defined(__linux__)
#define TILEFOUNDRY_AMX 1  // AMX's tiles, their state granted by Linux's arch_prctl
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#define TILEFOUNDRY_AMX 0
#endif

namespace tilefoundry {
namespace ops {
namespace matmul_blocked {

#if defined(TILEFOUNDRY_TARGET_CPU)

constexpr int kRows = 6;   // rows of a a micro-kernel reads (broadcast one at a time)
constexpr int kCols = 16;  // columns of b it reads (two vectors of eight floats)

/// The size of each of the equal parts `count` splits into, none above `most` (one part where
/// count is at most `most`; the last part may be smaller): the K blocking of the tiers below.
inline int64_t equal_part(int64_t count, int64_t most) {
  int64_t const parts = count > most ? (count + most - 1) / most : 1;
  return (count + parts - 1) / parts;
}

/// The store of a tile with no epilogue into a row-major output: out(m, n) = sum rounded to T.
/// bf16 panels store whole vectors of it at once (bf16_dot::store_rows).
template <class T>
struct plain_store {
  T* base;
  int64_t ld;  // elements between rows
  void operator()(int64_t m, int64_t n, float sum) const {
    base[m * ld + n] = detail::convert<T>(sum);
  }
  T* row(int64_t m) const { return base + m * ld; }
};

/// Whether a store writes a bf16 output with no epilogue (whole vectors at once, bf16_dot).
template <class Store>
struct is_plain_bf16_store : std::false_type {};
template <>
struct is_plain_bf16_store<plain_store<cutlass::bfloat16_t>> : std::true_type {};

using Vec = float __attribute__((vector_size(32)));

/// acc += x * y, in one rounding where the CPU has fused multiply-add (the order of the sum is the
/// blocked tier's own either way). Vectors by reference: their passing ABI depends on the
/// instruction set.
inline void fmadd(Vec& acc, Vec const& x, Vec const& y) {
#if defined(__FMA__) && defined(__AVX__)
  acc = Vec(_mm256_fmadd_ps(__m256(x), __m256(y), __m256(acc)));
#else
  acc += x * y;
#endif
}

/// panel[k * W + j] = get(j, k) for k < count and j < W, in runs of 16 values of k: each column's
/// run read together, written into a block of the panel small enough to stay in L1 (the column by
/// column order wrote a line apart each time, through the whole panel once per column).
template <int W, class T, class Get>
inline void transpose_into(T* panel, int64_t count, Get const& get) {
  constexpr int64_t kRun = 16;
  for (int64_t k0 = 0; k0 < count; k0 += kRun) {
    int64_t const run = count - k0 < kRun ? count - k0 : kRun;
    for (int j = 0; j < W; ++j) {
      for (int64_t i = 0; i < run; ++i) panel[(k0 + i) * W + j] = get(j, k0 + i);
    }
  }
}

/// Columns [n0, n0 + width) of b (column n a run of `depth` values from pb + n * sb), K-major, W
/// columns wide: panel[k * W + j] = b(k, n0 + j), in float; the columns past `width` are zeros.
template <int W, class E>
inline void pack_float_panel(E const* pb, int64_t sb, int64_t n0, int width, int64_t depth,
                             float* panel) {
  E const* cols[W];
  for (int j = 0; j < W; ++j) cols[j] = pb + (n0 + (j < width ? j : 0)) * sb;
  transpose_into<W>(panel, depth, [&](int j, int64_t k) {
    return j < width ? detail::convert<float>(cols[j][k]) : 0.0f;
  });
}

/// ... kCols wide, for the micro-kernels below.
template <class E>
inline void pack_panel(E const* pb, int64_t sb, int64_t n0, int width, int64_t depth,
                       float* panel) {
  pack_float_panel<kCols>(pb, sb, n0, width, depth, panel);
}

/// x in every lane of v.
inline void broadcast(float x, Vec& v) { v = Vec{x, x, x, x, x, x, x, x}; }

/// One row's two vectors of sums += its value `a` (broadcast) times a panel's row (b0, b1).
inline void row_step(Vec& lo, Vec& hi, float a, Vec const& b0, Vec const& b1) {
  Vec x;
  broadcast(a, x);
  fmadd(lo, x, b0);
  fmadd(hi, x, b1);
}

/// The R x kCols sums of rows [m0, m0 + R) of a (row m a run from pa + m * sa) against a packed
/// panel, stored through store(m, n0 + j, sum). For the last rows of a tile (R < kRows).
template <int R, class E, class Store>
inline void micro_kernel(E const* pa, int64_t sa, int64_t m0, float const* panel, int64_t n0,
                         int64_t depth, Store const& store) {
  Vec acc[R][2] = {};
  E const* rows[R];
  for (int i = 0; i < R; ++i) rows[i] = pa + (m0 + i) * sa;
  for (int64_t k = 0; k < depth; ++k) {
    Vec b0, b1;
    std::memcpy(&b0, panel + k * kCols, sizeof b0);
    std::memcpy(&b1, panel + k * kCols + 8, sizeof b1);
    for (int i = 0; i < R; ++i)
      row_step(acc[i][0], acc[i][1], detail::convert<float>(rows[i][k]), b0, b1);
  }
  for (int i = 0; i < R; ++i) {
    for (int j = 0; j < 8; ++j) {
      store(m0 + i, n0 + j, acc[i][0][j]);
      store(m0 + i, n0 + 8 + j, acc[i][1][j]);
    }
  }
}

/// The kRows (6) x kCols sums of a whole block: its twelve partial sums named one by one, so that
/// the compiler keeps them in registers through the loop over k (an array of them it kept in
/// memory, a store per multiply-add).
template <class E, class Store>
inline void block_kernel(E const* pa, int64_t sa, int64_t m0, float const* panel, int64_t n0,
                         int64_t depth, Store const& store) {
  static_assert(kRows == 6, "block_kernel names six rows' sums");
  E const* const r0 = pa + m0 * sa;
  Vec c00{}, c01{}, c10{}, c11{}, c20{}, c21{}, c30{}, c31{}, c40{}, c41{}, c50{}, c51{};
  for (int64_t k = 0; k < depth; ++k) {
    Vec b0, b1;
    std::memcpy(&b0, panel + k * kCols, sizeof b0);
    std::memcpy(&b1, panel + k * kCols + 8, sizeof b1);
    row_step(c00, c01, detail::convert<float>(r0[k]), b0, b1);
    row_step(c10, c11, detail::convert<float>(r0[sa + k]), b0, b1);
    row_step(c20, c21, detail::convert<float>(r0[2 * sa + k]), b0, b1);
    row_step(c30, c31, detail::convert<float>(r0[3 * sa + k]), b0, b1);
    row_step(c40, c41, detail::convert<float>(r0[4 * sa + k]), b0, b1);
    row_step(c50, c51, detail::convert<float>(r0[5 * sa + k]), b0, b1);
  }
  Vec const sums[kRows][2] = {{c00, c01}, {c10, c11}, {c20, c21},
                              {c30, c31}, {c40, c41}, {c50, c51}};
  for (int i = 0; i < kRows; ++i) {
    for (int j = 0; j < 8; ++j) {
      store(m0 + i, n0 + j, sums[i][0][j]);
      store(m0 + i, n0 + 8 + j, sums[i][1][j]);
    }
  }
}

/// f(std::integral_constant<int, R>{}) for the R = left rows short of a whole block (1 to kRows -
/// 1; none: nothing), so that a micro-kernel of exactly that many rows runs.
template <class F>
inline void with_rows(int64_t left, F const& f) {
  switch (left) {
    case 1:
      return f(std::integral_constant<int, 1>{});
    case 2:
      return f(std::integral_constant<int, 2>{});
    case 3:
      return f(std::integral_constant<int, 3>{});
    case 4:
      return f(std::integral_constant<int, 4>{});
    case 5:
      return f(std::integral_constant<int, 5>{});
    default:
      return;
  }
}
static_assert(kRows == 6, "with_rows names the rows short of a block of six");

/// The loop of the panel tiers but f32_wide (which adds passes over K): the tile's columns in
/// panels of W, each packed once (pack(n0, width)), then run against every whole block of Rows
/// rows (block(m0, n0, width)) and the rows left, at most kRows - 1 at a time (rest(r, m0, n0,
/// width), r the std::integral_constant of their count).
template <int W, int Rows = kRows, class Pack, class Block, class Rest>
inline void over_panels(int64_t rows, int64_t cols, Pack const& pack, Block const& block,
                        Rest const& rest) {
  int64_t const full = rows / Rows * Rows;
  for (int64_t n0 = 0; n0 < cols; n0 += W) {
    int const width = cols - n0 < W ? int(cols - n0) : W;
    pack(n0, width);
    for (int64_t m0 = 0; m0 < full; m0 += Rows) block(m0, n0, width);
    for (int64_t m0 = full; m0 < rows;) {
      int64_t const left = rows - m0 < kRows - 1 ? rows - m0 : kRows - 1;
      with_rows(left, [&](auto r) { rest(r, m0, n0, width); });
      m0 += left;
    }
  }
}

/// Every element of a tile through store, its rows of a already in float (or of b's own type).
template <class A, class E, class Store>
inline void panels_of(A const* pa, int64_t sa, E const* pb, int64_t sb, int64_t rows, int64_t cols,
                      int64_t depth, Store const& store) {
  host_buffer<float> panel(depth * kCols);
  int64_t n0 = 0;
  int width = 0;
  auto const kept = [&](int64_t m, int64_t n, float sum) {  // a last panel's padding not stored
    if (n - n0 < width) store(m, n, sum);
  };
  over_panels<kCols>(
      rows, cols,
      [&](int64_t n, int w) {
        n0 = n;
        width = w;
        pack_panel(pb, sb, n0, width, depth, panel.data());
      },
      [&](int64_t m0, int64_t, int) { block_kernel(pa, sa, m0, panel.data(), n0, depth, kept); },
      [&](auto r, int64_t m0, int64_t, int) {
        micro_kernel<decltype(r)::value>(pa, sa, m0, panel.data(), n0, depth, kept);
      });
}

#if TILEFOUNDRY_BF16_DOT
// 16 x 16 transposes of 32-bit values in AVX-512's vectors (checked when the program runs, by the
// tiers that call them): a float panel's columns (f32_wide), a bf16 panel's pairs of k (bf16_dot,
// bf16_amx).
namespace avx512 {

#define TILEFOUNDRY_TRANSPOSE_TARGET __attribute__((target("avx512f")))

// The shuffles of transpose16, through their masked forms with every lane kept: the unmasked
// intrinsics pass an undefined vector that GCC 12 reports as maybe-uninitialized once inlined.
TILEFOUNDRY_TRANSPOSE_TARGET inline __m512 lo32(__m512 a, __m512 b) {
  return _mm512_mask_unpacklo_ps(a, 0xffff, a, b);
}
TILEFOUNDRY_TRANSPOSE_TARGET inline __m512 hi32(__m512 a, __m512 b) {
  return _mm512_mask_unpackhi_ps(a, 0xffff, a, b);
}
TILEFOUNDRY_TRANSPOSE_TARGET inline __m512 lo64(__m512 a, __m512 b) {
  return __m512(_mm512_mask_unpacklo_pd(__m512d(a), 0xff, __m512d(a), __m512d(b)));
}
TILEFOUNDRY_TRANSPOSE_TARGET inline __m512 hi64(__m512 a, __m512 b) {
  return __m512(_mm512_mask_unpackhi_pd(__m512d(a), 0xff, __m512d(a), __m512d(b)));
}
template <int Imm>
TILEFOUNDRY_TRANSPOSE_TARGET inline __m512 lanes(__m512 a, __m512 b) {
  return _mm512_mask_shuffle_f32x4(a, 0xffff, a, b, Imm);
}

/// The 16 x 16 floats v[r][0..16) transposed in place: v[c][r] = the old v[r][c] (the vectors'
/// own shuffles, 64 for 256 values, where a value at a time is a load and a store each).
TILEFOUNDRY_TRANSPOSE_TARGET inline void transpose16(__m512 (&v)[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {  // pairs of rows interleaved by 32 bits
    t[i] = lo32(v[i], v[i + 1]);
    t[i + 1] = hi32(v[i], v[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {  // ... by 64 bits: four rows' values of a column side by side
    v[i] = lo64(t[i], t[i + 2]);
    v[i + 1] = hi64(t[i], t[i + 2]);
    v[i + 2] = lo64(t[i + 1], t[i + 3]);
    v[i + 3] = hi64(t[i + 1], t[i + 3]);
  }
  for (int i = 0; i < 4; ++i) {  // ... by 128-bit lanes: eight rows, then all sixteen
    t[i] = lanes<0x88>(v[i], v[i + 4]);
    t[i + 4] = lanes<0xdd>(v[i], v[i + 4]);
    t[i + 8] = lanes<0x88>(v[i + 8], v[i + 12]);
    t[i + 12] = lanes<0xdd>(v[i + 8], v[i + 12]);
  }
  for (int i = 0; i < 8; ++i) {
    v[i] = lanes<0x88>(t[i], t[i + 8]);
    v[i + 8] = lanes<0xdd>(t[i], t[i + 8]);
  }
}

/// out[i * ld + c] = the 32-bit value i of row c, for the 16 rows at src + c * stride (16 values
/// each, any alignment) and i < 16: sixteen rows' runs written column-major.
template <class W>
TILEFOUNDRY_TRANSPOSE_TARGET inline void transpose16(W const* src, int64_t stride, W* out,
                                                     int64_t ld) {
  static_assert(sizeof(W) == 4, "transpose16 moves 32-bit values");
  __m512 v[16];
  for (int r = 0; r < 16; ++r) v[r] = _mm512_loadu_ps(src + r * stride);
  transpose16(v);
  for (int i = 0; i < 16; ++i) _mm512_storeu_ps(out + i * ld, v[i]);
}

#undef TILEFOUNDRY_TRANSPOSE_TARGET
}  // namespace avx512
#endif  // TILEFOUNDRY_BF16_DOT

#if TILEFOUNDRY_BF16_DOT
// bf16 operands on a CPU with AVX512_BF16 (checked when the program runs): each instruction takes
// pairs of k, a row's two bf16 values of a broadcast against kDotCols columns' pairs of a panel
// (column j's pair at 2 j), their two products (exact in float) added to float sums. Eight rows
// (kDotRows) times two vectors of sixteen columns a block.
namespace bf16_dot {

constexpr int kDotCols = 32;
#define TILEFOUNDRY_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

/// Whether this CPU runs the bf16 dot-product instructions (asked once).
inline bool available() {
  static bool const yes = __builtin_cpu_supports("avx512bf16");
  return yes;
}

/// The pair (row[2 p], row[2 p + 1]) of a row of `depth` bf16 values as one 32-bit word (a missing
/// second value: zero).
inline std::uint32_t pair(std::uint16_t const* row, int64_t p, int64_t depth) {
  std::uint32_t const lo = row[2 * p];
  std::uint32_t const hi = 2 * p + 1 < depth ? row[2 * p + 1] : 0u;
  return lo | hi << 16;
}

/// The pair (row[2 p], row[2 p + 1]) of a row as one 32-bit word, both values there.
inline std::uint32_t word(std::uint16_t const* row, int64_t p) {
  std::uint32_t w;
  std::memcpy(&w, row + 2 * p, sizeof w);
  return w;
}

/// Columns [n0, n0 + width) of b, pairs of k: panel[p * kDotCols + j] = column n0 + j's pair p;
/// columns past `width` are zeros.
/// A whole panel's runs of 16 pairs (columns an even count of values apart) go through
/// avx512::transpose16, sixteen columns at a time; the rest pair by pair.
inline void pack_panel(std::uint16_t const* pb, int64_t sb, int64_t n0, int width, int64_t depth,
                       std::uint32_t* panel) {
  std::uint16_t const* cols[kDotCols];
  for (int j = 0; j < kDotCols; ++j) cols[j] = pb + (n0 + (j < width ? j : 0)) * sb;
  int64_t const whole = depth / 2;
  int64_t done = 0;  // pairs packed by transposes
  if (width == kDotCols && sb % 2 == 0) {
    done = whole / 16 * 16;
    for (int64_t p0 = 0; p0 < done; p0 += 16) {
      for (int h = 0; h < kDotCols / 16; ++h) {
        auto const* const src = reinterpret_cast<std::uint32_t const*>(cols[16 * h] + 2 * p0);
        avx512::transpose16(src, sb / 2, panel + p0 * kDotCols + 16 * h, kDotCols);
      }
    }
  }
  transpose_into<kDotCols>(panel + done * kDotCols, (depth + 1) / 2 - done, [&](int j, int64_t q) {
    int64_t const p = done + q;
    return j >= width ? 0u : p < whole ? word(cols[j], p) : pair(cols[j], p, depth);
  });
}

/// acc[i] += row m0 + i's pair p against the panel's pair p, for R rows (any pair, the last of an
/// odd K too).
template <int R>
TILEFOUNDRY_BF16_TARGET inline void pair_step(std::uint16_t const* r0, int64_t sa, int64_t p,
                                              int64_t depth, std::uint32_t const* panel,
                                              __m512 (&acc)[R][2]) {
  __m512bh const b0 = (__m512bh)_mm512_loadu_si512(panel + p * kDotCols);
  __m512bh const b1 = (__m512bh)_mm512_loadu_si512(panel + p * kDotCols + 16);
  for (int i = 0; i < R; ++i) {
    __m512bh const x = (__m512bh)_mm512_set1_epi32(int(pair(r0 + i * sa, p, depth)));
    acc[i][0] = _mm512_dpbf16_ps(acc[i][0], x, b0);
    acc[i][1] = _mm512_dpbf16_ps(acc[i][1], x, b1);
  }
}

/// R rows of sums stored through store(m0 + i, n0 + j, sum) for j < width; into a bf16 output with
/// no epilogue, sixteen at a time (converted to bf16, rounding to nearest even, by one
/// instruction).
template <int R, class Store>
TILEFOUNDRY_BF16_TARGET inline void store_rows(__m512 const (&acc)[R][2], int64_t m0, int64_t n0,
                                               int width, Store const& store) {
  for (int i = 0; i < R; ++i) {
    if constexpr (is_plain_bf16_store<Store>::value) {
      for (int h = 0; h < 2; ++h) {
        int const cols = width - 16 * h < 16 ? width - 16 * h : 16;
        if (cols <= 0) break;
        __m256i const v = (__m256i)_mm512_cvtneps_pbh(acc[i][h]);
        __mmask16 const mask = cols == 16 ? __mmask16(0xffff) : __mmask16((1u << cols) - 1u);
        _mm256_mask_storeu_epi16(store.row(m0 + i) + n0 + 16 * h, mask, v);
      }
    } else {
      float sums[kDotCols];
      _mm512_storeu_ps(sums, acc[i][0]);
      _mm512_storeu_ps(sums + 16, acc[i][1]);
      for (int j = 0; j < width; ++j) store(m0 + i, n0 + j, sums[j]);
    }
  }
}

/// The R x kDotCols sums of rows [m0, m0 + R) against a packed panel, through store.
template <int R, class Store>
TILEFOUNDRY_BF16_TARGET inline void rows_kernel(std::uint16_t const* pa, int64_t sa, int64_t m0,
                                                std::uint32_t const* panel, int64_t n0, int width,
                                                int64_t depth, Store const& store) {
  __m512 acc[R][2];
  for (int i = 0; i < R; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < (depth + 1) / 2; ++p)
    pair_step<R>(pa + m0 * sa, sa, p, depth, panel, acc);
  store_rows<R>(acc, m0, n0, width, store);
}

/// One row's two vectors of sums += its pair `w` (broadcast) against a panel's pair (b0, b1).
TILEFOUNDRY_BF16_TARGET inline void dot_step(__m512& lo, __m512& hi, std::uint32_t w,
                                             __m512bh const& b0, __m512bh const& b1) {
  __m512bh const x = (__m512bh)_mm512_set1_epi32(int(w));
  lo = _mm512_dpbf16_ps(lo, x, b0);
  hi = _mm512_dpbf16_ps(hi, x, b1);
}

/// Rows of a whole block: eight rows' sixteen vectors of sums (six rows' twelve, the blocks of the
/// other tiers, left the dot-product unit idle part of the time: a block alone over a packed panel
/// of K = 2048 on this project's machine, one thread, 480 -> 542 GFLOP/s).
constexpr int kDotRows = 8;

/// A whole block of kDotRows rows, its sixteen sums named one by one (kept in registers), the pairs
/// of a row read as 32-bit words (the last pair of an odd K by pair()).
template <class Store>
TILEFOUNDRY_BF16_TARGET inline void block_kernel(std::uint16_t const* pa, int64_t sa, int64_t m0,
                                                 std::uint32_t const* panel, int64_t n0, int width,
                                                 int64_t depth, Store const& store) {
  static_assert(kDotRows == 8, "block_kernel names eight rows' sums");
  __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m512 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  __m512 c60 = c00, c61 = c00, c70 = c00, c71 = c00;
  std::uint16_t const* const r0 = pa + m0 * sa;
  int64_t const whole = depth / 2;
  for (int64_t p = 0; p < whole; ++p) {
    __m512bh const b0 = (__m512bh)_mm512_loadu_si512(panel + p * kDotCols);
    __m512bh const b1 = (__m512bh)_mm512_loadu_si512(panel + p * kDotCols + 16);
    dot_step(c00, c01, word(r0, p), b0, b1);
    dot_step(c10, c11, word(r0 + sa, p), b0, b1);
    dot_step(c20, c21, word(r0 + 2 * sa, p), b0, b1);
    dot_step(c30, c31, word(r0 + 3 * sa, p), b0, b1);
    dot_step(c40, c41, word(r0 + 4 * sa, p), b0, b1);
    dot_step(c50, c51, word(r0 + 5 * sa, p), b0, b1);
    dot_step(c60, c61, word(r0 + 6 * sa, p), b0, b1);
    dot_step(c70, c71, word(r0 + 7 * sa, p), b0, b1);
  }
  __m512 sums[kDotRows][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31},
                              {c40, c41}, {c50, c51}, {c60, c61}, {c70, c71}};
  if (depth % 2)
    pair_step<kDotRows>(r0, sa, whole, depth, panel, sums);  // the last k, alone in its pair
  store_rows<kDotRows>(sums, m0, n0, width, store);
}

/// Every element of a bf16 tile, through store.
template <class Store>
TILEFOUNDRY_BF16_TARGET inline void tile(std::uint16_t const* pa, int64_t sa,
                                         std::uint16_t const* pb, int64_t sb, int64_t rows,
                                         int64_t cols, int64_t depth, Store const& store) {
  host_buffer<std::uint32_t> panel((depth + 1) / 2 * kDotCols);
  over_panels<kDotCols, kDotRows>(
      rows, cols,
      [&](int64_t n0, int width) { pack_panel(pb, sb, n0, width, depth, panel.data()); },
      [&](int64_t m0, int64_t n0, int width) {  // no padding stored
        block_kernel(pa, sa, m0, panel.data(), n0, width, depth, store);
      },
      [&](auto r, int64_t m0, int64_t n0, int width) {
        rows_kernel<decltype(r)::value>(pa, sa, m0, panel.data(), n0, width, depth, store);
      });
}

#undef TILEFOUNDRY_BF16_TARGET
}  // namespace bf16_dot
#endif  // TILEFOUNDRY_BF16_DOT

#if TILEFOUNDRY_AMX
// bf16 operands on a CPU with AMX (its bf16 tiles, and the kernel's leave to use their state,
// asked for once): a block of 32 rows x 32 columns in four float tiles of 16 x 16, each step of 32
// values of K two tiles of a's rows and two of the panel's pairs (bf16_dot's panel layout is the
// tiles' own: a row of pairs of k, column by column), four tile products. a's rows are read in
// place where a block is whole (32 rows, K whole steps), else from a copy padded with zeros; the
// panel's pairs are padded to whole steps. Measured on this project's 2-core machine (one thread, a
// tile of 1024 rows by 128 columns, GFLOP/s): K = 2048 384 -> 775, K = 576 402 -> 605 against
// copying every row of a into the padded buffer for each tile and running each panel against all
// rows in turn (a's rows read from memory once a panel).
namespace bf16_amx {

constexpr int kBlock = 32;  // rows and columns of a block: two tiles of sixteen each way
constexpr int kStep = 32;   // values of K a step: a tile row of 64 bytes
#define TILEFOUNDRY_AMX_TARGET \
  __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16")))

/// Whether this CPU has AMX's bf16 tiles and Linux lets this process use them (asked once).
inline bool available() {
  static bool const yes = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    bool const tiles = (d >> 24 & 1u) && (d >> 22 & 1u);  // AMX-TILE, AMX-BF16
    constexpr long kReqXcompPerm = 0x1023;  // arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)
    constexpr long kXtiledata = 18;
    return tiles && syscall(SYS_arch_prctl, kReqXcompPerm, kXtiledata) == 0;
  }();
  return yes;
}

/// The tiles' shapes: 0-3 the block's sums (16 x 16 floats), 4-5 a's rows (16 x 32 bf16), 6-7 the
/// panel's pairs (16 pairs x 16 columns).
struct alignas(64) TileConfig {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t bytes_per_row[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  std::uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};

/// The most steps of K a pass takes (K blocking, 2048 values): a pass's slices of the tile's panels
/// (128 columns x 2048 values, 512 KiB) and the rows of a block stay in L2 while every block runs
/// against every panel; the blocks' sums wait in memory between passes. Measured on this project's
/// 2-core machine (one thread, tiles of 128 columns, GFLOP/s) against one pass over all of K: N x K
/// = 2048 x 6144 at M = 128 496 -> 624, M = 512 669 -> 760, M = 1024 675 -> 661 (the tile's whole
/// packed panels, 1.5 MiB, and a block's rows past L2 together). Shorter passes were slower where
/// M is large (their sums loaded and stored each pass: at 6 steps, 1024 x 4096 x 2048, 741 ->
/// 398), faster at K = 576 and 1536 where M is small (684 -> 805 at 12 steps, M = 128 and N = 960)
/// and slower at M = 128 and N = 3072; those keep one pass.
constexpr int64_t kPassSteps = 64;

/// Every element of a bf16 tile, through store. K runs in passes of at most kPassSteps equal steps
/// (one pass where K is at most 2048 values); in each, the pass's slice of every panel is packed
/// (pairs of k, padded with zeros to whole steps), then each block of 32 rows runs against every
/// panel, its four tiles of sums starting at zero (the first pass) or where the pass before left
/// them, and stored through store after the last. A block whose 32 rows are all there, where K is
/// whole steps, is read in place; the rows past the last whole block (and every row where K is not)
/// are copied into a buffer padded with zeros.
template <class Store>
TILEFOUNDRY_AMX_TARGET inline void tile(std::uint16_t const* pa, int64_t sa,
                                        std::uint16_t const* pb, int64_t sb, int64_t rows,
                                        int64_t cols, int64_t depth, Store const& store) {
  int64_t const k_pad = (depth + kStep - 1) / kStep * kStep;
  int64_t const in_place = depth % kStep == 0 ? rows / kBlock * kBlock : 0;
  int64_t const copied = (rows - in_place + kBlock - 1) / kBlock * kBlock;
  host_buffer<std::uint16_t> a(copied * k_pad, /*zeroed=*/true);  // rows past in_place, padded
  for (int64_t m = in_place; m < rows; ++m)
    std::memcpy(&a[size_t((m - in_place) * k_pad)], pa + m * sa, depth * 2);
  int64_t const panels = (cols + kBlock - 1) / kBlock;
  int64_t const blocks = (rows + kBlock - 1) / kBlock;
  auto const width_of = [&](int64_t p) {
    return cols - p * kBlock < kBlock ? int(cols - p * kBlock) : kBlock;
  };
  int64_t const steps = k_pad / kStep;
  int64_t const pass_steps = equal_part(steps, kPassSteps);  // the last pass fewer
  int64_t const slice_words = pass_steps * kStep / 2 * bf16_dot::kDotCols;
  host_buffer<std::uint32_t> slices(panels * slice_words, /*zeroed=*/true);
  constexpr int64_t kSums = kBlock * kBlock;  // floats of a block's sums against a panel
  host_buffer<float> kept(pass_steps < steps ? blocks * panels * kSums : 0);
  alignas(64) float sums[kBlock][kBlock];
  TileConfig const config;
  _tile_loadconfig(&config);
  int64_t s0 = 0;
  do {  // once at least (K = 0: sums of nothing stored)
    int64_t const s1 = steps - s0 > pass_steps ? s0 + pass_steps : steps;
    int64_t const k0 = s0 * kStep, k1 = s1 * kStep;
    bool const first = s0 == 0, last = s1 == steps;
    int64_t const values = (k1 < depth ? k1 : depth) - k0;  // of b's K in the pass
    for (int64_t p = 0; p < panels; ++p) {
      std::uint32_t* const slice = &slices[size_t(p * slice_words)];
      if (values < k1 - k0) std::fill(slice, slice + slice_words, 0u);  // K's end: padding zeros
      bf16_dot::pack_panel(pb + k0, sb, p * kBlock, width_of(p), values, slice);
    }
    for (int64_t m0 = 0; m0 < rows; m0 += kBlock) {
      bool const here = m0 < in_place;
      std::uint16_t const* const rows_a = here ? pa + m0 * sa : &a[size_t((m0 - in_place) * k_pad)];
      int64_t const ld = (here ? sa : k_pad) * 2;  // bytes between a's rows
      for (int64_t p = 0; p < panels; ++p) {
        std::uint32_t const* const slice = &slices[size_t(p * slice_words)];
        float* const part =
            kept.empty() ? nullptr : &kept[size_t((m0 / kBlock * panels + p) * kSums)];
        if (first) {
          _tile_zero(0);
          _tile_zero(1);
          _tile_zero(2);
          _tile_zero(3);
        } else {
          _tile_loadd(0, part, kBlock * 4);
          _tile_loadd(1, part + 16, kBlock * 4);
          _tile_loadd(2, part + 16 * kBlock, kBlock * 4);
          _tile_loadd(3, part + 16 * kBlock + 16, kBlock * 4);
        }
        for (int64_t k = k0; k < k1; k += kStep) {
          std::uint32_t const* const pairs = slice + (k - k0) / 2 * bf16_dot::kDotCols;
          _tile_loadd(4, rows_a + k, ld);
          _tile_loadd(5, rows_a + 16 * (ld / 2) + k, ld);
          _tile_loadd(6, pairs, bf16_dot::kDotCols * 4);
          _tile_loadd(7, pairs + 16, bf16_dot::kDotCols * 4);
          _tile_dpbf16ps(0, 4, 6);
          _tile_dpbf16ps(1, 4, 7);
          _tile_dpbf16ps(2, 5, 6);
          _tile_dpbf16ps(3, 5, 7);
        }
        float* const to = last ? &sums[0][0] : part;
        _tile_stored(0, to, kBlock * 4);
        _tile_stored(1, to + 16, kBlock * 4);
        _tile_stored(2, to + 16 * kBlock, kBlock * 4);
        _tile_stored(3, to + 16 * kBlock + 16, kBlock * 4);
        if (!last) continue;
        int64_t const live = rows - m0 < kBlock ? rows - m0 : kBlock;
        for (int64_t i = 0; i < live; ++i) {
          __m512 const row[1][2] = {{_mm512_load_ps(sums[i]), _mm512_load_ps(sums[i] + 16)}};
          bf16_dot::store_rows<1>(row, m0 + i, p * kBlock, width_of(p), store);
        }
      }
    }
    s0 = s1;
  } while (s0 < steps);
  _tile_release();
}

#undef TILEFOUNDRY_AMX_TARGET
}  // namespace bf16_amx
#endif  // TILEFOUNDRY_AMX

#if TILEFOUNDRY_BF16_DOT
// f32 sums on a CPU with AVX-512 (checked when the program runs): the panels 32 columns wide, two
// vectors of sixteen floats, six rows a block (twelve sums in registers), each multiply-add one
// rounding as fmadd's; the same sums in the same order of k as panels_of's, twice the columns an
// instruction.
namespace f32_wide {

constexpr int kWideCols = 32;
#define TILEFOUNDRY_AVX512_TARGET __attribute__((target("avx512f")))

/// Whether this CPU runs AVX-512 (asked once).
inline bool available() {
  static bool const yes = __builtin_cpu_supports("avx512f");
  return yes;
}

/// Columns [n0, n0 + width) of b, K-major, in float: panel[k * kWideCols + j] = b(k, n0 + j);
/// columns past `width` are zeros. Float columns in whole runs of 16 values of K go through
/// transpose16, sixteen columns at a time; the rest value by value.
template <class E>
TILEFOUNDRY_AVX512_TARGET inline void pack_panel(E const* pb, int64_t sb, int64_t n0, int width,
                                                 int64_t depth, float* panel) {
  if constexpr (std::is_same_v<E, float>) {
    if (width == kWideCols) {
      int64_t const whole = depth / 16 * 16;
      for (int64_t k0 = 0; k0 < whole; k0 += 16) {
        for (int h = 0; h < kWideCols / 16; ++h) {
          avx512::transpose16(pb + (n0 + 16 * h) * sb + k0, sb, panel + k0 * kWideCols + 16 * h,
                              kWideCols);
        }
      }
      pack_float_panel<kWideCols>(pb + whole, sb, n0, width, depth - whole,
                                  panel + whole * kWideCols);  // K's last values, one by one
      return;
    }
  }
  pack_float_panel<kWideCols>(pb, sb, n0, width, depth, panel);
}

/// The most values of K a pass takes (K blocking). Within a pass each block of six rows of a
/// (6 x 256 floats, 6 KiB) stays in L1 while it runs against every panel of the tile in turn, and
/// the pass's slices of the panels (128 columns x 256 floats, 128 KiB for the compiler's tiles)
/// stay in L2, read as whole vectors in order. K splits into passes of equal size. Measured on this
/// project's 2-core AVX-512 machine (f32, one thread, tiles of 128 columns, GFLOP/s, three runs):
/// against passes of 128 with the slices in L1 and a's rows in chunks of 192 from L2 (the rows'
/// broadcasts, six runs a line apart per step, were the cost: that loop with one row repeated ran
/// at 192), 1024 x 4096 x 2048 172 -> 193, 512 x 3072 x 576 178 -> 175-187, 512 x 2048 x 6144
/// 176 -> 190. Passes of up to 512 gave 200 at K = 2048 but 146-162 at K = 576 (2 passes of 288:
/// 148-161).
constexpr int64_t kDepthBlock = 256;

/// Where a block's sums go between passes over K: `sums` (the tile's rows x kWideCols partial sums,
/// in float) after every pass but the last, through store after the last; and whether they start
/// at zero (the first pass) or at what `sums` holds.
struct Pass {
  int64_t k0, k1;
  bool first, last;
  float* sums;
};

/// R rows of sums: kept in pass.sums (a pass but the last), else stored through
/// store(m0 + i, n0 + j, sum) for j < width.
template <int R, class Store>
TILEFOUNDRY_AVX512_TARGET inline void finish_rows(__m512 const (&acc)[R][2], int64_t m0, int64_t n0,
                                                  int width, Pass const& pass, Store const& store) {
  for (int i = 0; i < R; ++i) {
    if (!pass.last) {  // (sums holds the tile's rows only when K takes more than one pass)
      float* const kept = pass.sums + (m0 + i) * kWideCols;
      _mm512_storeu_ps(kept, acc[i][0]);
      _mm512_storeu_ps(kept + 16, acc[i][1]);
      continue;
    }
    if constexpr (std::is_same_v<Store, plain_store<float>>) {  // whole vectors into the row
      float* const row = store.row(m0 + i) + n0;
      for (int h = 0; h < 2; ++h) {
        int const cols = width - 16 * h < 16 ? width - 16 * h : 16;
        if (cols <= 0) break;
        __mmask16 const mask = cols == 16 ? __mmask16(0xffff) : __mmask16((1u << cols) - 1u);
        _mm512_mask_storeu_ps(row + 16 * h, mask, acc[i][h]);
      }
    } else {
      float sums[kWideCols];
      _mm512_storeu_ps(sums, acc[i][0]);
      _mm512_storeu_ps(sums + 16, acc[i][1]);
      for (int j = 0; j < width; ++j) store(m0 + i, n0 + j, sums[j]);
    }
  }
}

/// R rows' sums at the start of a pass: zero, or where the pass before left them.
template <int R>
TILEFOUNDRY_AVX512_TARGET inline void start_rows(__m512 (&acc)[R][2], int64_t m0,
                                                 Pass const& pass) {
  for (int i = 0; i < R; ++i) {
    if (pass.first) {
      acc[i][0] = acc[i][1] = _mm512_setzero_ps();
      continue;
    }
    float const* const kept = pass.sums + (m0 + i) * kWideCols;
    acc[i][0] = _mm512_loadu_ps(kept);
    acc[i][1] = _mm512_loadu_ps(kept + 16);
  }
}

/// The R x kWideCols sums of rows [m0, m0 + R) of a (float rows, sa apart) against a panel, over
/// the pass's values of K.
template <int R, class Store>
TILEFOUNDRY_AVX512_TARGET inline void rows_kernel(float const* pa, int64_t sa, int64_t m0,
                                                  float const* slice, int64_t n0, int width,
                                                  Pass const& pass, Store const& store) {
  __m512 acc[R][2];
  start_rows<R>(acc, m0, pass);
  for (int64_t k = pass.k0; k < pass.k1; ++k) {
    float const* const b = slice + (k - pass.k0) * kWideCols;
    __m512 const b0 = _mm512_loadu_ps(b);
    __m512 const b1 = _mm512_loadu_ps(b + 16);
    for (int i = 0; i < R; ++i) {
      __m512 const x = _mm512_set1_ps(pa[(m0 + i) * sa + k]);
      acc[i][0] = _mm512_fmadd_ps(x, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(x, b1, acc[i][1]);
    }
  }
  finish_rows<R>(acc, m0, n0, width, pass, store);
}

/// One row's two vectors of sums += its value `a` (broadcast) times a panel's row (b0, b1).
TILEFOUNDRY_AVX512_TARGET inline void row_step(__m512& lo, __m512& hi, float a, __m512 const& b0,
                                               __m512 const& b1) {
  __m512 const x = _mm512_set1_ps(a);
  lo = _mm512_fmadd_ps(x, b0, lo);
  hi = _mm512_fmadd_ps(x, b1, hi);
}

/// A whole block of six rows over the pass's values of K, its twelve sums named one by one (kept
/// in registers).
template <class Store>
TILEFOUNDRY_AVX512_TARGET inline void block_kernel(float const* pa, int64_t sa, int64_t m0,
                                                   float const* slice, int64_t n0, int width,
                                                   Pass const& pass, Store const& store) {
  __m512 start[kRows][2];
  start_rows<kRows>(start, m0, pass);
  __m512 c00 = start[0][0], c01 = start[0][1], c10 = start[1][0], c11 = start[1][1];
  __m512 c20 = start[2][0], c21 = start[2][1], c30 = start[3][0], c31 = start[3][1];
  __m512 c40 = start[4][0], c41 = start[4][1], c50 = start[5][0], c51 = start[5][1];
  float const* const r0 = pa + m0 * sa;
  for (int64_t k = pass.k0; k < pass.k1; ++k) {
    float const* const b = slice + (k - pass.k0) * kWideCols;
    __m512 const b0 = _mm512_loadu_ps(b);
    __m512 const b1 = _mm512_loadu_ps(b + 16);
    row_step(c00, c01, r0[k], b0, b1);
    row_step(c10, c11, r0[sa + k], b0, b1);
    row_step(c20, c21, r0[2 * sa + k], b0, b1);
    row_step(c30, c31, r0[3 * sa + k], b0, b1);
    row_step(c40, c41, r0[4 * sa + k], b0, b1);
    row_step(c50, c51, r0[5 * sa + k], b0, b1);
  }
  __m512 const sums[kRows][2] = {{c00, c01}, {c10, c11}, {c20, c21},
                                 {c30, c31}, {c40, c41}, {c50, c51}};
  finish_rows<kRows>(sums, m0, n0, width, pass, store);
}

/// A whole block of six rows against two panels' slices at once (the tile's panels p and p + 1),
/// each row's value broadcast once for both: 24 sums named one by one (kept in registers), ten
/// loads for 24 products where block_kernel takes eight for twelve.
template <class Store>
TILEFOUNDRY_AVX512_TARGET inline void panel_pair_kernel(float const* pa, int64_t sa, int64_t m0,
                                                        float const* slice, float const* slice1,
                                                        int64_t n0, int width, int width1,
                                                        Pass const& pass, Pass const& pass1,
                                                        Store const& store) {
  __m512 start[kRows][2], start1[kRows][2];
  start_rows<kRows>(start, m0, pass);
  start_rows<kRows>(start1, m0, pass1);
  __m512 c00 = start[0][0], c01 = start[0][1], c10 = start[1][0], c11 = start[1][1];
  __m512 c20 = start[2][0], c21 = start[2][1], c30 = start[3][0], c31 = start[3][1];
  __m512 c40 = start[4][0], c41 = start[4][1], c50 = start[5][0], c51 = start[5][1];
  __m512 e00 = start1[0][0], e01 = start1[0][1], e10 = start1[1][0], e11 = start1[1][1];
  __m512 e20 = start1[2][0], e21 = start1[2][1], e30 = start1[3][0], e31 = start1[3][1];
  __m512 e40 = start1[4][0], e41 = start1[4][1], e50 = start1[5][0], e51 = start1[5][1];
  float const* const r0 = pa + m0 * sa;
  for (int64_t k = pass.k0; k < pass.k1; ++k) {
    float const* const b = slice + (k - pass.k0) * kWideCols;
    float const* const b1 = slice1 + (k - pass.k0) * kWideCols;
    __m512 const b00 = _mm512_loadu_ps(b), b01 = _mm512_loadu_ps(b + 16);
    __m512 const b10 = _mm512_loadu_ps(b1), b11 = _mm512_loadu_ps(b1 + 16);
    row_step(c00, c01, r0[k], b00, b01);  // each row's value broadcast once, for both panels
    row_step(e00, e01, r0[k], b10, b11);
    row_step(c10, c11, r0[sa + k], b00, b01);
    row_step(e10, e11, r0[sa + k], b10, b11);
    row_step(c20, c21, r0[2 * sa + k], b00, b01);
    row_step(e20, e21, r0[2 * sa + k], b10, b11);
    row_step(c30, c31, r0[3 * sa + k], b00, b01);
    row_step(e30, e31, r0[3 * sa + k], b10, b11);
    row_step(c40, c41, r0[4 * sa + k], b00, b01);
    row_step(e40, e41, r0[4 * sa + k], b10, b11);
    row_step(c50, c51, r0[5 * sa + k], b00, b01);
    row_step(e50, e51, r0[5 * sa + k], b10, b11);
  }
  __m512 const sums[kRows][2] = {{c00, c01}, {c10, c11}, {c20, c21},
                                 {c30, c31}, {c40, c41}, {c50, c51}};
  __m512 const sums1[kRows][2] = {{e00, e01}, {e10, e11}, {e20, e21},
                                  {e30, e31}, {e40, e41}, {e50, e51}};
  finish_rows<kRows>(sums, m0, n0, width, pass, store);
  finish_rows<kRows>(sums1, m0, n0 + kWideCols, width1, pass1, store);
}

/// Every element of a tile whose rows of a are floats, through store: K in passes of at most
/// kDepthBlock values (equal ones), the pass's slices of every panel packed once; then each block
/// of kRows rows runs against the panels' slices two at a time (the block's rows in L1 across the
/// panels, the slices in L2 across the blocks); the sums between passes kept in float, a panel's
/// rows apart from the next panel's.
template <class E, class Store>
TILEFOUNDRY_AVX512_TARGET inline void tile(float const* pa, int64_t sa, E const* pb, int64_t sb,
                                           int64_t rows, int64_t cols, int64_t depth,
                                           Store const& store) {
  int64_t const panels = (cols + kWideCols - 1) / kWideCols;
  int64_t const block =
      equal_part(depth, kDepthBlock);  // values of K a pass takes (the last fewer)
  host_buffer<float> slices(panels * block * kWideCols);
  host_buffer<float> sums(block < depth ? panels * rows * kWideCols : 0);
  int64_t const full = rows / kRows * kRows;
  auto const width_of = [&](int64_t p) {
    return cols - p * kWideCols < kWideCols ? int(cols - p * kWideCols) : kWideCols;
  };
  auto const slice_of = [&](int64_t p) { return slices.data() + p * block * kWideCols; };
  int64_t k0 = 0;
  do {  // once at least (depth 0: sums of nothing stored)
    int64_t const k1 = depth - k0 > block ? k0 + block : depth;
    auto const pass_of = [&](int64_t p) {
      return Pass{k0, k1, k0 == 0, k1 == depth,
                  sums.empty() ? nullptr : sums.data() + p * rows * kWideCols};
    };
    for (int64_t p = 0; p < panels; ++p)
      pack_panel(pb + k0, sb, p * kWideCols, width_of(p), k1 - k0, slice_of(p));
    for (int64_t m0 = 0; m0 < full; m0 += kRows) {
      int64_t p = 0;
      for (; p + 1 < panels; p += 2) {  // panels two at a time
        panel_pair_kernel(pa, sa, m0, slice_of(p), slice_of(p + 1), p * kWideCols, width_of(p),
                          width_of(p + 1), pass_of(p), pass_of(p + 1), store);
      }
      if (p < panels)  // the last, alone
        block_kernel(pa, sa, m0, slice_of(p), p * kWideCols, width_of(p), pass_of(p), store);
    }
    with_rows(rows - full, [&](auto r) {
      for (int64_t p = 0; p < panels; ++p) {
        rows_kernel<decltype(r)::value>(pa, sa, full, slice_of(p), p * kWideCols, width_of(p),
                                        pass_of(p), store);
      }
    });
    k0 = k1;
  } while (k0 < depth);
}

#undef TILEFOUNDRY_AVX512_TARGET
}  // namespace f32_wide
#endif  // TILEFOUNDRY_BF16_DOT

/// Every element of a rows x cols tile of a's rows in float (or of b's own type), through store:
/// AVX-512's panels where the CPU has them, panels_of's otherwise.
template <class A, class E, class Store>
inline void float_tile(A const* pa, int64_t sa, E const* pb, int64_t sb, int64_t rows, int64_t cols,
                       int64_t depth, Store const& store) {
#if TILEFOUNDRY_BF16_DOT
  if constexpr (std::is_same_v<A, float>) {
    if (f32_wide::available()) {
      f32_wide::tile(pa, sa, pb, sb, rows, cols, depth, store);
      return;
    }
  }
#endif
  panels_of(pa, sa, pb, sb, rows, cols, depth, store);
}

/// Every element of a rows x cols tile: calls store(m, n, sum) for each.
template <class E, class Store>
inline void tile(E const* pa, int64_t sa, E const* pb, int64_t sb, int64_t rows, int64_t cols,
                 int64_t depth, Store const& store) {
#if TILEFOUNDRY_BF16_DOT
  if constexpr (std::is_same_v<E, cutlass::bfloat16_t>) {
#if TILEFOUNDRY_AMX
    if (bf16_amx::available()) {
      bf16_amx::tile(reinterpret_cast<std::uint16_t const*>(pa), sa,
                     reinterpret_cast<std::uint16_t const*>(pb), sb, rows, cols, depth, store);
      return;
    }
#endif
    if (bf16_dot::available()) {
      bf16_dot::tile(reinterpret_cast<std::uint16_t const*>(pa), sa,
                     reinterpret_cast<std::uint16_t const*>(pb), sb, rows, cols, depth, store);
      return;
    }
  }
#endif
  if constexpr (!std::is_same_v<E, float>) {  // 16-bit rows of a: converted once, not per panel
    host_buffer<float> a(rows * depth);
    for (int64_t m = 0; m < rows; ++m) {
      for (int64_t k = 0; k < depth; ++k) {
        a[size_t(m * depth + k)] = detail::convert<float>(pa[m * sa + k]);
      }
    }
    float_tile(a.data(), depth, pb, sb, rows, cols, depth, store);
  } else {
    float_tile(pa, sa, pb, sb, rows, cols, depth, store);
  }
}

#endif  // TILEFOUNDRY_TARGET_CPU

}  // namespace matmul_blocked
}  // namespace ops
}  // namespace tilefoundry

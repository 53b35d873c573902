// ops::matmul on the CUDA target: the body is matmul_impl::apply, which the CPU target's entry
// runs too; the CTA's threads share the tile's elements.
//
// The entry waits for the kernel before it on the stream itself (wait_for_earlier_kernels(), so a
// kernel whose only op is a matmul need not wait first: codegen leaves its kernel-start wait out),
// and before waiting it asks L2 for the first kPrefetchBytes of the CTA's weight columns (b's runs
// of K, where the dot-product tier reads them): a decode step's GEMV then streams its weights while
// the small kernel before it (RoPE, attention) finishes. A prefetch is a hint to the cache the
// kernels share: it never changes what a read returns, whatever the earlier kernel writes.
// Measured in a whole Qwen3-1.7B decode step on the H200 (CUDA-graph replays, compiled slots; a
// GEMV timed alone, the same kernel back to back, only loses by it): no prefetch 2143 us at
// context 128, 16 KiB a CTA 2117, 32 KiB 2133, 64 KiB 2182. The loss alone is large where the next
// launch's CTAs fit beside this one's (a GEMV of 64 registers: eight CTAs an SM, its grid four):
// they start at once and their prefetches compete with this launch's reads for the whole of it.
// On an H100 (bench/engine_kernels.py, each slot alone, us, no prefetch / 4 / 8 / 16 KiB a CTA;
// the hand-written GEMV, which prefetches 32 KiB but fills its SMs' registers, so the next
// launch's CTAs start only as its own leave): q/k/v + norm 8.48 / 8.54 / 8.52 / 8.99 (hand-written
// 8.47), o_proj + residual 4.67 / 4.91 / 5.34 / 5.86 (5.56), down + residual 10.90 / 11.04 /
// 11.20 / 11.23 (13.21). 4 KiB a CTA keeps the first of each CTA's reads ahead of the wait.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/matmul_impl.h>
#include <tilefoundry/runtime/cuda/dependent_launch.cuh>
#include <tilefoundry/runtime/cuda/ops/matmul_gmma.cuh>
#include <tilefoundry/runtime/cuda/ops/matmul_stream.cuh>
#include <tilefoundry/runtime/cuda/tensor_map.cuh>

#include <cstdint>

#ifndef TILEFOUNDRY_MATMUL_PREFETCH_BYTES
#define TILEFOUNDRY_MATMUL_PREFETCH_BYTES 4096
#endif

namespace tilefoundry {
namespace ops {
namespace matmul_cuda {

/// Bytes of its weight a CTA asks L2 for before it waits for the kernel before it.
constexpr int64_t kPrefetchBytes = TILEFOUNDRY_MATMUL_PREFETCH_BYTES;

/// An L2 prefetch of the first `bytes` of b's columns (each a contiguous run of K), spread evenly
/// over them, a 128-byte line a thread at a time.
template <class B>
__device__ void prefetch_columns(B const& b, int64_t bytes) {
  using E = cute::remove_cvref_t<decltype(b(0, 0))>;
  int64_t const depth = int64_t(cute::size<0>(b));
  int64_t const cols = int64_t(cute::size<1>(b));
  if (bytes <= 0 || cols <= 0 || depth <= 0) return;
  constexpr int64_t kLine = 128;
  int64_t const per_col =
      bytes / cols < depth * int64_t(sizeof(E)) ? bytes / cols : depth * int64_t(sizeof(E));
  int64_t const lines = (per_col + kLine - 1) / kLine;
  char const* const base = reinterpret_cast<char const*>(&b(0, 0));
  int64_t const stride = int64_t(cute::stride<1>(b)) * int64_t(sizeof(E));
  for (int64_t i = threadIdx.x; i < cols * lines; i += blockDim.x) {
    char const* const p = base + (i / lines) * stride + (i % lines) * kLine;
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
  }
}

/// What the entry does before the tile's first read: the weights' prefetch where the dot-product
/// tier reads them, then the wait for the earlier kernel.
template <class A, class B, class... More>
__device__ void before_reads(B const& b, More const&... more) {
  if constexpr ((matmul_impl::dot_tier_v<A, B> && ... && matmul_impl::dot_tier_v<A, More>)) {
    int64_t const share = kPrefetchBytes / int64_t(1 + sizeof...(More));
    prefetch_columns(b, share);
    (prefetch_columns(more, share), ...);
  }
  wait_for_earlier_kernels();
}

/// An epilogue of a tile's rows read from row m0 on: epi's row m0 + m where the tile says m.
template <class Epi>
struct rows_from {
  Epi const& epi;
  int64_t m0;
  template <class V, class = std::enable_if_t<std::is_invocable_v<Epi const&, int64_t, int64_t, V>>>
  __device__ auto operator()(int64_t m, int64_t n, V v) const {
    return epi(m + m0, n, v);
  }
  template <class V,
            class = std::enable_if_t<std::is_invocable_v<Epi const&, int64_t, int64_t, V, V>>,
            class = void>
  __device__ auto operator()(int64_t m, int64_t n, V v, V w) const {
    return epi(m + m0, n, v, w);
  }
};

/// Rows [m0, m0 + rows) of the M x ... view t, a view of its own.
template <class T>
__device__ auto row_slice(T&& t, int64_t m0, int64_t rows) {
  auto const shape = cute::make_shape(rows, cute::get<1>(t.shape()));
  return cute::make_tensor(t.data() + t.layout()(m0, 0), cute::make_layout(shape, t.stride()));
}

}  // namespace matmul_cuda

/// The matmul family's one entry: out = a @ b (a: M x K, b: K x N, out: M x N, any strides),
/// each element a dot product accumulated in Acc and rounded once into out's element type.
template <class Acc, class A, class B, class Out>
__device__ void matmul(A const& a, B const& b, Out&& out) {
  matmul_cuda::before_reads<A>(b);
  matmul_impl::apply<Acc>(a, b, out, matmul_impl::store_as_is{}, plain_rows{});
}

/// ... each result passed through an epilogue first: out(m, n) = epilogue(m, n, the dot product in
/// Acc) (the elementwise ops a function applies to the matmul's result, fused: a residual add).
template <class Acc, class A, class B, class Out, class Epi>
__device__ void matmul(A const& a, B const& b, Out&& out, Epi const& epilogue) {
  matmul_cuda::before_reads<A>(b);
  matmul_impl::apply<Acc>(a, b, out, epilogue, plain_rows{});
}

/// ... its first operand read through a prologue (matmul_prologue.h): out(m, n) = epilogue(m, n,
/// sum_k prologue(a)(m, k) * b(k, n)) (an RMSNorm before a projection, fused). Pass
/// no_epilogue{} for none.
template <class Acc, class A, class B, class Out, class Epi, class Pro>
__device__ void matmul(A const& a, B const& b, Out&& out, Epi const& epilogue,
                       Pro const& prologue) {
  matmul_cuda::before_reads<A>(b);
  matmul_impl::apply<Acc>(a, b, out, epilogue, prologue);
}

/// A pair of products sharing a (b and b1 of one shape): out(m, n) = epilogue(m, n,
/// sum_k prologue(a)(m, k) * b(k, n), sum_k prologue(a)(m, k) * b1(k, n)), a read once for both
/// (silu(x @ gate.T) * (x @ up.T), fused). Pass plain_rows{} for no prologue.
template <class Acc, class A, class B, class B1, class Out, class Epi, class Pro>
__device__ void matmul(A const& a, B const& b, B1 const& b1, Out&& out, Epi const& epilogue,
                       Pro const& prologue) {
  matmul_cuda::before_reads<A>(b, b1);
  matmul_impl::apply_pair<Acc>(a, b, b1, out, epilogue, prologue);
}

/// ... given first a ring of shared memory (the streamed schedule's, lower/matmul.py): a tile of
/// one or two rows streams b's rows through it (matmul_stream.cuh); any other takes the tiers
/// above.
template <class Acc, class Ring, class W, class A, class B, class Out, class Epi, class Pro>
__device__ void matmul(matmul_ring<Ring, W> const& ring, A const& a, B const& b, Out&& out,
                       Epi const& epilogue, Pro const& prologue) {
  constexpr bool kEarly = matmul_ring<Ring, W>::constant_weights;
  if (matmul_stream::apply<Acc, kEarly>(a, b, matmul_impl::no_second{}, out, epilogue, prologue,
                                        ring.smem)) {
    return;
  }
  matmul_cuda::before_reads<A>(b);
  matmul_impl::apply<Acc>(a, b, out, epilogue, prologue);
}

/// ... of a pair, given a ring: b's and b1's rows of each column streamed through it in turn.
template <class Acc, class Ring, class W, class A, class B, class B1, class Out, class Epi,
          class Pro>
__device__ void matmul(matmul_ring<Ring, W> const& ring, A const& a, B const& b, B1 const& b1,
                       Out&& out, Epi const& epilogue, Pro const& prologue) {
  constexpr bool kEarly = matmul_ring<Ring, W>::constant_weights;
  if (matmul_stream::apply<Acc, kEarly>(a, b, b1, out, epilogue, prologue, ring.smem)) return;
  matmul_cuda::before_reads<A>(b, b1);
  matmul_impl::apply_pair<Acc>(a, b, b1, out, epilogue, prologue);
}

namespace matmul_cuda {

/// The GEMM schedule's call, with the operands' tensor maps where the host made them (else null);
/// of a pair (B1 a second weight), silu(a @ b) * (a @ b1)'s kind, through the tensor cores only
/// where all three maps are given and describe them.
template <class Acc, class Ring, class W, class A, class B, class B1, class Out, class Epi,
          class Pro>
__device__ __forceinline__ void row_tiles(matmul_ring<Ring, W> const& ring, A const& a, B const& b,
                                          B1 const& b1, Out&& out, Epi const& epilogue,
                                          Pro const& prologue, int64_t rank, int64_t ranks,
                                          tensor_map const* ma, tensor_map const* mb,
                                          tensor_map const* mb1) {
  constexpr bool kPair = matmul_impl::is_pair_v<B1>;
  wait_for_earlier_kernels();
  if constexpr (std::is_same_v<Pro, plain_rows> && std::is_same_v<Acc, float>) {
    if constexpr (kPair) {
      if (ma != nullptr && mb != nullptr && mb1 != nullptr &&
          matmul_gmma::apply_pair(a, b, b1, out, epilogue, ring.smem, rank, ranks, *ma, *mb,
                                  *mb1)) {
        return;
      }
    } else {
      if (matmul_gmma::apply(a, b, out, epilogue, ring.smem, rank, ranks, ma, mb)) return;
    }
  }
  int64_t const total = int64_t(cute::size<0>(a));
  constexpr int64_t kRows = matmul_gmma::Shape<128>::kTileM;
  for (int64_t m0 = rank * kRows; m0 < total; m0 += ranks * kRows) {
    int64_t const rows = total - m0 < kRows ? total - m0 : kRows;
    auto out_rows = row_slice(out, m0, rows);
    if constexpr (kPair) {
      matmul_impl::apply_pair<Acc>(row_slice(a, m0, rows), b, b1, out_rows,
                                   rows_from<Epi>{epilogue, m0}, prologue);
    } else {
      matmul_impl::apply<Acc>(row_slice(a, m0, rows), b, out_rows, rows_from<Epi>{epilogue, m0},
                              prologue);
    }
    __syncthreads();  // the tiers' shared memory is reused by the next row tile
  }
}

}  // namespace matmul_cuda

/// ... given a ring and this CTA's share of the rows (the GEMM schedule of lower/matmul.py, many
/// rows): the row tiles of matmul_gmma::Shape<128>::kTileM rows (256) rank, rank + ranks, ... of a,
/// through the tensor cores (matmul_gmma.cuh) where that tier applies, else each through the tiers
/// above.
template <class Acc, class Ring, class W, class A, class B, class Out, class Epi, class Pro>
__device__ __forceinline__ void matmul(matmul_ring<Ring, W> const& ring, A const& a, B const& b,
                                       Out&& out, Epi const& epilogue, Pro const& prologue,
                                       int64_t rank, int64_t ranks) {
  matmul_cuda::row_tiles<Acc>(ring, a, b, matmul_impl::no_second{}, out, epilogue, prologue, rank,
                              ranks, nullptr, nullptr, nullptr);
}

/// ... and given the tensor maps of a's and b's memory (cuda/tensor_map.cuh, made by the host
/// entry): the tensor-core tier's stages filled by the copy engine where the maps describe them.
template <class Acc, class Ring, class W, class A, class B, class Out, class Epi, class Pro>
__device__ __forceinline__ void matmul(matmul_ring<Ring, W> const& ring, A const& a, B const& b,
                                       Out&& out, Epi const& epilogue, Pro const& prologue,
                                       int64_t rank, int64_t ranks, tensor_map const& ma,
                                       tensor_map const& mb) {
  matmul_cuda::row_tiles<Acc>(ring, a, b, matmul_impl::no_second{}, out, epilogue, prologue, rank,
                              ranks, &ma, &mb, nullptr);
}

/// ... of a pair (b1 of b's shape: out(m, n) = epilogue(m, n, (a @ b)(m, n), (a @ b1)(m, n)),
/// silu(gate) * up), given the tensor maps of a's, b's and b1's memory: both products of an output
/// tile through one wgmma a step where the maps describe them (matmul_gmma::apply_pair), else the
/// pair's tiers of matmul_impl.h over the row tiles.
template <class Acc, class Ring, class W, class A, class B, class B1, class Out, class Epi,
          class Pro>
__device__ __forceinline__ void matmul(matmul_ring<Ring, W> const& ring, A const& a, B const& b,
                                       B1 const& b1, Out&& out, Epi const& epilogue,
                                       Pro const& prologue, int64_t rank, int64_t ranks,
                                       tensor_map const& ma, tensor_map const& mb,
                                       tensor_map const& mb1) {
  matmul_cuda::row_tiles<Acc>(ring, a, b, b1, out, epilogue, prologue, rank, ranks, &ma, &mb, &mb1);
}

}  // namespace ops
}  // namespace tilefoundry

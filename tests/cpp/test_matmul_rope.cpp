// ops::matmul (both tiers) and ops::rope on the CPU target, checked against references computed
// here in double.
#include <tilefoundry/runtime.h>

#include <cmath>
#include <vector>

#include "test_util.h"

namespace {

using namespace tilefoundry;
using cute::Int;
using bf16 = cutlass::bfloat16_t;

template <class T>
std::vector<T> cast_all(std::vector<float> const& v) {
  std::vector<T> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = T(v[i]);
  return out;
}

// out = x @ w.T with w stored (N, K): the dot-product tier (K runs contiguous in both operands),
// grouped in 16-byte groups where K allows (K = 64), element by element where it does not (K = 37).
template <int K>
void check_dot_tier() {
  constexpr int M = 3, N = 5;
  tftest::Random rnd;
  SCOPED_TRACE(rnd.trace());
  auto const xf = rnd.floats(M * K), wf = rnd.floats(N * K);
  auto const x = cast_all<bf16>(xf), w = cast_all<bf16>(wf);
  std::vector<bf16> out(M * N, bf16(-7.0f));
  auto a = cute::make_tensor(x.data(), cute::make_layout(cute::make_shape(Int<M>{}, Int<K>{}),
                                                         cute::make_stride(Int<K>{}, Int<1>{})));
  auto b = cute::make_tensor(w.data(), cute::make_layout(cute::make_shape(Int<K>{}, Int<N>{}),
                                                         cute::make_stride(Int<1>{}, Int<K>{})));
  auto o = cute::make_tensor(out.data(), cute::make_layout(cute::make_shape(Int<M>{}, Int<N>{}),
                                                           cute::make_stride(Int<N>{}, Int<1>{})));
  static_assert(ops::matmul_impl::dot_tier_v<decltype(a), decltype(b)>,
                "K runs contiguous: dot tier");
  ops::matmul<float>(a, b, o);
  for (int m = 0; m < M; ++m) {
    for (int n = 0; n < N; ++n) {
      double ref = 0;
      for (int k = 0; k < K; ++k) ref += double(float(x[m * K + k])) * double(float(w[n * K + k]));
      // one rounding to bf16 of an f32 sum of K products: within a bf16 ulp plus the f32 sum's
      // error
      EXPECT_NEAR(float(out[m * N + n]), ref, std::abs(ref) * 0x1p-8 + 1e-5 * K) << m << ", " << n;
    }
  }
}

TEST(Matmul, DotTierGroupedAndElementwise) {
  check_dot_tier<64>();
  check_dot_tier<37>();
}

TEST(Matmul, GeneralTierFollowsAnyStrides) {
  constexpr int M = 4, K = 6, N = 3;
  tftest::Random rnd;
  SCOPED_TRACE(rnd.trace());
  auto const af = rnd.floats(M * K), bf = rnd.floats(K * N);
  std::vector<float> out(M * N, -7.0f);
  // a stored column-major, b row-major: no contiguous runs of K in a, so the general tier
  auto a = cute::make_tensor(af.data(), cute::make_layout(cute::make_shape(Int<M>{}, Int<K>{}),
                                                          cute::make_stride(Int<1>{}, Int<M>{})));
  auto b = cute::make_tensor(bf.data(), cute::make_layout(cute::make_shape(Int<K>{}, Int<N>{}),
                                                          cute::make_stride(Int<N>{}, Int<1>{})));
  auto o = cute::make_tensor(out.data(), cute::make_layout(cute::make_shape(Int<M>{}, Int<N>{}),
                                                           cute::make_stride(Int<N>{}, Int<1>{})));
  static_assert(!ops::matmul_impl::dot_tier_v<decltype(a), decltype(b)>, "strided: general tier");
  ops::matmul<float>(a, b, o);
  for (int m = 0; m < M; ++m) {
    for (int n = 0; n < N; ++n) {
      double ref = 0;
      for (int k = 0; k < K; ++k) ref += double(af[m + M * k]) * double(bf[k * N + n]);
      EXPECT_NEAR(out[m * N + n], ref, 1e-5 * (1 + std::abs(ref)));
    }
  }
}

// The blocked tier (matmul_blocked::tile: AMX's tiles, AVX512_BF16 or AVX-512 panels where the CPU
// has them, the portable panels otherwise) on small integers, whose every sum is exact in float in
// any order: each output equal to the reference. The shapes cover whole and partial blocks of
// rows, whole and partial panels, K in whole steps of 32 (AMX reads whole blocks of a in place) and
// not, K past one pass of the float panels (256), and more rows than a chunk (192).
template <class E>
void check_blocked_tier(int rows, int cols, int depth) {
  std::vector<E> a(size_t(rows * depth)), b(size_t(cols * depth));
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = E(float(int(i * 7 % 13) - 6));
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = E(float(int(i * 5 % 11) - 5));
  std::vector<float> out(size_t(rows * cols), NAN);
  ops::matmul_blocked::tile(a.data(), depth, b.data(), depth, rows, cols, depth,
                            ops::matmul_blocked::plain_store<float>{out.data(), cols});
  for (int m = 0; m < rows; ++m) {
    for (int n = 0; n < cols; ++n) {
      double want = 0;
      for (int k = 0; k < depth; ++k)
        want += double(float(a[m * depth + k])) * float(b[n * depth + k]);
      ASSERT_EQ(out[size_t(m * cols + n)], float(want))
          << rows << "x" << cols << "x" << depth << " at " << m << ", " << n;
    }
  }
}

TEST(Matmul, BlockedTierEveryShapeOfBlocksPanelsAndSteps) {
  for (int rows : {1, 31, 32, 45, 200}) {
    for (int cols : {20, 32, 70, 96}) {
      for (int depth : {37, 64, 300, 576}) {
        check_blocked_tier<float>(rows, cols, depth);
        check_blocked_tier<bf16>(rows, cols, depth);
      }
    }
  }
}

TEST(Rope, RotatesHalvesInFloat) {
  constexpr int D = 8;
  tftest::Random rnd;
  SCOPED_TRACE(rnd.trace());
  auto const xf = rnd.floats(D), cf = rnd.floats(D), sf = rnd.floats(D);
  auto const x = cast_all<bf16>(xf), c = cast_all<bf16>(cf), s = cast_all<bf16>(sf);
  std::vector<bf16> out(D, bf16(-7.0f));
  auto row = [](auto* p) {
    return cute::make_tensor(p, cute::make_layout(cute::make_shape(Int<D>{})));
  };
  ops::rope<float>(row(x.data()), row(c.data()), row(s.data()), row(out.data()));
  for (int j = 0; j < D; ++j) {
    float const xj = float(x[j]), partner = float(x[(j + D / 2) % D]);
    float const rotated = j < D / 2 ? -partner : partner;
    // as the evaluator computes it: x * cos + rotate_half(x) * sin in float, rounded once to bf16
    // (a compiler that contracts the float expression may tip that rounding: one bf16 ulp)
    float const ref = xj * float(c[j]) + rotated * float(s[j]);
    EXPECT_NEAR(float(out[j]), ref, std::abs(ref) * 0x1p-8 + 1e-6f) << j;
  }
}

}  // namespace

// ops::reads_at (common/ops/matmul_epilogue.h), the epilogue generated code writes where it reads
// tensors: a word of W elements (the GEMM tier's path) is what W calls of it element by element
// make, bit for bit, whether its tensors' rows are contiguous and aligned (16-byte loads), start
// off a 16-byte boundary, or are strided (element by element).
#include <tilefoundry/runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "test_util.h"

namespace {

using namespace tilefoundry;
using bf16 = cutlass::bfloat16_t;

constexpr int kRows = 3, kCols = 24, kW = 8;

std::uint16_t bits(bf16 x) {
  std::uint16_t b;
  std::memcpy(&b, &x, sizeof(b));
  return b;
}

// out = bf16(acc) + r(m, n) + bias(n), as a generated epilogue computes it (adds only: the same in
// every inlining, no contraction into a fused multiply-add).
auto residual_and_bias() {
  return [](float acc, bf16 r, float bias) {
    auto const sum = ops::scalar::unary<bf16>(ops::cast_op{}, acc);
    auto const add = ops::scalar::binary<bf16>(ops::add_op{}, sum, r);
    return ops::scalar::binary<float>(ops::add_op{}, add, bias);
  };
}

// Every word of a kRows x kCols product through word<kW>, against the element-by-element calls.
template <class R>
void check_words(R const& r, std::vector<float> const& bias_values, tftest::Random& rnd) {
  auto bias = cute::make_tensor(bias_values.data(),
                                cute::make_layout(cute::make_shape(kRows, kCols),
                                                  cute::make_stride(0, 1)));  // broadcast rows
  auto const epi = ops::reads_at(residual_and_bias(), r, bias);
  static_assert(ops::is_reading_v<decltype(epi)>, "reads_at makes a reading epilogue");
  auto const sums = rnd.floats(kRows * kCols, -8.0f, 8.0f);
  for (int m = 0; m < kRows; ++m) {
    for (int n = 0; n < kCols; n += kW) {
      float acc[kW];
      for (int e = 0; e < kW; ++e) acc[e] = sums[m * kCols + n + e];
      bf16 word[kW];
      epi.word(m, n, acc, word);
      for (int e = 0; e < kW; ++e) {
        bf16 const one = detail::convert<bf16>(epi(m, n + e, acc[e]));
        EXPECT_EQ(bits(word[e]), bits(one)) << "(" << m << ", " << n + e << ")";
        float const expect = float(bf16(acc[e])) + float(r(m, n + e));
        EXPECT_NEAR(float(word[e]), float(bf16(expect)) + bias_values[n + e],
                    0x1p-6f * (std::abs(expect) + std::abs(bias_values[n + e])) + 1e-6f);
      }
    }
  }
}

TEST(MatmulEpilogue, AWordIsItsElementsWhateverTheRowsLayout) {
  tftest::Random rnd;
  SCOPED_TRACE(rnd.trace());
  auto const bias = rnd.floats(kCols);
  // storage 16-byte aligned, with room for a view one element in and one of every other column
  alignas(16) static bf16 storage[kRows * kCols * 2 + 8];
  auto const values = rnd.floats(kRows * kCols * 2 + 8);
  for (std::size_t i = 0; i < values.size(); ++i) storage[i] = bf16(values[i]);
  auto const rows_of = [](bf16 const* p, int stride_m, int stride_n) {
    return cute::make_tensor(p, cute::make_layout(cute::make_shape(kRows, kCols),
                                                  cute::make_stride(stride_m, stride_n)));
  };
  {
    SCOPED_TRACE("contiguous and aligned: 16-byte loads");
    check_words(rows_of(storage, kCols, 1), bias, rnd);
  }
  {
    SCOPED_TRACE("starting one element past a 16-byte boundary: element by element");
    check_words(rows_of(storage + 1, kCols, 1), bias, rnd);
  }
  {
    SCOPED_TRACE("every other column: element by element");
    check_words(rows_of(storage, 2 * kCols, 2), bias, rnd);
  }
}

TEST(MatmulEpilogue, ReadsAtTakesAPairsTwoSums) {
  std::vector<bf16> r(kCols, bf16(0.5f));
  auto rows = cute::make_tensor(
      r.data(), cute::make_layout(cute::make_shape(1, kCols), cute::make_stride(kCols, 1)));
  auto const epi =
      ops::reads_at([](float gate, float up, bf16 x) { return gate * up + float(x); }, rows);
  EXPECT_FLOAT_EQ(float(epi(0, 3, 2.0f, 3.0f)), 6.5f);
  static_assert(std::is_invocable_v<decltype(epi) const&, int64_t, int64_t, float, float>,
                "a pair's epilogue takes two sums");
  static_assert(!std::is_invocable_v<decltype(epi) const&, int64_t, int64_t, float>,
                "... and not one (the tiers ask which it takes)");
  static_assert(!ops::is_reading_v<ops::no_epilogue>, "an epilogue reading nothing makes no words");
}

TEST(MatmulEpilogue, APairsWordIsItsElements) {
  // silu(gate) * up + r, as the GEMM tier's pair makes a word of it from its two sums' words
  tftest::Random rnd;
  SCOPED_TRACE(rnd.trace());
  alignas(16) static bf16 storage[kRows * kCols + 8];
  auto const values = rnd.floats(kRows * kCols + 8);
  for (std::size_t i = 0; i < values.size(); ++i) storage[i] = bf16(values[i]);
  auto const swiglu = [](float gate, float up, bf16 r) {
    auto const g = ops::scalar::unary<bf16>(ops::cast_op{}, gate);
    auto const u = ops::scalar::unary<bf16>(ops::cast_op{}, up);
    auto const s = ops::scalar::unary<bf16>(ops::silu_op{}, g);
    return ops::scalar::binary<bf16>(ops::add_op{}, ops::scalar::binary<bf16>(ops::mul_op{}, s, u),
                                     r);
  };
  for (int shift : {0, 1}) {
    SCOPED_TRACE(shift ? "one element off a 16-byte boundary" : "aligned");
    auto rows = cute::make_tensor(
        static_cast<bf16 const*>(storage + shift),
        cute::make_layout(cute::make_shape(kRows, kCols), cute::make_stride(kCols, 1)));
    auto const epi = ops::reads_at(swiglu, rows);
    auto const gates = rnd.floats(kRows * kCols, -6.0f, 6.0f);
    auto const ups = rnd.floats(kRows * kCols, -6.0f, 6.0f);
    for (int m = 0; m < kRows; ++m) {
      for (int n = 0; n < kCols; n += kW) {
        float gate[kW], up[kW];
        for (int e = 0; e < kW; ++e) {
          gate[e] = gates[m * kCols + n + e];
          up[e] = ups[m * kCols + n + e];
        }
        bf16 word[kW];
        epi.word(m, n, gate, up, word);
        for (int e = 0; e < kW; ++e) {
          bf16 const one = detail::convert<bf16>(epi(m, n + e, gate[e], up[e]));
          EXPECT_EQ(bits(word[e]), bits(one)) << "(" << m << ", " << n + e << ")";
          float const g = float(bf16(gate[e])), u = float(bf16(up[e]));
          float const expect = g / (1.0f + std::exp(-g)) * u + float(rows(m, n + e));
          EXPECT_NEAR(float(word[e]), expect, 0x1p-6f * (std::abs(expect) + std::abs(u)) + 1e-3f);
        }
      }
    }
  }
}

}  // namespace

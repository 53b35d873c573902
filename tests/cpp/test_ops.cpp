// Every op family on the CPU target, checked against references computed here in double.
#include <tilefoundry/runtime.h>

#include <cmath>
#include <limits>
#include <vector>

#include "reduce_reference.h"
#include "test_util.h"

namespace {

using namespace tilefoundry;
using cute::Int;
using cute::seq;
using TS = TopologyScope;
using bf16 = cutlass::bfloat16_t;
using half = cutlass::half_t;

template <class T>
std::vector<T> cast_all(std::vector<float> const& v) {
  std::vector<T> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = T(v[i]);
  return out;
}

// ---------------------------------------------------------------- fill and copy

TEST(Fill, PlainAndShardTensor) {
  std::vector<bf16> buf(24, bf16(-1.0f));
  auto t = cute::make_tensor(buf.data(), cute::make_shape(Int<4>{}, Int<6>{}));
  ops::fill(t, 2.5f);
  for (auto x : buf) EXPECT_EQ(float(x), 2.5f);

  std::vector<float> g(24, -1.0f);
  auto layout = cute::make_layout(cute::make_shape(Int<4>{}, Int<6>{}),
                                  cute::make_stride(Int<6>{}, Int<1>{}));
  auto mesh = make_mesh<TS::cta>(cute::make_layout(cute::make_shape(Int<4>{})));
  auto s = make_shard_tensor(cute::make_tensor(g.data(), layout), layout,
                             make_shard_layout(layout, cute::make_tuple(shard::S<0>{}), mesh));
  cpu::launch(4, [&] { ops::fill(s, float(program_id<TS::cta>())); });
  for (int i = 0; i < 24; ++i) EXPECT_EQ(g[i], float(i / 6));
}

TEST(Iota, PositionsOfAPlainTensorAndOfARowSplitOverInstances) {
  // A plain tensor: each element's colexicographic position among its modes (as arg_reduce's).
  std::vector<long> p(15, -1);
  auto t = cute::make_tensor(p.data(), cute::make_shape(Int<3>{}, Int<5>{}));
  ops::iota<seq<0, 1>>(t, 7, 2);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 5; ++j) EXPECT_EQ(p[i * 1 + j * 3], 7 + 2 * (i + 3 * j));
  }
  // A row of 64 as a row-wise kernel lays it out (4-element vectors, 8 instances, 2 each): every
  // instance writes its own elements, each the row's position times the step plus the start.
  std::vector<float> g(64, -1.0f);
  auto layout = cute::make_layout(cute::make_shape(Int<4>{}, Int<8>{}, Int<2>{}),
                                  cute::make_stride(Int<1>{}, Int<4>{}, Int<32>{}));
  auto mesh = make_mesh<TS::cta>(cute::make_layout(cute::make_shape(Int<8>{})));
  auto s = make_shard_tensor(cute::make_tensor(g.data(), layout), layout,
                             make_shard_layout(layout, cute::make_tuple(shard::S<1>{}), mesh));
  cpu::launch(8, [&] { ops::iota<seq<0, 1, 2>>(s, -3, 3); });
  for (int i = 0; i < 64; ++i) EXPECT_EQ(g[i], float(-3 + 3 * i)) << i;
}

TEST(IndexAdd, SumsTheRowsNamingThePositionInOrder) {
  // Result row at position 1 of torch.index_add(x, 0, [1, 0, 1], src, alpha=0.5), in bf16: x's row
  // plus half of rows 0 and 2, rounded after each add.
  std::vector<bf16> x = cast_all<bf16>({1.0f, 2.0f, 3.0f, 4.0f});
  std::vector<bf16> src = cast_all<bf16>({256.0f, 1.0f, 1.0f, 1.0f, 9.0f, 9.0f, 9.0f, 9.0f,  //
                                          0.5f, 0.5f, 0.5f, 0.5f});
  std::vector<long> index{1, 0, 1};
  std::vector<bf16> out(4, bf16(-1.0f));
  auto row = cute::make_layout(cute::make_shape(Int<4>{}));
  auto rows = cute::make_layout(cute::make_shape(Int<3>{}, Int<4>{}),
                                cute::make_stride(Int<4>{}, Int<1>{}));
  ops::index_add(cute::make_tensor(x.data(), row), cute::make_tensor(src.data(), rows),
                 cute::make_tensor(index.data(), cute::make_layout(cute::make_shape(Int<3>{}))),
                 bf16(0.5f), cute::make_tensor(out.data(), row), 1, 2);
  // 1 + 128 = 129 (bf16 keeps 129), then + 0.25 rounds back to 129; 2 + 0.5 + 0.25 = 2.75.
  EXPECT_EQ(float(out[0]), 129.0f);
  EXPECT_EQ(float(out[1]), 2.75f);
  EXPECT_EQ(float(out[3]), 4.75f);
}

TEST(Copy, ConvertsAndFollowsLayouts) {
  tftest::Random rnd;
  SCOPED_TRACE(rnd.trace());
  auto src = rnd.floats(32);
  std::vector<half> dst(32);
  auto s = cute::make_tensor(src.data(), cute::make_layout(cute::make_shape(Int<4>{}, Int<8>{}),
                                                           cute::make_stride(Int<8>{}, Int<1>{})));
  auto d = cute::make_tensor(dst.data(), cute::make_layout(cute::make_shape(Int<4>{}, Int<8>{})));
  ops::copy(s, d);  // row-major into column-major
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 8; ++c) EXPECT_EQ(float(dst[r + 4 * c]), float(half(src[r * 8 + c])));
}

// ---------------------------------------------------------------- unary family

template <class Op, class Ref>
void check_unary(Op op, Ref ref, float lo, float hi, double tol) {
  tftest::Random rnd;
  SCOPED_TRACE(rnd.trace());
  auto x = rnd.floats(64, lo, hi);
  std::vector<float> y(64, std::numeric_limits<float>::quiet_NaN());
  ops::unary(op, cute::make_tensor(x.data(), cute::make_shape(Int<64>{})),
             cute::make_tensor(y.data(), cute::make_shape(Int<8>{}, Int<8>{})));
  for (int i = 0; i < 64; ++i) {
    double const want = ref(double(x[i]));
    EXPECT_NEAR(y[i], want, tol * (1.0 + std::fabs(want))) << "x = " << x[i];
  }
}

TEST(Unary, EveryTagAgainstDouble) {
  double const t = 1e-6;
  check_unary(
      ops::identity_op{}, [](double v) { return v; }, -4, 4, 0);
  check_unary(
      ops::neg_op{}, [](double v) { return -v; }, -4, 4, 0);
  check_unary(
      ops::abs_op{}, [](double v) { return std::fabs(v); }, -4, 4, 0);
  check_unary(
      ops::square_op{}, [](double v) { return v * v; }, -4, 4, t);
  check_unary(
      ops::relu_op{}, [](double v) { return v < 0 ? 0.0 : v; }, -4, 4, 0);
  check_unary(
      ops::exp_op{}, [](double v) { return std::exp(v); }, -4, 4, t);
  check_unary(
      ops::log_op{}, [](double v) { return std::log(v); }, 0.01f, 8, t);
  check_unary(
      ops::sqrt_op{}, [](double v) { return std::sqrt(v); }, 0, 8, t);
  check_unary(
      ops::rsqrt_op{}, [](double v) { return 1.0 / std::sqrt(v); }, 0.01f, 8, t);
  check_unary(
      ops::tanh_op{}, [](double v) { return std::tanh(v); }, -4, 4, t);
  check_unary(
      ops::sigmoid_op{}, [](double v) { return 1.0 / (1.0 + std::exp(-v)); }, -8, 8, t);
  check_unary(
      ops::silu_op{}, [](double v) { return v / (1.0 + std::exp(-v)); }, -8, 8, t);
  // The rounded forms err by far less than a 16-bit rounding (2^-9): the host's exponential by
  // less than 2^-18 relative (math.h), the device's by less than 2^-21
  // (tests/gpu/test_elementwise.cu).
  double const rounded = std::ldexp(1.0, -17);
  check_unary(
      ops::exp_rounded_op{}, [](double v) { return std::exp(v); }, -4, 4, rounded);
  check_unary(
      ops::sigmoid_rounded_op{}, [](double v) { return 1.0 / (1.0 + std::exp(-v)); }, -8, 8,
      rounded);
  check_unary(
      ops::silu_rounded_op{}, [](double v) { return v / (1.0 + std::exp(-v)); }, -8, 8, rounded);
  check_unary(
      ops::gelu_op{}, [](double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); }, -4,
      4, t);
  check_unary(
      ops::gelu_tanh_op{},
      [](double v) {
        return 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
      },
      -4, 4, t);
  check_unary(
      ops::clamp_op<float>{-1.5f, 0.5f},
      [](double v) { return v < -1.5 ? -1.5 : (v > 0.5 ? 0.5 : v); }, -4, 4, 0);
}

TEST(Unary, CastNarrowsWithRoundToNearest) {
  tftest::Random rnd;
  SCOPED_TRACE(rnd.trace());
  auto x = rnd.floats(16);
  std::vector<bf16> y(16);
  ops::unary(ops::cast_op{}, cute::make_tensor(x.data(), cute::make_shape(Int<16>{})),
             cute::make_tensor(y.data(), cute::make_shape(Int<16>{})));
  for (int i = 0; i < 16; ++i) EXPECT_EQ(float(y[i]), float(bf16(x[i])));
}

TEST(Unary, CopyNStopsAfterN) {
  std::vector<float> x(10, 7.0f), y(10, -1.0f);
  ops::unary(ops::copy_n_op{{}, 6}, cute::make_tensor(x.data(), cute::make_shape(10)),
             cute::make_tensor(y.data(), cute::make_shape(10)));
  for (int i = 0; i < 10; ++i) EXPECT_EQ(y[i], i < 6 ? 7.0f : -1.0f);
}

TEST(Unary, NanPassesThroughReluAndClamp) {
  float const nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x{nan, -1.0f}, y(2);
  auto tx = cute::make_tensor(x.data(), cute::make_shape(Int<2>{}));
  auto ty = cute::make_tensor(y.data(), cute::make_shape(Int<2>{}));
  ops::unary(ops::relu_op{}, tx, ty);
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[1], 0.0f);
  ops::unary(ops::clamp_op<float>{0.0f, 1.0f}, tx, ty);
  EXPECT_TRUE(std::isnan(y[0]));
}

// ---------------------------------------------------------------- binary family

template <class Op, class Ref>
void check_binary_broadcast(Op op, Ref ref, float lo = -4, float hi = 4) {
  tftest::Random rnd;
  SCOPED_TRACE(rnd.trace());
  auto a = rnd.floats(4 * 6, lo, hi);
  auto col = rnd.floats(4, lo, hi);  // (4, 1)
  auto row = rnd.floats(6, lo, hi);  // (6): rank 1, aligned right
  std::vector<float> out(24);
  auto ta = cute::make_tensor(a.data(), cute::make_layout(cute::make_shape(Int<4>{}, Int<6>{}),
                                                          cute::make_stride(Int<6>{}, Int<1>{})));
  auto to = cute::make_tensor(out.data(), cute::make_layout(cute::make_shape(Int<4>{}, Int<6>{}),
                                                            cute::make_stride(Int<6>{}, Int<1>{})));
  auto expect = [&](auto b_of) {
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 6; ++c) {
        double const want = ref(double(a[r * 6 + c]), double(b_of(r, c)));
        ASSERT_NEAR(out[r * 6 + c], want, 1e-5 * (1.0 + std::fabs(want))) << r << "," << c;
      }
  };
  ops::binary(op, ta, ta, to);
  expect([&](int r, int c) { return a[r * 6 + c]; });
  ops::binary(op, ta, cute::make_tensor(col.data(), cute::make_shape(Int<4>{}, Int<1>{})), to);
  expect([&](int r, int) { return col[r]; });
  ops::binary(op, ta, cute::make_tensor(row.data(), cute::make_shape(Int<6>{})), to);
  expect([&](int, int c) { return row[c]; });
  ops::binary(op, ta, cute::make_tensor(row.data(), cute::make_shape(Int<1>{}, Int<6>{})), to);
  expect([&](int, int c) { return row[c]; });
  ops::binary(op, ta, 1.25f, to);
  expect([&](int, int) { return 1.25f; });
  // A launch-provided extent of 1 is broadcast at run time.
  int const one = 1;
  ops::binary(op, ta, cute::make_tensor(col.data(), cute::make_shape(Int<4>{}, one)), to);
  expect([&](int r, int) { return col[r]; });
}

TEST(Binary, EveryTagWithBroadcast) {
  check_binary_broadcast(ops::add_op{}, [](double a, double b) { return a + b; });
  check_binary_broadcast(ops::sub_op{}, [](double a, double b) { return a - b; });
  check_binary_broadcast(ops::mul_op{}, [](double a, double b) { return a * b; });
  check_binary_broadcast(
      ops::div_op{}, [](double a, double b) { return a / b; }, 0.5f, 4.0f);
  check_binary_broadcast(ops::max_op{}, [](double a, double b) { return a > b ? a : b; });
  check_binary_broadcast(ops::min_op{}, [](double a, double b) { return a < b ? a : b; });
  check_binary_broadcast(
      ops::pow_op{}, [](double a, double b) { return std::pow(a, b); }, 0.5f, 2.0f);
}

TEST(Binary, MaxPropagatesNan) {
  float const nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> a{nan, 1.0f}, b{0.0f, nan}, o(2);
  ops::binary(ops::max_op{}, cute::make_tensor(a.data(), cute::make_shape(2)),
              cute::make_tensor(b.data(), cute::make_shape(2)),
              cute::make_tensor(o.data(), cute::make_shape(2)));
  EXPECT_TRUE(std::isnan(o[0]));
  EXPECT_TRUE(std::isnan(o[1]));
}

TEST(Binary, MinPropagatesNanAndKeepsTheFirstOfEqualZeros) {
  float const nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> a{nan, 1.0f, 0.0f, -0.0f}, b{0.0f, nan, -0.0f, 0.0f}, o(4), m(4);
  auto ta = cute::make_tensor(a.data(), cute::make_shape(4));
  auto tb = cute::make_tensor(b.data(), cute::make_shape(4));
  ops::binary(ops::min_op{}, ta, tb, cute::make_tensor(o.data(), cute::make_shape(4)));
  ops::binary(ops::max_op{}, ta, tb, cute::make_tensor(m.data(), cute::make_shape(4)));
  EXPECT_TRUE(std::isnan(o[0]));
  EXPECT_TRUE(std::isnan(o[1]));
  // Neither zero wins over the other: the first operand is kept, for min and max alike.
  EXPECT_FALSE(std::signbit(o[2]));
  EXPECT_TRUE(std::signbit(o[3]));
  EXPECT_FALSE(std::signbit(m[2]));
  EXPECT_TRUE(std::signbit(m[3]));
}

TEST(Binary, Bf16OperandsComputeInFloat) {
  tftest::Random rnd;
  SCOPED_TRACE(rnd.trace());
  auto af = rnd.floats(8), bf = rnd.floats(8);
  auto a = cast_all<bf16>(af), b = cast_all<bf16>(bf);
  std::vector<bf16> o(8);
  ops::binary(ops::mul_op{}, cute::make_tensor(a.data(), cute::make_shape(Int<8>{})),
              cute::make_tensor(b.data(), cute::make_shape(Int<8>{})),
              cute::make_tensor(o.data(), cute::make_shape(Int<8>{})));
  for (int i = 0; i < 8; ++i) EXPECT_EQ(float(o[i]), float(bf16(float(a[i]) * float(b[i]))));
}

TEST(Binary, ComparisonsYieldBoolAndNanComparesUnequal) {
  float const nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> a{1.0f, 2.0f, 3.0f, nan}, b{2.0f, 2.0f, 2.0f, nan};
  auto ta = cute::make_tensor(a.data(), cute::make_shape(Int<4>{}));
  auto tb = cute::make_tensor(b.data(), cute::make_shape(Int<4>{}));
  bool o[4];
  auto to = cute::make_tensor(&o[0], cute::make_shape(Int<4>{}));
  auto expect = [&](std::vector<bool> want) {
    for (int i = 0; i < 4; ++i) EXPECT_EQ(o[i], want[i]) << i;
  };
  ops::binary(ops::lt_op{}, ta, tb, to);
  expect({true, false, false, false});
  ops::binary(ops::le_op{}, ta, tb, to);
  expect({true, true, false, false});
  ops::binary(ops::gt_op{}, ta, tb, to);
  expect({false, false, true, false});
  ops::binary(ops::ge_op{}, ta, tb, to);
  expect({false, true, true, false});
  ops::binary(ops::eq_op{}, ta, tb, to);
  expect({false, true, false, false});
  ops::binary(ops::ne_op{}, ta, tb, to);
  expect({true, false, true, true});
  ops::binary(ops::lt_op{}, ta, 2.5f, to);  // a scalar operand
  expect({true, true, false, false});
}

// ---------------------------------------------------------------- ternary family

TEST(Ternary, SelectBroadcastsEveryOperand) {
  bool cond[6] = {true, false, true, false, false, true};
  std::vector<bf16> a = cast_all<bf16>({1, 2, 3, 4, 5, 6});
  std::vector<bf16> col = cast_all<bf16>({-1, -2});
  std::vector<bf16> o(6);
  auto tc = cute::make_tensor(&cond[0], cute::make_layout(cute::make_shape(Int<2>{}, Int<3>{}),
                                                          cute::make_stride(Int<3>{}, Int<1>{})));
  auto ta = cute::make_tensor(a.data(), cute::make_layout(cute::make_shape(Int<2>{}, Int<3>{}),
                                                          cute::make_stride(Int<3>{}, Int<1>{})));
  auto tcol = cute::make_tensor(col.data(), cute::make_shape(Int<2>{}, Int<1>{}));
  auto to = cute::make_tensor(o.data(), cute::make_layout(cute::make_shape(Int<2>{}, Int<3>{}),
                                                          cute::make_stride(Int<3>{}, Int<1>{})));
  ops::ternary(ops::select_op{}, tc, ta, tcol, to);
  float const want[6] = {1, -1, 3, -2, -2, 6};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(float(o[i]), want[i]) << i;
  ops::ternary(ops::select_op{}, tc, ta, bf16(0.5f), to);  // a scalar branch in the storage type
  float const want2[6] = {1, 0.5f, 3, 0.5f, 0.5f, 6};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(float(o[i]), want2[i]) << i;
}

// ---------------------------------------------------------------- reduce family

using Kind = tftest::ReduceKind;

// src (3, 4, 5) column-major; reduce modes per Axes.
template <class Op, class Axes, bool KeepDim>
void check_plain_reduce(Kind k) {
  tftest::Random rnd;
  SCOPED_TRACE(rnd.trace());
  auto x = rnd.floats(60);
  auto src = cute::make_tensor(x.data(), cute::make_shape(Int<3>{}, Int<4>{}, Int<5>{}));
  constexpr auto axes = ops::detail::axes_list<Axes>::value;
  bool red[3] = {false, false, false};
  for (int a : axes) red[a < 0 ? a + 3 : a] = true;
  int const e[3] = {3, 4, 5};
  int const ke[3] = {red[0] ? 1 : 3, red[1] ? 1 : 4, red[2] ? 1 : 5};
  std::vector<float> out(ke[0] * ke[1] * ke[2], -123.0f);
  auto run = [&](auto dst) { ops::reduce<Op, Axes>(src, dst); };
  if constexpr (KeepDim) {
    run(cute::make_tensor(out.data(), cute::make_shape(ke[0], ke[1], ke[2])));
  } else if constexpr (ops::detail::axis_split<3, Axes>::n_kept == 1) {
    run(cute::make_tensor(out.data(), cute::make_shape(int(out.size()))));
  } else {
    int kept[2], n = 0;
    for (int a = 0; a < 3; ++a)
      if (!red[a]) kept[n++] = e[a];
    run(cute::make_tensor(out.data(), cute::make_shape(kept[0], kept[1])));
  }
  for (int i = 0; i < ke[0]; ++i)
    for (int j = 0; j < ke[1]; ++j)
      for (int l = 0; l < ke[2]; ++l) {
        std::vector<double> v;
        for (int a = 0; a < e[0]; ++a)
          for (int b = 0; b < e[1]; ++b)
            for (int c = 0; c < e[2]; ++c)
              if ((red[0] || a == i) && (red[1] || b == j) && (red[2] || c == l))
                v.push_back(x[a + 3 * b + 12 * c]);
        double const want = tftest::reduce_reference(k, v);
        EXPECT_NEAR(out[i + ke[0] * j + ke[0] * ke[1] * l], want, 1e-5 * (1 + std::fabs(want)));
      }
}

template <class Op>
void check_reduce_op(Kind k) {
  check_plain_reduce<Op, seq<0>, true>(k);
  check_plain_reduce<Op, seq<1>, false>(k);
  check_plain_reduce<Op, seq<2>, true>(k);
  check_plain_reduce<Op, seq<0, 2>, false>(k);
  check_plain_reduce<Op, seq<-1>, true>(k);
  check_plain_reduce<Op, seq<0, 1, 2>, true>(k);
}

TEST(ReducePlain, Sum) { check_reduce_op<ops::sum_op>(Kind::sum); }
TEST(ReducePlain, Mean) { check_reduce_op<ops::mean_op>(Kind::mean); }
TEST(ReducePlain, Max) { check_reduce_op<ops::max_op>(Kind::max); }
TEST(ReducePlain, Min) { check_reduce_op<ops::min_op>(Kind::min); }
TEST(ReducePlain, Absmax) { check_reduce_op<ops::absmax_op>(Kind::absmax); }

TEST(ReducePlain, Bf16AccumulatesInFloatAndIntegersStayExact) {
  std::vector<bf16> x(256, bf16(1.0f));
  bf16 out;
  ops::reduce<ops::sum_op, seq<0>>(cute::make_tensor(x.data(), cute::make_shape(Int<256>{})),
                                   cute::make_tensor(&out, cute::make_shape(Int<1>{})));
  EXPECT_EQ(float(out),
            256.0f);  // a bf16 accumulator would stop at 256 only by luck; float is exact
  std::vector<int> xi{3, -7, 11, 5};
  int m = 0;
  ops::reduce<ops::max_op, seq<0>>(cute::make_tensor(xi.data(), cute::make_shape(4)),
                                   cute::make_tensor(&m, cute::make_shape(1)));
  EXPECT_EQ(m, 11);
}

TEST(ReducePlain, MaxPropagatesNan) {
  std::vector<float> x{1.0f, std::numeric_limits<float>::quiet_NaN(), 3.0f};
  float out = 0;
  ops::reduce<ops::max_op, seq<0>>(cute::make_tensor(x.data(), cute::make_shape(3)),
                                   cute::make_tensor(&out, cute::make_shape(1)));
  EXPECT_TRUE(std::isnan(out));
}

// ---------------------------------------------------------------- fold (an elementwise call and a
// reduce of its result)

// ops::binary(op, a, b, out, ops::fold<Op, Axes>(dst)) against ops::binary then ops::reduce: the
// same out and the same dst, bit for bit (the fold takes the reduction's order). n = 100 and 77
// leave tails past the 16-float partials and past the vectors; 2 x 50 reduced along its second
// mode keeps two results, which the entry runs as the two calls.
template <class Op, class Axes, class Shape>
void check_fold(Shape const& shape, int kept) {
  tftest::Random rnd;
  SCOPED_TRACE(rnd.trace());
  int const n = int(cute::size(shape));
  auto x = rnd.floats(n);
  std::vector<float> fused(n), apart(n), fused_r(kept, -1.0f), apart_r(kept, -2.0f);
  auto const src = cute::make_tensor(x.data(), shape);
  auto out = cute::make_tensor(fused.data(), shape);
  auto red = cute::make_tensor(fused_r.data(), cute::make_shape(kept));
  ops::binary(ops::then(ops::mul_op{}, ops::exp_op{}), src, 0.75f, out, ops::fold<Op, Axes>(red));
  auto out2 = cute::make_tensor(apart.data(), shape);
  auto red2 = cute::make_tensor(apart_r.data(), cute::make_shape(kept));
  ops::binary(ops::then(ops::mul_op{}, ops::exp_op{}), src, 0.75f, out2);
  ops::reduce<Op, Axes>(out2, red2);
  for (int i = 0; i < n; ++i) EXPECT_EQ(fused[i], apart[i]) << i;
  for (int j = 0; j < kept; ++j) EXPECT_EQ(fused_r[j], apart_r[j]) << j;
}

template <class Op>
void check_fold_op() {
  check_fold<Op, seq<0>>(cute::make_shape(Int<100>{}), 1);
  check_fold<Op, seq<0>>(cute::make_shape(77), 1);
  check_fold<Op, seq<0, 1>>(cute::make_shape(Int<4>{}, Int<25>{}), 1);
  check_fold<Op, seq<1>>(cute::make_shape(Int<2>{}, Int<50>{}), 2);
}

TEST(Fold, SumAsTheTwoCalls) { check_fold_op<ops::sum_op>(); }
TEST(Fold, MeanAsTheTwoCalls) { check_fold_op<ops::mean_op>(); }
TEST(Fold, MaxAsTheTwoCalls) { check_fold_op<ops::max_op>(); }
TEST(Fold, MinAsTheTwoCalls) { check_fold_op<ops::min_op>(); }
TEST(Fold, AbsmaxAsTheTwoCalls) { check_fold_op<ops::absmax_op>(); }

TEST(Fold, UnaryAndTernaryCallsAndANan) {
  std::vector<bf16> x(70);
  for (int i = 0; i < 70; ++i) x[i] = bf16(float(i % 13) - 6.5f);
  x[41] = bf16(std::numeric_limits<float>::quiet_NaN());
  std::vector<float> t(70), u(70);
  float m = 0, s = 0;
  auto const xs = cute::make_tensor(x.data(), cute::make_shape(70));
  auto ts = cute::make_tensor(t.data(), cute::make_shape(70));
  auto ms = cute::make_tensor(&m, cute::make_shape(1));
  ops::unary(ops::cast_op{}, xs, ts, ops::fold<ops::max_op, seq<0>>(ms));
  EXPECT_TRUE(std::isnan(m));  // NaN wins, as in ops::reduce
  for (int i = 0; i < 70; ++i) {
    if (i != 41) {
      EXPECT_EQ(t[i], float(x[i])) << i;
    }
  }
  t[41] = 1.0f;
  bool keep[70];
  for (int i = 0; i < 70; ++i) keep[i] = i % 3 != 0;
  auto us = cute::make_tensor(u.data(), cute::make_shape(70));
  auto ss = cute::make_tensor(&s, cute::make_shape(1));
  ops::ternary(ops::select_op{}, cute::make_tensor(&keep[0], cute::make_shape(70)), ts, 0.0f, us,
               ops::fold<ops::sum_op, seq<0>>(ss));
  double want = 0;
  for (int i = 0; i < 70; ++i) {
    EXPECT_EQ(u[i], keep[i] ? t[i] : 0.0f) << i;
    want += u[i];
  }
  EXPECT_NEAR(s, want, 1e-4);
}

// CTA c's tile of the split form's tests: columns [4c, 4c + 4) of two rows, row-major 2 x 4.
std::vector<bf16> split_tile(std::vector<bf16> const& row0, std::vector<bf16> const& row1, int c) {
  std::vector<bf16> tile(2 * 4);
  for (int n = 0; n < 4; ++n) {
    tile[n] = row0[4 * c + n];
    tile[4 + n] = row1[4 * c + n];
  }
  return tile;
}

// The split form: three CTAs' tiles of two rows (4 columns each, the columns from 4 c), each
// CTA's part, then the merge: the first largest of each row across the tiles, NaN the largest.
TEST(ArgReduceSplit, PartsThenMergeGiveTorchArgmax) {
  float const nan = std::numeric_limits<float>::quiet_NaN();
  // row 0: 7 at columns 2, 5 and 9 (the first, in the first tile); row 1: NaN at 6 and 10
  std::vector<bf16> row0 = cast_all<bf16>({1, 0, 7, 3, -2, 7, 7, 1, 0, 7, -9, 6});
  std::vector<bf16> row1 = cast_all<bf16>({1, 2, 3, 4, 5, 6, nan, 8, 9, 0, nan, 1});
  std::vector<float> values(3 * 2);
  std::vector<std::int64_t> positions(3 * 2);
  for (int c = 0; c < 3; ++c) {
    std::vector<bf16> const tile = split_tile(row0, row1, c);
    ops::reduce_parts(cute::make_tensor(tile.data(), cute::make_layout(cute::make_shape(2, 4),
                                                                       cute::make_stride(4, 1))),
                      int64_t(4 * c),
                      ops::part_of<ops::argmax_op>(
                          cute::make_tensor(values.data() + 2 * c, cute::make_shape(2)),
                          cute::make_tensor(positions.data() + 2 * c, cute::make_shape(2))));
  }
  EXPECT_EQ(positions[0], 2);          // the first tile's part of row 0: its 7 at column 2
  EXPECT_EQ(positions[2 * 1 + 0], 5);  // the second's: the first of its two 7s
  EXPECT_EQ(positions[2 * 1 + 1], 6);  // row 1 in the second tile: its NaN
  std::vector<std::int64_t> out(2, -1);
  auto const parts = cute::make_layout(cute::make_shape(3, 2), cute::make_stride(2, 1));
  ops::reduce_merges(int64_t(12), ops::merge_of<ops::argmax_op>(
                                      cute::make_tensor(values.data(), parts),
                                      cute::make_tensor(positions.data(), parts),
                                      cute::make_tensor(out.data(), cute::make_shape(2))));
  EXPECT_EQ(out[0], 2);
  EXPECT_EQ(out[1], 6);
}

// The reduce family's split form: three CTAs' bf16 tiles of two rows, each CTA's part, then the
// merge: sum, mean (of the 12), maximum and minimum (NaN wins either), largest magnitude.
TEST(ReduceSplit, PartsThenMergeGiveTorchReductions) {
  float const nan = std::numeric_limits<float>::quiet_NaN();
  float const inf = std::numeric_limits<float>::infinity();
  std::vector<bf16> row0 = cast_all<bf16>({1, 0, 7, 3, -2, 7, 7, 1, 0, 7, -9, 6});
  std::vector<bf16> row1 = cast_all<bf16>({1, 2, 3, 4, 5, -inf, nan, 8, 9, 0, 2, 1});
  auto const run = [&](auto op) {
    using Op = decltype(op);
    std::vector<float> values(3 * 2);
    for (int c = 0; c < 3; ++c) {
      std::vector<bf16> const tile = split_tile(row0, row1, c);
      ops::reduce_parts(
          cute::make_tensor(tile.data(),
                            cute::make_layout(cute::make_shape(2, 4), cute::make_stride(4, 1))),
          int64_t(4 * c),
          ops::part_of<Op>(cute::make_tensor(values.data() + 2 * c, cute::make_shape(2))));
    }
    std::vector<float> out(2, -1.0f);
    auto const parts = cute::make_layout(cute::make_shape(3, 2), cute::make_stride(2, 1));
    ops::reduce_merges(int64_t(12),
                       ops::merge_of<Op>(cute::make_tensor(values.data(), parts),
                                         cute::make_tensor(out.data(), cute::make_shape(2))));
    return out;
  };
  EXPECT_EQ(run(ops::sum_op{})[0], 28.0f);
  EXPECT_FLOAT_EQ(run(ops::mean_op{})[0], 28.0f / 12.0f);
  EXPECT_EQ(run(ops::max_op{})[0], 7.0f);
  EXPECT_EQ(run(ops::min_op{})[0], -9.0f);
  EXPECT_EQ(run(ops::absmax_op{})[0], 9.0f);
  EXPECT_TRUE(std::isnan(run(ops::sum_op{})[1]));  // -inf + NaN
  EXPECT_TRUE(std::isnan(run(ops::max_op{})[1]));
  EXPECT_TRUE(std::isnan(run(ops::min_op{})[1]));
}

// Several reductions of the same rows in one call of each step (greedy decoding's argmax, largest
// and smallest logit): each result as the reduction's own call gives it.
TEST(ReduceSplit, SeveralReductionsInOneCallOfEachStep) {
  float const nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<bf16> row0 = cast_all<bf16>({1, 0, 7, 3, -2, 7, 7, 1, 0, 7, -9, 6});
  std::vector<bf16> row1 = cast_all<bf16>({1, 2, 3, 4, 5, 6, nan, 8, 9, 0, nan, 1});
  std::vector<float> at_value(3 * 2), hi(3 * 2), lo(3 * 2), sum(3 * 2);
  std::vector<std::int64_t> at(3 * 2);
  auto const part = [](std::vector<float>& v, int c) {
    return cute::make_tensor(v.data() + 2 * c, cute::make_shape(2));
  };
  for (int c = 0; c < 3; ++c) {
    std::vector<bf16> const tile = split_tile(row0, row1, c);
    ops::reduce_parts(
        cute::make_tensor(tile.data(),
                          cute::make_layout(cute::make_shape(2, 4), cute::make_stride(4, 1))),
        int64_t(4 * c), ops::part_of<ops::max_op>(part(hi, c)),
        ops::part_of<ops::argmax_op>(part(at_value, c),
                                     cute::make_tensor(at.data() + 2 * c, cute::make_shape(2))),
        ops::part_of<ops::min_op>(part(lo, c)), ops::part_of<ops::mean_op>(part(sum, c)));
  }
  auto const parts = cute::make_layout(cute::make_shape(3, 2), cute::make_stride(2, 1));
  std::vector<std::int64_t> token(2, -1);
  std::vector<bf16> largest(2), smallest(2);
  std::vector<float> mean(2);
  ops::reduce_merges(
      int64_t(12),
      ops::merge_of<ops::max_op>(cute::make_tensor(hi.data(), parts),
                                 cute::make_tensor(largest.data(), cute::make_shape(2))),
      ops::merge_of<ops::argmax_op>(cute::make_tensor(at_value.data(), parts),
                                    cute::make_tensor(at.data(), parts),
                                    cute::make_tensor(token.data(), cute::make_shape(2))),
      ops::merge_of<ops::min_op>(cute::make_tensor(lo.data(), parts),
                                 cute::make_tensor(smallest.data(), cute::make_shape(2))),
      ops::merge_of<ops::mean_op>(cute::make_tensor(sum.data(), parts),
                                  cute::make_tensor(mean.data(), cute::make_shape(2))));
  EXPECT_EQ(token[0], 2);  // the first of row 0's 7s
  EXPECT_EQ(token[1], 6);  // row 1's first NaN
  EXPECT_EQ(float(largest[0]), 7.0f);
  EXPECT_EQ(float(smallest[0]), -9.0f);
  EXPECT_TRUE(std::isnan(float(largest[1])));
  EXPECT_TRUE(std::isnan(float(smallest[1])));
  EXPECT_FLOAT_EQ(mean[0], 28.0f / 12.0f);
  EXPECT_TRUE(std::isnan(mean[1]));
}

// Rows split across CTAs; each CTA reduces its row: the sharded operands resolve to the plain
// tier, and the gmem dst is written by its owner.
TEST(ReduceSharded, RowsAcrossCtasIsPlain) {
  tftest::Random rnd;
  SCOPED_TRACE(rnd.trace());
  int const rows = 6;
  auto x = rnd.floats(rows * 16);
  std::vector<float> y(rows, -1.0f);
  auto xl =
      cute::make_layout(cute::make_shape(rows, Int<16>{}), cute::make_stride(Int<16>{}, Int<1>{}));
  auto yl =
      cute::make_layout(cute::make_shape(rows, Int<1>{}), cute::make_stride(Int<1>{}, Int<0>{}));
  auto mesh = make_mesh<TS::cta, TS::thread>(cute::make_layout(cute::make_shape(rows)));
  auto xs = make_shard_tensor(cute::make_tensor(cute::make_gmem_ptr(x.data()), xl), xl,
                              make_shard_layout(xl, cute::make_tuple(shard::S<0>{}), mesh));
  auto ys = make_shard_tensor(cute::make_tensor(cute::make_gmem_ptr(y.data()), yl), yl,
                              make_shard_layout(yl, cute::make_tuple(shard::S<0>{}), mesh));
  using Plan = ops::detail::reduce_plan_t<ops::mean_op, seq<1>, decltype(xs), decltype(ys)>;
  static_assert(Plan::tier == ops::detail::reduce_tier::plain);
  cpu::launch(rows, [&] { ops::reduce<ops::mean_op, seq<1>>(xs, ys); });
  for (int r = 0; r < rows; ++r) {
    double s = 0;
    for (int c = 0; c < 16; ++c) s += x[r * 16 + c];
    EXPECT_NEAR(y[r], s / 16, 1e-5);
  }
}

TEST(ReduceSharded, BroadcastDstInGmemIsStoredByCtaZeroOnly) {
  // src broadcast over the CTAs: every CTA computes the same value; one stores it.
  std::vector<float> x{1, 2, 3, 4};
  float y = 0;
  auto xl = cute::make_layout(cute::make_shape(Int<4>{}));
  auto yl = cute::make_layout(cute::make_shape(Int<1>{}));
  auto mesh = make_mesh<TS::cta>(cute::make_layout(cute::make_shape(Int<3>{})));
  auto xs = make_shard_tensor(cute::make_tensor(cute::make_gmem_ptr(x.data()), xl), xl,
                              make_shard_layout(xl, cute::make_tuple(shard::B{}), mesh));
  auto ys = make_shard_tensor(cute::make_tensor(cute::make_gmem_ptr(&y), yl), yl,
                              make_shard_layout(yl, cute::make_tuple(shard::B{}), mesh));
  using Plan = ops::detail::reduce_plan_t<ops::sum_op, seq<0>, decltype(xs), decltype(ys)>;
  static_assert(Plan::n_dst_broadcast == 1);
  std::vector<int> stores(3, -1);
  cpu::launch(3, [&] {
    auto view = ops::detail::view_of(ys);
    stores[program_id<TS::cta>()] =
        ops::detail::stores_result<Plan, decltype(view)>(ys, std::make_index_sequence<1>{});
    ops::reduce<ops::sum_op, seq<0>>(xs, ys);
  });
  EXPECT_EQ(stores, (std::vector<int>{1, 0, 0}));
  EXPECT_EQ(y, 10.0f);
}

TEST(ReduceSharded, ThreadLevelAxesOfExtentOneNeedNoExchange) {
  // The shape a row-wise kernel has for CUDA, with this target's one thread per CTA.
  tftest::Random rnd;
  SCOPED_TRACE(rnd.trace());
  auto x = rnd.floats(4 * 8);
  std::vector<float> y(4, 0.0f);
  auto xl = cute::make_layout(cute::make_shape(Int<4>{}, Int<1>{}, Int<8>{}),
                              cute::make_stride(Int<8>{}, Int<8>{}, Int<1>{}));
  auto yl = cute::make_layout(cute::make_shape(Int<4>{}, Int<1>{}, Int<1>{}),
                              cute::make_stride(Int<1>{}, Int<0>{}, Int<0>{}));
  auto mesh = make_mesh<TS::cta, TS::thread>(cute::make_layout(
      cute::make_shape(Int<4>{}, Int<1>{}), cute::make_stride(Int<1>{}, Int<1>{})));
  auto xs = make_shard_tensor(
      cute::make_tensor(x.data(), xl), xl,
      make_shard_layout(xl, cute::make_tuple(shard::S<0>{}, shard::S<1>{}), mesh));
  auto ys =
      make_shard_tensor(cute::make_tensor(y.data(), yl), yl,
                        make_shard_layout(yl, cute::make_tuple(shard::S<0>{}, shard::B{}), mesh));
  using Plan = ops::detail::reduce_plan_t<ops::absmax_op, seq<1, 2>, decltype(xs), decltype(ys)>;
  static_assert(Plan::tier == ops::detail::reduce_tier::plain);
  cpu::launch(4, [&] { ops::reduce<ops::absmax_op, seq<1, 2>>(xs, ys); });
  for (int r = 0; r < 4; ++r) {
    double m = 0;
    for (int c = 0; c < 8; ++c) m = std::max(m, std::fabs(double(x[r * 8 + c])));
    EXPECT_EQ(y[r], float(m));
  }
}

// The tier trait's per-axis rule, which the CUDA target's tiers are chosen from.
TEST(ReducePlan, AxisRoles) {
  using namespace ops::detail;
  using Split = axis_split<3, seq<1, 2>>;
  constexpr int sum = int(combine_kind::sum);
  static_assert(role_of<Split, true>(info_of<shard::S<0>>(), info_of<shard::S<0>>(), sum) ==
                axis_role::none);
  static_assert(role_of<Split, true>(info_of<shard::S<1>>(), info_of<shard::B>(), sum) ==
                axis_role::exchange);
  static_assert(role_of<Split, true>(info_of<shard::S<2>>(), info_of<shard::P<ops::sum_op>>(),
                                     sum) == axis_role::none);
  static_assert(role_of<Split, true>(info_of<shard::P<ops::sum_op>>(), info_of<shard::B>(), sum) ==
                axis_role::exchange);
  static_assert(role_of<Split, true>(info_of<shard::S<0>>(), info_of<shard::B>(), sum) ==
                axis_role::kept_split_lost);
  static_assert(role_of<Split, false>(info_of<shard::S<0>>(), info_of<shard::S<0>>(), sum) ==
                axis_role::none);
  static_assert(role_of<Split, true>(info_of<shard::P<ops::max_op>>(), info_of<shard::B>(), sum) ==
                axis_role::partial_combine_mismatch);
  static_assert(role_of<Split, true>(info_of<shard::B>(), info_of<shard::P<ops::sum_op>>(), sum) ==
                axis_role::broadcast_changed);
  static_assert(role_of<Split, true>(info_of<shard::Dynamic>(), info_of<shard::B>(), sum) ==
                axis_role::dynamic);
  SUCCEED();
}

// ---------------------------------------------------------------- sync and copy_async

TEST(Sync, IntraCtaKindsAreNoOps) {
  ops::sync<ops::SyncKind::cta>();
  ops::sync<ops::SyncKind::warp>();
  ops::sync<ops::SyncKind::warp_masked, 0, 0, 0x0000ffffu>();
  ops::sync<ops::SyncKind::named, 0, 64, 0u, 1>();
  std::vector<int> hits(4, 0);
  cpu::launch(4, [&] {
    hits[program_id<TS::cta>()] += 1;
    ops::sync<ops::SyncKind::cta>();
    hits[program_id<TS::cta>()] += 1;
  });
  for (int h : hits) EXPECT_EQ(h, 2);
}

TEST(CopyAsync, CompletesByTheWait) {
  tftest::Random rnd;
  SCOPED_TRACE(rnd.trace());
  auto x = rnd.floats(16);
  std::vector<float> y(16, 0.0f);
  ops::copy_async(cute::make_tensor(cute::make_gmem_ptr(x.data()), cute::make_shape(Int<16>{})),
                  cute::make_tensor(y.data(), cute::make_shape(Int<16>{})));
  ops::cp_async_commit();
  ops::cp_async_wait<0>();
  EXPECT_EQ(x, y);
}

}  // namespace

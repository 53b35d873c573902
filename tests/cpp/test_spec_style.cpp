// Programs written in the spec's own style, each of which failed to compile, or compiled to the
// wrong copy, before: cute::copy / cute::fill through the umbrella (spec 3.1, 3.2), a cute::Tensor
// whose layout is a ShardLayout (spec 2.9) in local(), shard_partition (spec 3.3), the ops and
// tilefoundry::copy, and an unqualified copy under `using namespace tilefoundry::ops`.
//
// No `using namespace tilefoundry` at file scope: with both tilefoundry and tilefoundry::ops open,
// an unqualified copy is ambiguous by design (shard_copy.h), and one case below needs ops alone.
#include <tilefoundry/runtime.h>

#include <cmath>
#include <vector>

#include "test_util.h"

namespace tf = tilefoundry;

// Generated code that opens only the ops namespace and calls copy unqualified.
namespace ops_only {
using namespace tilefoundry::ops;
template <class Src, class Dst>
void unqualified_copy(Src const& src, Dst&& dst) {
  copy(src, dst);
}
}  // namespace ops_only

// Spec-style code that opens tilefoundry and calls its copy unqualified.
namespace tf_only {
using namespace tilefoundry;
template <class Src, class Dst>
void unqualified_copy(Src const& src, Dst&& dst) {
  copy(src, dst);
}
}  // namespace tf_only

namespace {

using cute::Int;
using TS = tf::TopologyScope;

// (4, 8) row-major, rows split over 4 CTAs: each CTA owns one row of 8.
auto rows_layout() {
  return cute::make_layout(cute::make_shape(Int<4>{}, Int<8>{}),
                           cute::make_stride(Int<8>{}, Int<1>{}));
}
auto rows_shard_layout() {
  auto mesh = tf::make_mesh<TS::cta>(cute::make_layout(cute::make_shape(Int<4>{})));
  return tf::make_shard_layout(rows_layout(), cute::make_tuple(tf::shard::S<0>{}), mesh);
}
template <class T>
auto rows_shard_tensor(T* p) {
  return tf::make_shard_tensor(cute::make_tensor(cute::make_gmem_ptr(p), rows_layout()),
                               rows_layout(), rows_shard_layout());
}

std::vector<float> iota(int n, float start = 0.0f) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = start + float(i);
  return v;
}

// ---------------------------------------------------------------- spec 3.1, 3.2

TEST(CuteAlgorithms, CopyAndFillThroughTheUmbrella) {
  tftest::Random rnd;
  SCOPED_TRACE(rnd.trace());
  auto x = rnd.floats(24);
  std::vector<float> y(24, -1.0f);
  auto layout = cute::make_layout(cute::make_shape(Int<4>{}, Int<6>{}));
  auto s = cute::make_tensor(x.data(), layout);
  auto d = cute::make_tensor(y.data(), layout);
  cute::copy(s, d);
  EXPECT_EQ(y, x);
  cute::fill(d, 2.5f);
  for (float v : y) EXPECT_EQ(v, 2.5f);
}

TEST(CuteAlgorithms, CopyConvertsIntoATemporaryView) {
  tftest::Random rnd;
  SCOPED_TRACE(rnd.trace());
  auto x = rnd.floats(10);
  std::vector<cutlass::half_t> y(10);
  cute::copy(cute::make_tensor(x.data(), cute::make_shape(10)),
             cute::make_tensor(y.data(), cute::make_shape(10)));  // an rvalue destination view
  for (int i = 0; i < 10; ++i) EXPECT_EQ(float(y[i]), float(cutlass::half_t(x[i])));
}

// ---------------------------------------------------------------- spec 2.9, 3.3

TEST(DistributedCuteTensor, LocalAndShardPartitionAreTheShardTensorsView) {
  auto buf = iota(32);
  auto t = tf::make_tensor(cute::make_gmem_ptr(buf.data()), rows_shard_layout());
  static_assert(
      std::is_same_v<cute::remove_cvref_t<decltype(t.layout())>, decltype(rows_shard_layout())>);
  static_assert(tf::is_distributed_v<decltype(t)>);
  auto s = rows_shard_tensor(buf.data());
  std::vector<float const*> seen(4, nullptr);
  tf::cpu::launch(4, [&] {
    auto a = tf::shard_partition(t);
    auto b = tf::local(t);
    auto c = tf::local(s);
    static_assert(std::is_same_v<decltype(a), decltype(c)>);
    static_assert(std::is_same_v<decltype(b), decltype(c)>);
    static_assert(cute::is_gmem<cute::remove_cvref_t<decltype(a.data())>>::value);
    EXPECT_EQ(a.data(), c.data());
    EXPECT_EQ(b.data(), c.data());
    seen[tf::program_id<TS::cta>()] = cute::raw_pointer_cast(a.data());
  });
  for (int r = 0; r < 4; ++r) EXPECT_EQ(seen[r], buf.data() + 8 * r);
}

TEST(DistributedCuteTensor, RegisterTensorProjectsToAWritableView) {
  // Each CTA holds its row in its own registers: the split mode has stride 0.
  auto rl = cute::make_layout(cute::make_shape(Int<4>{}, Int<8>{}),
                              cute::make_stride(Int<0>{}, Int<1>{}));
  auto mesh = tf::make_mesh<TS::cta>(cute::make_layout(cute::make_shape(Int<4>{})));
  auto sl = tf::make_shard_layout(rl, cute::make_tuple(tf::shard::S<0>{}), mesh);
  std::vector<float> got(32, -1.0f);
  tf::cpu::launch(4, [&] {
    auto frag = tf::make_tensor<float>(sl);
    static_assert(decltype(cute::size(tf::local(frag)))::value == 8);
    auto mine = tf::local(frag);
    for (int j = 0; j < 8; ++j) mine(0, j) = float(tf::program_id<TS::cta>() * 10 + j);
    for (int j = 0; j < 8; ++j) got[tf::program_id<TS::cta>() * 8 + j] = frag.data()[j];
  });
  for (int i = 0; i < 32; ++i) EXPECT_EQ(got[i], float((i / 8) * 10 + i % 8));
}

TEST(DistributedCuteTensor, OpsReadAndWriteTheLocalView) {
  tftest::Random rnd;
  SCOPED_TRACE(rnd.trace());
  auto x = rnd.floats(32);
  std::vector<float> y(32, -1.0f), mean(4, -1.0f);
  auto xt = tf::make_tensor(cute::make_gmem_ptr(x.data()), rows_shard_layout());
  auto yt = tf::make_tensor(cute::make_gmem_ptr(y.data()), rows_shard_layout());
  auto ml = cute::make_layout(cute::make_shape(Int<4>{}, Int<1>{}),
                              cute::make_stride(Int<1>{}, Int<0>{}));
  auto mt = tf::make_tensor(
      cute::make_gmem_ptr(mean.data()),
      tf::make_shard_layout(ml, cute::make_tuple(tf::shard::S<0>{}), rows_shard_layout().mesh));
  tf::cpu::launch(4, [&] {
    tf::ops::binary(tf::ops::mul_op{}, xt, 2.0f, yt);
    tf::ops::reduce<tf::ops::mean_op, cute::seq<1>>(xt, mt);
  });
  for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], 2.0f * x[i]);
  for (int r = 0; r < 4; ++r) {
    double s = 0;
    for (int c = 0; c < 8; ++c) s += x[r * 8 + c];
    EXPECT_NEAR(mean[r], s / 8, 1e-5);
  }
}

TEST(DistributedCuteTensor, WholeTensorCopyBothWays) {
  tftest::Random rnd;
  SCOPED_TRACE(rnd.trace());
  auto x = rnd.floats(32);
  std::vector<float> mid(32, -1.0f), back(32, -1.0f);
  auto xt = tf::make_tensor(cute::make_gmem_ptr(x.data()), rows_shard_layout());
  tf::copy(xt, cute::make_tensor(mid.data(), rows_layout()));  // all 32, not one CTA's row
  EXPECT_EQ(mid, x);
  auto bt = tf::make_tensor(cute::make_gmem_ptr(back.data()), rows_shard_layout());
  tf::copy(cute::make_tensor(mid.data(), rows_layout()), bt);
  EXPECT_EQ(back, x);
}

// ---------------------------------------------------------------- unqualified copy

// Only CTA 2 copies. ops::copy moves CTA 2's row: 8 elements, the other 24 untouched. The
// whole-tensor overload, which argument-dependent lookup used to find first, wrote all 32.
TEST(UnqualifiedCopy, UnderOpsIsTheLocalCopy) {
  auto x = iota(32, 100.0f);
  std::vector<float> y(32, -1.0f);
  auto xs = rows_shard_tensor(x.data());
  auto ys = rows_shard_tensor(y.data());
  tf::cpu::launch(4, [&] {
    if (tf::program_id<TS::cta>() == 2) ops_only::unqualified_copy(xs, ys);
  });
  for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], i / 8 == 2 ? x[i] : -1.0f) << i;
}

TEST(UnqualifiedCopy, UnderOpsShardToRegistersIsTheLocalCopy) {
  auto x = iota(32, 100.0f);
  auto xs = rows_shard_tensor(x.data());
  std::vector<float> got(32, -1.0f);
  tf::cpu::launch(4, [&] {
    auto frag = cute::make_tensor<float>(cute::make_shape(Int<1>{}, Int<8>{}));
    ops_only::unqualified_copy(xs, frag);
    for (int j = 0; j < 8; ++j) got[tf::program_id<TS::cta>() * 8 + j] = frag(0, j);
  });
  EXPECT_EQ(got, x);
}

TEST(UnqualifiedCopy, UnderTilefoundryIsTheWholeTensorCopy) {
  auto x = iota(32, 100.0f);
  std::vector<float> y(32, -1.0f);
  auto xs = rows_shard_tensor(x.data());
  tf_only::unqualified_copy(xs, cute::make_tensor(y.data(), rows_layout()));
  EXPECT_EQ(y, x);
}

}  // namespace

// ShardTensor, local() on split, broadcast and partial layouts (one formula across gmem and rmem),
// shard_partition and the shard-aware copy, on the CPU target.
#include <tilefoundry/runtime.h>

#include <numeric>
#include <vector>

#include "test_util.h"

namespace {

using namespace tilefoundry;
using cute::Int;
using TS = TopologyScope;

template <class T>
std::vector<T> iota_vector(int n) {
  std::vector<T> v(n);
  std::iota(v.begin(), v.end(), T(0));
  return v;
}

TEST(ShardTensor, DataDropsResidencyLayoutIsTheShardLayout) {
  auto buf = iota_vector<float>(8);
  auto layout = cute::make_layout(cute::make_shape(Int<8>{}));
  auto mesh = make_mesh<TS::cta>(cute::make_layout(cute::make_shape(1)));
  auto sl = make_shard_layout(layout, cute::make_tuple(shard::B{}), mesh);
  auto t =
      make_shard_tensor(cute::make_tensor(cute::make_gmem_ptr(buf.data()), layout), layout, sl);
  static_assert(std::is_same_v<decltype(t.data()), float*>);
  static_assert(cute::is_gmem<cute::remove_cvref_t<decltype(t.engine.data())>>::value);
  static_assert(std::is_same_v<decltype(t)::global_layout_type, decltype(layout)>);
  EXPECT_EQ(t.data(), buf.data());
  EXPECT_EQ(&t.layout(), &t.shard_layout);
}

TEST(Local, SplitRowsAcrossCtas) {
  int const rows = 5;
  auto buf = iota_vector<float>(rows * 8);
  auto layout =
      cute::make_layout(cute::make_shape(rows, Int<8>{}), cute::make_stride(Int<8>{}, Int<1>{}));
  auto mesh = make_mesh<TS::cta>(cute::make_layout(cute::make_shape(rows)));
  auto t = make_shard_tensor(cute::make_tensor(cute::make_gmem_ptr(buf.data()), layout), layout,
                             make_shard_layout(layout, cute::make_tuple(shard::S<0>{}), mesh));
  std::vector<std::vector<float>> seen(rows);
  cpu::launch(rows, [&] {
    auto l = local(t);
    static_assert(
        std::is_same_v<decltype(l.shape()), cute::tuple<Int<1>, Int<8>> const&> ||
        std::is_same_v<cute::remove_cvref_t<decltype(l.shape())>, cute::tuple<Int<1>, Int<8>>>);
    static_assert(cute::is_gmem<cute::remove_cvref_t<decltype(l.data())>>::value);
    for (int j = 0; j < 8; ++j) seen[program_id<TS::cta>()].push_back(l(0, j));
  });
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < 8; ++j) EXPECT_EQ(seen[r][j], r * 8 + j);
}

TEST(Local, CyclicSplitIsTheSameFormula) {
  // Global element g = j * 4 + c: the split mode is the inner one (stride 1), so CTA c owns
  // c, c + 4.
  auto buf = iota_vector<float>(8);
  auto layout = cute::make_layout(cute::make_shape(Int<2>{}, Int<4>{}),
                                  cute::make_stride(Int<4>{}, Int<1>{}));
  auto mesh = make_mesh<TS::cta>(cute::make_layout(cute::make_shape(Int<4>{})));
  auto t = make_shard_tensor(cute::make_tensor(buf.data(), layout), layout,
                             make_shard_layout(layout, cute::make_tuple(shard::S<1>{}), mesh));
  std::vector<float> got(8, -1);
  cpu::launch(4, [&] {
    auto l = local(t);
    got[program_id<TS::cta>() * 2 + 0] = l(0, 0);
    got[program_id<TS::cta>() * 2 + 1] = l(1, 0);
  });
  for (int c = 0; c < 4; ++c) {
    EXPECT_EQ(got[c * 2], c);
    EXPECT_EQ(got[c * 2 + 1], c + 4);
  }
}

TEST(Local, TwoMeshAxesSplitTwoModes) {
  auto buf = iota_vector<float>(2 * 3 * 4);
  auto layout = cute::make_layout(cute::make_shape(Int<2>{}, Int<3>{}, Int<4>{}),
                                  cute::make_stride(Int<12>{}, Int<4>{}, Int<1>{}));
  auto mesh = make_mesh<TS::cta>(cute::make_layout(cute::make_shape(Int<2>{}, Int<3>{}),
                                                   cute::make_stride(Int<3>{}, Int<1>{})));
  auto t = make_shard_tensor(
      cute::make_tensor(buf.data(), layout), layout,
      make_shard_layout(layout, cute::make_tuple(shard::S<0>{}, shard::S<1>{}), mesh));
  std::vector<float> first(6, -1), last(6, -1);
  cpu::launch(6, [&] {
    auto l = local(t);
    static_assert(decltype(cute::size(l))::value == 4);
    first[program_id<TS::cta>()] = l(0, 0, 0);
    last[program_id<TS::cta>()] = l(0, 0, 3);
  });
  for (int c = 0; c < 6; ++c) {
    EXPECT_EQ(first[c], (c / 3) * 12 + (c % 3) * 4);
    EXPECT_EQ(last[c], (c / 3) * 12 + (c % 3) * 4 + 3);
  }
}

TEST(Local, BroadcastSeesTheWholeTensor) {
  auto buf = iota_vector<float>(12);
  auto layout = cute::make_layout(cute::make_shape(Int<3>{}, Int<4>{}));
  auto mesh = make_mesh<TS::cta>(cute::make_layout(cute::make_shape(3)));
  auto t = make_shard_tensor(cute::make_tensor(cute::make_gmem_ptr(buf.data()), layout), layout,
                             make_shard_layout(layout, cute::make_tuple(shard::B{}), mesh));
  std::vector<float const*> base(3, nullptr);
  cpu::launch(3, [&] {
    auto l = local(t);
    static_assert(decltype(cute::size(l))::value == 12);
    base[program_id<TS::cta>()] = cute::raw_pointer_cast(l.data());
  });
  for (auto p : base) EXPECT_EQ(p, buf.data());
}

TEST(Local, PartialSeesItsOwnWholeTensor) {
  auto buf = iota_vector<float>(4);
  auto layout = cute::make_layout(cute::make_shape(Int<4>{}));
  auto mesh = make_mesh<TS::cta>(cute::make_layout(cute::make_shape(Int<2>{})));
  auto t =
      make_shard_tensor(cute::make_tensor(buf.data(), layout), layout,
                        make_shard_layout(layout, cute::make_tuple(shard::P<ops::sum_op>{}), mesh));
  cpu::launch(2, [&] {
    auto l = local(t);
    static_assert(decltype(cute::size(l))::value == 4);
    EXPECT_EQ(l.data(), buf.data());
  });
}

TEST(Local, RegisterSplitWithStrideZero) {
  // Each instance holds its piece in its own registers: the split mode has stride 0, so the
  // offset is 0 and the view is the engine's own storage, through the same formula.
  auto frag = cute::make_tensor<float>(cute::make_layout(cute::make_shape(Int<4>{}, Int<3>{}),
                                                         cute::make_stride(Int<0>{}, Int<1>{})));
  auto canonical = frag.layout();
  auto mesh = make_mesh<TS::cta>(cute::make_layout(cute::make_shape(4)));
  auto t = make_shard_tensor(frag, canonical,
                             make_shard_layout(canonical, cute::make_tuple(shard::S<0>{}), mesh));
  cpu::launch(4, [&] {
    auto mine = t;  // a per-CTA register tensor
    auto l = local(mine);
    static_assert(cute::is_rmem<cute::remove_cvref_t<decltype(l.data())>>::value);
    static_assert(decltype(cute::size(l))::value == 3);
    EXPECT_EQ(l.data(), mine.engine.data());
    for (int j = 0; j < 3; ++j) l(0, j) = float(program_id<TS::cta>() * 10 + j);
    EXPECT_EQ(mine.engine(0, 2), program_id<TS::cta>() * 10 + 2);
  });
}

TEST(Local, SplitModeStaysStaticOneForALaunchProvidedMesh) {
  int const n = 7;
  auto layout =
      cute::make_layout(cute::make_shape(n, Int<16>{}), cute::make_stride(Int<16>{}, Int<1>{}));
  auto mesh = make_mesh<TS::cta>(cute::make_layout(cute::make_shape(n)));
  auto sl = make_shard_layout(layout, cute::make_tuple(shard::S<0>{}), mesh);
  using Shape = decltype(shard_layout_local_shape(sl));
  static_assert(std::is_same_v<Shape, cute::tuple<Int<1>, Int<16>>>);
  SUCCEED();
}

TEST(ShardPartition, IsTheLocalView) {
  auto buf = iota_vector<float>(12);
  auto layout = cute::make_layout(cute::make_shape(Int<3>{}, Int<4>{}),
                                  cute::make_stride(Int<4>{}, Int<1>{}));
  auto mesh = make_mesh<TS::cta>(cute::make_layout(cute::make_shape(Int<3>{})));
  auto t = make_shard_tensor(cute::make_tensor(buf.data(), layout), layout,
                             make_shard_layout(layout, cute::make_tuple(shard::S<0>{}), mesh));
  cpu::launch(3, [&] {
    auto a = shard_partition(t);
    auto b = local(t);
    EXPECT_EQ(a.data(), b.data());
    EXPECT_EQ(a.data(), buf.data() + 4 * program_id<TS::cta>());
    static_assert(std::is_same_v<decltype(a.layout()), decltype(b.layout())>);
  });
}

TEST(ShardCopy, FullTensorBothWays) {
  tftest::Random rnd;
  SCOPED_TRACE(rnd.trace());
  auto src = rnd.floats(12);
  std::vector<float> mid(12, -99.0f);
  std::vector<cutlass::half_t> out(12);
  auto layout = cute::make_layout(cute::make_shape(Int<3>{}, Int<4>{}));
  auto mesh = make_mesh<TS::cta>(cute::make_layout(cute::make_shape(Int<3>{})));
  auto sl = make_shard_layout(layout, cute::make_tuple(shard::S<0>{}), mesh);
  auto s = make_shard_tensor(cute::make_tensor(src.data(), layout), layout, sl);
  auto plain = cute::make_tensor(mid.data(), layout);
  tilefoundry::copy(s, plain);  // all 12 elements, not one CTA's row
  for (int i = 0; i < 12; ++i) EXPECT_EQ(mid[i], src[i]);
  auto d = make_shard_tensor(cute::make_tensor(out.data(), layout), layout, sl);
  tilefoundry::copy(plain, d);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(float(out[i]), float(cutlass::half_t(src[i])));
}

}  // namespace

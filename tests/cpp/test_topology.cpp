// Program queries and the Mesh on the CPU target: launch-provided CTA counts, the static thread
// level of extent 1, the axes-to-topology rule and local_index() over two levels.
#include <tilefoundry/runtime.h>

#include <atomic>
#include <vector>

#include "test_util.h"

namespace {

using namespace tilefoundry;
using cute::Int;
using TS = TopologyScope;

TEST(ProgramQueries, HostOutsideLaunchIsOneCta) {
  EXPECT_EQ(program_id<TS::cta>(), 0);
  EXPECT_EQ(program_dim<TS::cta>(), 1);
}

TEST(ProgramQueries, ThreadLevelIsStaticOne) {
  static_assert(std::is_same_v<decltype(program_dim<TS::thread>()), Int<1>>);
  static_assert(std::is_same_v<decltype(program_id<TS::thread>()), Int<0>>);
  static_assert(std::is_same_v<decltype(program_shape<TS::thread>()), cute::Shape<Int<1>>>);
  EXPECT_EQ(int(program_dim<TS::thread>()), 1);
}

TEST(ProgramQueries, LaunchRunsEveryCtaOnceWithTheLaunchProvidedCount) {
  constexpr int n = 37;
  std::vector<std::atomic<int>> seen(n);
  std::vector<int> dims(n, -1), shapes(n, -1);
  cpu::launch(n, [&] {
    int const id = program_id<TS::cta>();
    seen[id].fetch_add(1);
    dims[id] = program_dim<TS::cta>();
    shapes[id] = cute::get<0>(program_shape<TS::cta>());
  });
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(seen[i].load(), 1) << "cta " << i;
    EXPECT_EQ(dims[i], n);
    EXPECT_EQ(shapes[i], n);
  }
  EXPECT_EQ(program_id<TS::cta>(), 0);
  EXPECT_EQ(program_dim<TS::cta>(), 1);
}

using detail::mesh_plan_error;
using detail::plan_mesh;

TEST(MeshRule, GreedyFromTheLastTopology) {
  constexpr auto p = plan_mesh<3, 2>({{4, 2, 32}}, {{8, 32}});
  static_assert(p.error == mesh_plan_error::none);
  static_assert(p.bound[0] == 0 && p.bound[1] == 2 && p.bound[2] == 3);
  constexpr auto q = plan_mesh<4, 2>({{-1, 4, 8, 4}}, {{-1, 32}});  // launch-provided CTAs
  static_assert(q.error == mesh_plan_error::none && q.bound[1] == 2);
  constexpr auto r = plan_mesh<3, 2>({{6, 2, 16}}, {{6, 32}});  // thread takes two axes
  static_assert(r.error == mesh_plan_error::none && r.bound[1] == 1);
  constexpr auto one = plan_mesh<2, 2>({{4, 3}}, {{12, 1}});  // count 1 takes no axis
  static_assert(one.error == mesh_plan_error::none && one.bound[1] == 2 && one.bound[2] == 2);
  SUCCEED();
}

TEST(MeshRule, MismatchesAreReported) {
  static_assert(plan_mesh<2, 2>({{4, 3}}, {{-1, 2}}).error == mesh_plan_error::no_match);
  static_assert(plan_mesh<2, 2>({{4, 32}}, {{4, -1}}).error == mesh_plan_error::dynamic_count);
  static_assert(plan_mesh<2, 2>({{4, -1}}, {{4, 32}}).error == mesh_plan_error::dynamic_extent);
  static_assert(plan_mesh<2, 2>({{4, 2}}, {{6, 2}}).error == mesh_plan_error::first_mismatch);
  SUCCEED();
}

// Mesh coordinates over two levels (cta x thread), through the same grouping Mesh uses, with a
// thread count the CPU target itself does not have.
template <class Layout>
void expect_two_level_coords(Layout const& layout, int ctas, bool col_major) {
  using Grouping = detail::mesh_grouping<decltype(cute::wrap(layout.shape())), -1, 32>;
  static_assert(Grouping::template bound<1> == 1 && Grouping::template bound<2> == 3);
  for (int c = 0; c < ctas; ++c) {
    for (int t = 0; t < 32; ++t) {
      auto crd = Grouping::coord(cute::wrap(layout.shape()), cute::wrap(layout.stride()),
                                 cute::make_tuple(c, t));
      int const w = col_major ? t % 4 : t / 8;
      int const l = col_major ? t / 4 : t % 8;
      ASSERT_EQ(int(cute::get<0>(crd)), c);
      ASSERT_EQ(int(cute::get<1>(crd)), w) << "cta " << c << " thread " << t;
      ASSERT_EQ(int(cute::get<2>(crd)), l) << "cta " << c << " thread " << t;
    }
  }
}

TEST(MeshCoord, TwoLevelsRowMajorCompact) {
  int const ctas = 6;
  expect_two_level_coords(cute::make_layout(cute::make_shape(ctas, Int<4>{}, Int<8>{}),
                                            cute::make_stride(Int<32>{}, Int<8>{}, Int<1>{})),
                          ctas, false);
}

TEST(MeshCoord, TwoLevelsColMajorCompact) {
  int const ctas = 6;
  expect_two_level_coords(cute::make_layout(cute::make_shape(ctas, Int<4>{}, Int<8>{}),
                                            cute::make_stride(Int<1>{}, ctas, 4 * ctas)),
                          ctas, true);
}

TEST(MeshCoord, TwoLevelsPerLevelStrides) {
  int const ctas = 5;
  expect_two_level_coords(cute::make_layout(cute::make_shape(ctas, Int<4>{}, Int<8>{}),
                                            cute::make_stride(Int<1>{}, Int<8>{}, Int<1>{})),
                          ctas, false);
}

TEST(MeshLocalIndex, CtaAndThreadLevelsInsideLaunch) {
  // Two levels on this target: the thread level (count 1) takes no axis, the CTAs take (2, 3).
  auto mesh = make_mesh<TS::cta, TS::thread>(cute::make_layout(
      cute::make_shape(Int<2>{}, Int<3>{}), cute::make_stride(Int<3>{}, Int<1>{})));
  static_assert(decltype(mesh)::plan.bound[1] == 2 && decltype(mesh)::plan.bound[2] == 2);
  std::vector<int> row(6, -1), col(6, -1);
  cpu::launch(6, [&] {
    auto c = mesh.local_index();
    static_assert(cute::tuple_size<decltype(c)>::value == 2);
    row[program_id<TS::cta>()] = cute::get<0>(c);
    col[program_id<TS::cta>()] = cute::get<1>(c);
  });
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(row[i], i / 3);
    EXPECT_EQ(col[i], i % 3);
  }
}

TEST(MeshLocalIndex, LaunchProvidedCtaCount) {
  int const n = 10;
  auto mesh = make_mesh<TS::cta>(cute::make_layout(cute::make_shape(n)));
  std::vector<int> got(n, -1);
  cpu::launch(n, [&] { got[program_id<TS::cta>()] = cute::get<0>(mesh.local_index()); });
  for (int i = 0; i < n; ++i) EXPECT_EQ(got[i], i);
}

}  // namespace

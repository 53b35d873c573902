// Generated code states the thread level the same way on every target (spec 2.2): on the CPU
// target TILEFOUNDRY_STATIC_PROGRAM_SHAPE(thread, 1) is accepted (the target runs one thread per
// CTA); any other extent is refused at compile time (compile_fail.cpp, CASE_THREAD_SHAPE_ON_CPU).
#include <tilefoundry/runtime.h>

TILEFOUNDRY_STATIC_PROGRAM_SHAPE(thread, 1);

#include <vector>

#include "test_util.h"

namespace {

using namespace tilefoundry;
using cute::Int;
using TS = TopologyScope;

TEST(StaticThread, StatingOneOnTheCpuKeepsTheTargetsShape) {
  static_assert(std::is_same_v<decltype(program_shape<TS::thread>()), cute::Shape<Int<1>>>);
  static_assert(std::is_same_v<decltype(program_dim<TS::thread>()), Int<1>>);
  static_assert(detail::static_count<TS::thread>() == 1);
  SUCCEED();
}

TEST(StaticThread, AThreadMeshOfOneRunsInEveryCta) {
  auto mesh = make_mesh<TS::thread>(cute::make_layout(cute::make_shape(Int<1>{})));
  std::vector<int> lane(4, -1);
  cpu::launch(4, [&] { lane[program_id<TS::cta>()] = cute::get<0>(mesh.local_index()); });
  for (int l : lane) EXPECT_EQ(l, 0);
}

}  // namespace

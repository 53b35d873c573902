// A translation unit whose CTA level is static: program_shape / program_dim are compile-time
// constants and the Mesh rule is checked at compile time (spec 2.2).
#include <tilefoundry/runtime.h>

TILEFOUNDRY_STATIC_PROGRAM_SHAPE(cta, 6);

#include <vector>

#include "test_util.h"

namespace {

using namespace tilefoundry;
using cute::Int;
using TS = TopologyScope;

TEST(StaticCta, ShapeAndDimAreConstants) {
  static_assert(std::is_same_v<decltype(program_shape<TS::cta>()), cute::Shape<Int<6>>>);
  static_assert(std::is_same_v<decltype(program_dim<TS::cta>()), Int<6>>);
  static_assert(detail::static_count<TS::cta>() == 6);
  SUCCEED();
}

TEST(StaticCta, IdsStillComeFromTheLaunch) {
  auto mesh = make_mesh<TS::cta, TS::thread>(
      cute::make_layout(cute::make_shape(Int<3>{}, Int<2>{}, Int<1>{}),
                        cute::make_stride(Int<1>{}, Int<3>{}, Int<0>{})));
  std::vector<int> a(6, -1), b(6, -1);
  cpu::launch(6, [&] {
    auto c = mesh.local_index();
    a[program_id<TS::cta>()] = cute::get<0>(c);
    b[program_id<TS::cta>()] = cute::get<1>(c);
  });
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(a[i], i % 3);
    EXPECT_EQ(b[i], i / 3);
  }
}

}  // namespace

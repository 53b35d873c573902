// A row that its mesh does not tile: a ShardLayout padded to whole vectors an instance, with the
// row's length as its bound (shard_layout.h). Each instance's view (local()) holds only its
// existing elements, so the ops neither read nor write the padding and a reduction folds only the
// row. The CPU target runs one thread a CTA, so the instances here are CTAs of a cta-level mesh
// laid out as generated code lays out its thread mesh (warp, lane), run by cpu::launch.
#include <tilefoundry/runtime.h>

#include <cmath>
#include <limits>
#include <vector>

#include "test_util.h"

namespace {

namespace tf = tilefoundry;
namespace ops = tf::ops;
using cute::Int;
using TS = tf::TopologyScope;
using bf16 = cutlass::bfloat16_t;

constexpr int kWarps = 3, kLanes = 4;

// The mesh (warp, lane) over kWarps x kLanes instances, lane fastest.
auto instance_mesh() {
  return tf::make_mesh<TS::cta>(cute::make_layout(cute::make_shape(Int<kWarps>{}, Int<kLanes>{}),
                                                  cute::make_stride(Int<kLanes>{}, Int<1>{})));
}

// A row of V-element vectors over the mesh, N vectors an instance: (V, lane, warp, N) in memory
// (Stride 1) or in each instance's registers (split modes stride 0), bounded by `bound` elements.
template <int V, int N, bool Registers = false, class Bound>
auto row_layout(Bound bound) {
  auto const mesh = instance_mesh();
  auto const attrs = cute::make_tuple(tf::shard::S<2>{}, tf::shard::S<1>{});
  auto const shape = cute::make_shape(Int<V>{}, Int<kLanes>{}, Int<kWarps>{}, Int<N>{});
  if constexpr (Registers) {
    auto const stride = cute::make_stride(Int<1>{}, Int<0>{}, Int<0>{}, Int<V>{});
    return tf::make_shard_layout(cute::make_layout(shape, stride), attrs, mesh, bound);
  } else {
    auto const stride =
        cute::make_stride(Int<1>{}, Int<V>{}, Int<V * kLanes>{}, Int<V * kLanes * kWarps>{});
    return tf::make_shard_layout(cute::make_layout(shape, stride), attrs, mesh, bound);
  }
}

TEST(BoundedRow, EachInstanceHoldsTheRowsElementsOfItsViewAndNoOthers) {
  // Vectors of 2, 5 a thread over 12 threads: 120 elements, every even bound from 0 to 120.
  constexpr int V = 2, N = 5;
  for (int bound = 0; bound <= V * kLanes * kWarps * N; bound += V) {
    auto const sl = row_layout<V, N>(bound);
    for (int w = 0; w < kWarps; ++w) {
      for (int l = 0; l < kLanes; ++l) {
        long expected = 0;
        for (int i = 0; i < N; ++i)
          for (int v = 0; v < V; ++v)
            expected += v + V * l + V * kLanes * w + V * kLanes * kWarps * i < bound;
        EXPECT_EQ(tf::detail::bounded_count(sl, cute::make_tuple(w, l)), expected)
            << "bound " << bound << " warp " << w << " lane " << l;
      }
    }
  }
}

TEST(BoundedRow, ElementwiseOpsWriteTheRowAndLeaveThePaddingAlone) {
  // 37 elements over 12 instances, 4 a thread (48 in the layout): a cast into registers, a
  // multiply by a scalar, a cast back to memory; what lies past the row is never touched.
  constexpr int N = 4, kRow = 37, kPadded = kLanes * kWarps * N;
  tftest::Random rng;
  auto const values = rng.floats(kPadded);
  std::vector<bf16> src(kPadded);
  for (int i = 0; i < kPadded; ++i) src[i] = bf16(values[i]);
  float const sentinel = -12345.0f;
  std::vector<float> dst(kPadded + 8, sentinel);
  auto const gmem = row_layout<1, N>(Int<kRow>{});
  auto const regs = row_layout<1, N, true>(Int<kRow>{});
  tf::cpu::launch(kLanes * kWarps, [&] {
    auto const x = tf::make_tensor(cute::make_gmem_ptr(src.data()), gmem);
    auto const y = tf::make_tensor(cute::make_gmem_ptr(dst.data()), gmem);
    auto r = tf::make_tensor<float>(regs);
    auto twice = tf::make_tensor<float>(regs);
    ops::unary(ops::cast_op{}, x, r);
    ops::binary(ops::mul_op{}, r, 2.0f, twice);
    ops::unary(ops::cast_op{}, twice, y);
  });
  for (int i = 0; i < kRow; ++i)
    EXPECT_EQ(dst[i], 2.0f * float(src[i])) << "element " << i << ", " << rng.trace();
  for (int i = kRow; i < int(dst.size()); ++i) EXPECT_EQ(dst[i], sentinel) << "padding " << i;
}

TEST(BoundedRow, VectorsOfARowEndOnItsLastWholeVector) {
  // Vectors of 4 (a bf16 row of 4 x 25 elements), 3 a thread over 12 threads: 144 in the layout.
  constexpr int V = 4, N = 3, kRow = 100;
  std::vector<float> src(V * kLanes * kWarps * N), dst(src.size(), -1.0f);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = float(i);
  auto const gmem = row_layout<V, N>(kRow);  // a bound known only at run time
  tf::cpu::launch(kLanes * kWarps, [&] {
    auto const x = tf::make_tensor(cute::make_gmem_ptr(src.data()), gmem);
    auto const y = tf::make_tensor(cute::make_gmem_ptr(dst.data()), gmem);
    ops::unary(ops::neg_op{}, x, y);
  });
  for (std::size_t i = 0; i < dst.size(); ++i)
    EXPECT_EQ(dst[i], int(i) < kRow ? -float(i) : -1.0f) << i;
}

TEST(BoundedRow, AReductionFoldsOnlyTheRowAndAMeanDividesByItsLength) {
  // One instance holding a row of 5 in a layout of 8; the padding holds values that would change
  // every result.
  auto const mesh = tf::make_mesh<TS::cta>(cute::make_layout(cute::make_shape(Int<1>{})));
  auto const row = tf::make_shard_layout(cute::make_layout(cute::make_shape(Int<1>{}, Int<8>{}),
                                                           cute::make_stride(Int<1>{}, Int<1>{})),
                                         cute::make_tuple(tf::shard::S<0>{}), mesh, Int<5>{});
  auto const one = tf::make_shard_layout(cute::make_layout(cute::make_shape(Int<1>{}, Int<1>{}),
                                                           cute::make_stride(Int<0>{}, Int<0>{})),
                                         cute::make_tuple(tf::shard::B{}), mesh);
  std::vector<float> x{1, -2, 3, 4, 9, 1000, std::numeric_limits<float>::quiet_NaN(), -1000};
  float sum = 0, mean = 0, largest = 0;
  tf::cpu::launch(1, [&] {
    auto const src = tf::make_tensor(cute::make_gmem_ptr(x.data()), row);
    auto s = tf::make_tensor(cute::make_gmem_ptr(&sum), one);
    auto m = tf::make_tensor(cute::make_gmem_ptr(&mean), one);
    auto l = tf::make_tensor(cute::make_gmem_ptr(&largest), one);
    ops::reduce<ops::sum_op, cute::seq<0, 1>>(src, s);
    ops::reduce<ops::mean_op, cute::seq<0, 1>>(src, m);
    ops::reduce<ops::max_op, cute::seq<0, 1>>(src, l);
  });
  EXPECT_EQ(sum, 15.0f);
  EXPECT_EQ(mean, 3.0f);
  EXPECT_EQ(largest, 9.0f);
}

}  // namespace

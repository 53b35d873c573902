// Each case must be refused at compile time with the message its CTest names (CMakeLists.txt).
// A direct include of a runtime subheader has a generated case per header there.
#if defined(CASE_BOTH_TARGETS)
#define TILEFOUNDRY_TARGET_CUDA
#define TILEFOUNDRY_TARGET_CPU
#elif !defined(CASE_NO_TARGET)
#define TILEFOUNDRY_TARGET_CPU
#endif

#include <tilefoundry/runtime.h>

#if defined(CASE_MESH_MISMATCH)
TILEFOUNDRY_STATIC_PROGRAM_SHAPE(cta, 6);
#elif defined(CASE_THREAD_SHAPE_ON_CPU)
TILEFOUNDRY_STATIC_PROGRAM_SHAPE(thread, 128);
#endif

using namespace tilefoundry;
using TS = TopologyScope;

void refused() {
#if defined(CASE_RAW_POINTER)
  float buf[4];
  auto layout = cute::make_layout(cute::make_shape(cute::Int<4>{}));
  auto mesh = make_mesh<TS::cta>(cute::make_layout(cute::make_shape(1)));
  make_shard_tensor(&buf[0], layout, make_shard_layout(layout, cute::make_tuple(shard::B{}), mesh));
#elif defined(CASE_RAW_POINTER_AGGREGATE)
  float buf[4];
  auto layout = cute::make_layout(cute::make_shape(cute::Int<4>{}));
  auto mesh = make_mesh<TS::cta>(cute::make_layout(cute::make_shape(1)));
  auto sl = make_shard_layout(layout, cute::make_tuple(shard::B{}), mesh);
  ShardTensor<float*, decltype(layout), decltype(sl)> t{&buf[0], sl};
  (void)t;
#elif defined(CASE_NON_TENSOR_ENGINE)
  auto layout = cute::make_layout(cute::make_shape(cute::Int<4>{}));
  auto mesh = make_mesh<TS::cta>(cute::make_layout(cute::make_shape(1)));
  auto sl = make_shard_layout(layout, cute::make_tuple(shard::B{}), mesh);
  ShardTensor<int, decltype(layout), decltype(sl)> t{0, sl};
  (void)t;
#elif defined(CASE_DYNAMIC_ATTR)
  float buf[4];
  auto layout = cute::make_layout(cute::make_shape(cute::Int<4>{}));
  auto mesh = make_mesh<TS::cta>(cute::make_layout(cute::make_shape(1)));
  auto t = make_shard_tensor(cute::make_tensor(&buf[0], layout), layout,
                             make_shard_layout(layout, cute::make_tuple(shard::Dynamic{}), mesh));
  local(t);
#elif defined(CASE_REDUCE_ACROSS_CTAS)
  float x[8], y[1];
  auto xl = cute::make_layout(cute::make_shape(4, cute::Int<2>{}));
  auto yl = cute::make_layout(cute::make_shape(cute::Int<1>{}, cute::Int<1>{}));
  auto mesh = make_mesh<TS::cta>(cute::make_layout(cute::make_shape(4)));
  auto xs = make_shard_tensor(cute::make_tensor(&x[0], xl), xl,
                              make_shard_layout(xl, cute::make_tuple(shard::S<0>{}), mesh));
  auto ys = make_shard_tensor(cute::make_tensor(&y[0], yl), yl,
                              make_shard_layout(yl, cute::make_tuple(shard::B{}), mesh));
  ops::reduce<ops::sum_op, cute::seq<0, 1> >(xs, ys);
#elif defined(CASE_GRID_SYNC_ON_CPU)
  ops::sync<ops::SyncKind::grid>(nullptr);
#elif defined(CASE_COPY_BOTH_NAMESPACES)
  // tilefoundry::copy (whole tensor) and ops::copy (local view) both visible: no silent pick.
  using namespace tilefoundry::ops;
  float x[4], y[4];
  auto layout = cute::make_layout(cute::make_shape(cute::Int<4>{}));
  auto mesh = make_mesh<TS::cta>(cute::make_layout(cute::make_shape(4)));
  auto sl = make_shard_layout(layout, cute::make_tuple(shard::S<0>{}), mesh);
  auto xs = make_shard_tensor(cute::make_tensor(&x[0], layout), layout, sl);
  auto ys = make_shard_tensor(cute::make_tensor(&y[0], layout), layout, sl);
  copy(xs, ys);
#elif defined(CASE_WHOLE_COPY_OF_PLAIN_TENSORS)
  float x[4], y[4];
  tilefoundry::copy(cute::make_tensor(&x[0], cute::make_shape(4)),
                    cute::make_tensor(&y[0], cute::make_shape(4)));
#elif defined(CASE_SHARD_PARTITION_OF_PLAIN_TENSOR)
  float x[4];
  shard_partition(cute::make_tensor(&x[0], cute::make_shape(4)));
#elif defined(CASE_MESH_MISMATCH)
  auto mesh = make_mesh<TS::cta, TS::thread>(
      cute::make_layout(cute::make_shape(cute::Int<4>{}, cute::Int<3>{})));
  (void)mesh;
#endif
}

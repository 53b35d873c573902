// The 16-byte vector path the CUDA target puts behind fill / copy / unary / binary (and the
// reduce's load), run here on the host: its plan (which views it takes, the group size), its
// run-time alignment check (misaligned bases and strides move element by element), and its
// results, which must equal the scalar body's bit for bit. The device build differs only in the
// pair conversions (packed intrinsics there, CuTLASS's scalar conversions here; both round to
// nearest even), which tests/gpu/test_elementwise.cu checks on the GPU.
#include <tilefoundry/runtime.h>
// The CPU target's entries do not use the vector path; this test reaches it after the umbrella.
#include <tilefoundry/runtime/common/ops/vector_groups.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "test_util.h"

namespace {

namespace tf = tilefoundry;
namespace ops = tf::ops;
using cute::Int;
using bf16 = cutlass::bfloat16_t;
using half = cutlass::half_t;
using ops::detail::elementwise_groups;
using ops::detail::group_plan;
using ops::detail::vector_path;

template <class T>
std::vector<T> narrow(std::vector<float> const& v) {
  std::vector<T> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = T(v[i]);
  return out;
}

// 16-byte aligned host storage, so that offsets in elements decide the alignment.
template <class T>
struct Buffer {
  std::vector<std::uint8_t> bytes;
  T* base;
  explicit Buffer(std::size_t n) : bytes(n * sizeof(T) + 32) {
    auto p = reinterpret_cast<std::uintptr_t>(bytes.data());
    base = reinterpret_cast<T*>((p + 15) / 16 * 16);
  }
  template <class Layout>
  auto gmem(Layout const& l, int offset = 0) {
    return cute::make_tensor(cute::make_gmem_ptr(base + offset), l);
  }
};

template <class T>
std::uint16_t bits16(T v) {
  std::uint16_t u;
  std::memcpy(&u, &v, 2);
  return u;
}

// ---------------------------------------------------------------- the plan

template <class T, class L>
using gview =
    decltype(cute::make_tensor(cute::make_gmem_ptr(std::declval<T*>()), std::declval<L>()));
template <class T, class L>
using rview = decltype(cute::make_tensor(std::declval<T*>(), std::declval<L>()));
using Row8 = cute::Layout<cute::Shape<Int<1>, Int<2>, Int<1>, Int<8>>,
                          cute::Stride<Int<0>, Int<2048>, Int<8>, Int<1>>>;
using Reg8 = cute::Layout<cute::Shape<Int<1>, Int<2>, Int<1>, Int<8>>,
                          cute::Stride<Int<0>, Int<8>, Int<0>, Int<1>>>;

TEST(VectorPlan, GroupIsSixteenBytesOfTheNarrowestMemoryOperand) {
  // A thread's two 8-element strips of a bf16 row, into float registers: groups of 8.
  using P = group_plan<rview<float, Reg8>, gview<bf16 const, Row8>>;
  static_assert(P::ok && P::G == 8 && P::groups == 2 && P::mode == 1);
  // float in gmem: groups of 4; bf16 beside float: 8 (16 bytes of bf16, 32 of float).
  using F = group_plan<gview<float, Row8>, gview<float const, Row8>>;
  static_assert(F::ok && F::G == 4 && F::groups == 4);
  using M = group_plan<gview<float, Row8>, gview<bf16 const, Row8>, float>;
  static_assert(M::ok && M::G == 8);
  // Modes of extent 1 are dropped: (2, 8) in registers pairs with (1, 2, 1, 8) in gmem.
  using Flat = cute::Layout<cute::Shape<Int<2>, Int<8>>, cute::Stride<Int<8>, Int<1>>>;
  static_assert(group_plan<rview<float, Flat>, gview<bf16 const, Row8>>::ok);
  SUCCEED();
}

TEST(VectorPlan, RefusesWhatCannotMoveAsAlignedWords) {
  using Six = cute::Layout<cute::Shape<Int<6>>>;  // 12 bytes of bf16: no whole word
  static_assert(!group_plan<gview<bf16, Six>, gview<bf16 const, Six>>::ok);
  using Strided = cute::Layout<cute::Shape<Int<8>>, cute::Stride<Int<2>>>;  // not contiguous
  static_assert(!group_plan<gview<bf16, Strided>, gview<bf16 const, Strided>>::ok);
  using Odd =
      cute::Layout<cute::Shape<Int<3>, Int<8>>, cute::Stride<Int<12>, Int<1>>>;  // rows 24 B apart
  static_assert(!group_plan<gview<bf16, Odd>, gview<bf16 const, Odd>>::ok);
  using Eight = cute::Layout<cute::Shape<Int<8>>>;
  static_assert(!group_plan<gview<int, Eight>, gview<int const, Eight>>::ok);      // no packed type
  static_assert(!group_plan<rview<float, Eight>, rview<float const, Eight>>::ok);  // registers only
  using Dynamic = cute::Layout<cute::Shape<int>>;  // a launch-provided extent
  static_assert(!group_plan<gview<float, Dynamic>, gview<float const, Dynamic>>::ok);
  using Other = cute::Layout<cute::Shape<Int<2>, Int<4>>>;  // same size, other shape
  static_assert(!group_plan<gview<float, Eight>, gview<float const, Other>>::ok);
  SUCCEED();
}

// ---------------------------------------------------------------- results

TEST(VectorPath, Bf16RowIntoFloatRegistersAndBack) {
  tftest::Random rnd;
  SCOPED_TRACE(rnd.trace());
  Buffer<bf16> x(4096), y(4096);
  auto xv = narrow<bf16>(rnd.floats(4096));
  std::copy(xv.begin(), xv.end(), x.base);
  auto storage = cute::make_tensor<float>(Reg8{});
  auto regs = cute::make_tensor(storage.data(), storage.layout());  // the engine takes views
  auto load = [](float v) { return v; };
  ASSERT_TRUE(elementwise_groups(load, regs, x.gmem(Row8{}, 8 * 5)));
  for (int s = 0; s < 2; ++s)
    for (int e = 0; e < 8; ++e) EXPECT_EQ(regs(0, s, 0, e), float(xv[8 * 5 + 2048 * s + e]));
  ASSERT_TRUE(elementwise_groups(load, y.gmem(Row8{}, 8 * 5), regs));
  for (int s = 0; s < 2; ++s)
    for (int e = 0; e < 8; ++e) EXPECT_EQ(float(y.base[8 * 5 + 2048 * s + e]), regs(0, s, 0, e));
}

TEST(VectorPath, MisalignedBasesAndStridesMoveElementByElement) {
  tftest::Random rnd;
  SCOPED_TRACE(rnd.trace());
  Buffer<bf16> x(64), y(64);
  auto xv = narrow<bf16>(rnd.floats(64));
  std::copy(xv.begin(), xv.end(), x.base);
  auto l = cute::make_layout(cute::make_shape(Int<16>{}));
  auto id = [](float v) { return v; };
  EXPECT_TRUE(ops::detail::groups_aligned(y.gmem(l), x.gmem(l)));
  EXPECT_FALSE(ops::detail::groups_aligned(y.gmem(l), x.gmem(l, 1)));  // 2 bytes off
  EXPECT_FALSE(ops::detail::groups_aligned(y.gmem(l, 4), x.gmem(l)));  // 8 bytes off
  // A launch-provided row stride is checked at run time: 24 keeps every row's group aligned, 20
  // does not.
  auto rows = [](int stride) {
    return cute::make_layout(cute::make_shape(Int<2>{}, Int<8>{}),
                             cute::make_stride(stride, Int<1>{}));
  };
  EXPECT_TRUE(ops::detail::groups_aligned(y.gmem(rows(24)), x.gmem(rows(24))));
  EXPECT_FALSE(ops::detail::groups_aligned(y.gmem(rows(20)), x.gmem(rows(24))));
  // Either way the groups move, and move right.
  for (int offset : {1, 3}) {
    std::fill(y.base, y.base + 64, bf16(-1.0f));
    ASSERT_TRUE(elementwise_groups(id, y.gmem(l, offset), x.gmem(l, 2 * offset)));
    for (int i = 0; i < 64; ++i) {
      bool const inside = i >= offset && i < offset + 16;
      EXPECT_EQ(float(y.base[i]), inside ? float(xv[i - offset + 2 * offset]) : -1.0f) << i;
    }
  }
  std::fill(y.base, y.base + 64, bf16(-1.0f));
  ASSERT_TRUE(elementwise_groups(id, y.gmem(rows(20)), x.gmem(rows(24))));
  for (int r = 0; r < 2; ++r)
    for (int e = 0; e < 8; ++e) EXPECT_EQ(float(y.base[20 * r + e]), float(xv[24 * r + e]));
}

// ---------------------------------------------------------------- the alignment promise

TEST(AlignedGmemPtr, PromisesItsAlignmentInItsTypeAndAnOffsetDropsIt) {
  Buffer<bf16> x(64);
  auto p = tf::make_aligned_gmem_ptr<16>(x.base);
  using P = decltype(p);
  static_assert(cute::is_gmem<P>::value, "residency is global memory");
  static_assert(tf::promised_alignment_v<P> == 16);
  static_assert(tf::promised_alignment_v<cute::gmem_ptr<bf16*>> == 0);
  EXPECT_EQ(cute::raw_pointer_cast(p), x.base);
  // An offset may leave the alignment: a plain gmem pointer, promising nothing.
  using Moved = decltype(p + 3);
  static_assert(std::is_same_v<Moved, cute::gmem_ptr<bf16*>>);
  EXPECT_EQ(cute::raw_pointer_cast(p + 3), x.base + 3);
  x.base[5] = bf16(2.5f);
  EXPECT_EQ(float(p[5]), 2.5f);
}

TEST(AlignedSmemPtr, PromisesItsAlignmentAsSharedMemoryAndLocalKeepsIt) {
  // Generated code puts a weight row staged by copy_async in a 16-byte aligned __shared__ array.
  alignas(16) bf16 storage[64];
  auto p = tf::make_aligned_smem_ptr<16>(storage);
  using P = decltype(p);
  static_assert(cute::is_smem<P>::value && !cute::is_gmem<P>::value, "residency is shared memory");
  static_assert(tf::promised_alignment_v<P> == 16);
  static_assert(std::is_same_v<decltype(p + 3), cute::smem_ptr<bf16*>>);
  static_assert(std::is_same_v<decltype(tf::detail::plain_iterator(p)), cute::smem_ptr<bf16*>>);
  EXPECT_EQ(cute::raw_pointer_cast(p + 3), storage + 3);
  auto mesh = tf::make_mesh<tf::TopologyScope::cta>(cute::make_layout(cute::make_shape(Int<4>{})));
  auto strips = cute::make_layout(cute::make_shape(Int<8>{}, Int<4>{}, Int<2>{}),
                                  cute::make_stride(Int<1>{}, Int<8>{}, Int<32>{}));
  auto t =
      tf::make_tensor(p, tf::make_shard_layout(strips, cute::make_tuple(tf::shard::S<1>{}), mesh));
  using Kept = cute::remove_cvref_t<decltype(tf::local(t).data())>;
  static_assert(std::is_same_v<Kept, tf::aligned_smem_ptr<bf16, 16>>);
}

TEST(AlignedGmemPtr, LocalKeepsThePromiseWhereEverySplitStrideIsWholeWords) {
  // A row of 64 bf16 over 4 instances: in strips of 8 (stride 8 elements, 16 bytes) each
  // instance's view keeps the promise; one element each (stride 1, 2 bytes) does not.
  Buffer<bf16> x(64);
  auto xv = narrow<bf16>(tftest::Random().floats(64));
  std::copy(xv.begin(), xv.end(), x.base);
  auto mesh = tf::make_mesh<tf::TopologyScope::cta>(cute::make_layout(cute::make_shape(Int<4>{})));
  auto strips = cute::make_layout(cute::make_shape(Int<8>{}, Int<4>{}, Int<2>{}),
                                  cute::make_stride(Int<1>{}, Int<8>{}, Int<32>{}));
  auto t =
      tf::make_tensor(tf::make_aligned_gmem_ptr<16>(x.base),
                      tf::make_shard_layout(strips, cute::make_tuple(tf::shard::S<1>{}), mesh));
  using Kept = decltype(tf::local(t).data());
  static_assert(tf::promised_alignment_v<Kept> == 16);
  auto single = cute::make_layout(cute::make_shape(Int<4>{}, Int<16>{}),
                                  cute::make_stride(Int<1>{}, Int<4>{}));
  auto u =
      tf::make_tensor(tf::make_aligned_gmem_ptr<16>(x.base),
                      tf::make_shard_layout(single, cute::make_tuple(tf::shard::S<0>{}), mesh));
  using Dropped = decltype(tf::local(u).data());
  static_assert(tf::promised_alignment_v<Dropped> == 0);
  static_assert(cute::is_gmem<cute::remove_cvref_t<Dropped>>::value);
  // Either way each instance reads its own elements, and the promised views move as words.
  std::vector<float> got(64, -1.0f);
  tf::cpu::launch(4, [&] {
    int const c = tf::program_id<tf::TopologyScope::cta>();
    auto l = tf::local(t);
    auto regs = cute::make_tensor<float>(
        cute::make_layout(cute::make_shape(Int<8>{}, Int<1>{}, Int<2>{}),
                          cute::make_stride(Int<1>{}, Int<0>{}, Int<8>{})));
    auto view = cute::make_tensor(regs.data(), regs.layout());
    EXPECT_TRUE(ops::detail::groups_aligned(view, l));
    EXPECT_TRUE(elementwise_groups([](float v) { return v; }, view, l));
    for (int s = 0; s < 2; ++s)
      for (int e = 0; e < 8; ++e) got[32 * s + 8 * c + e] = view(e, 0, s);
    auto k = tf::local(u);
    for (int i = 0; i < 16; ++i) EXPECT_EQ(float(k(0, i)), float(xv[c + 4 * i]));
  });
  for (int i = 0; i < 64; ++i) EXPECT_EQ(got[i], float(xv[i])) << i;
}

template <class T>
void check_apply_matches_scalar(tftest::Random& rnd, int offset) {
  // (4, 16) row-major in gmem, a row broadcast (16), a column broadcast (4, 1), a scalar, and
  // float registers; every entry body with the vector path against the same body without it.
  auto a = narrow<T>(rnd.floats(64));
  auto row = narrow<T>(rnd.floats(16));
  auto col = narrow<T>(rnd.floats(4));
  Buffer<T> ba(80), brow(32), bcol(8), fast(80), slow(80);
  std::copy(a.begin(), a.end(), ba.base + offset);
  std::copy(row.begin(), row.end(), brow.base);
  std::copy(col.begin(), col.end(), bcol.base);
  auto l = cute::make_layout(cute::make_shape(Int<4>{}, Int<16>{}),
                             cute::make_stride(Int<16>{}, Int<1>{}));
  auto ta = ba.gmem(l, offset);
  auto trow = brow.gmem(cute::make_layout(cute::make_shape(Int<16>{})));
  auto tcol = bcol.gmem(cute::make_layout(cute::make_shape(Int<4>{}, Int<1>{})));
  auto tf_ = fast.gmem(l, offset);
  auto ts = slow.gmem(l, offset);
  auto same = [&](char const* what) {
    for (int i = 0; i < 64; ++i) {
      ASSERT_EQ(std::memcmp(&fast.base[offset + i], &slow.base[offset + i], sizeof(T)), 0)
          << what << " element " << i;
    }
  };
  // The aligned views take the vector path (the misaligned ones are refused at run time).
  auto const o = ops::detail::view_of(tf_);
  using Plan = group_plan<decltype(o), decltype(ops::binary_impl::operand(ta, o.shape())),
                          decltype(ops::binary_impl::operand(trow, o.shape()))>;
  static_assert(Plan::ok);
  EXPECT_EQ(ops::detail::groups_aligned(o, ops::binary_impl::operand(ta, o.shape()),
                                        ops::binary_impl::operand(trow, o.shape())),
            offset * sizeof(T) % 16 == 0);
  ops::binary_impl::apply(ops::mul_op{}, ta, trow, tf_, vector_path{});
  ops::binary_impl::apply(ops::mul_op{}, ta, trow, ts);
  same("binary with a row broadcast");
  ops::binary_impl::apply(ops::sub_op{}, ta, tcol, tf_, vector_path{});
  ops::binary_impl::apply(ops::sub_op{}, ta, tcol, ts);
  same("binary with a column broadcast");
  ops::binary_impl::apply(ops::div_op{}, ta, 3.0f, tf_, vector_path{});
  ops::binary_impl::apply(ops::div_op{}, ta, 3.0f, ts);
  same("binary with a scalar");
  auto regs = cute::make_tensor<float>(cute::make_layout(cute::make_shape(Int<4>{}, Int<16>{})));
  ops::unary_impl::apply(ops::silu_op{}, ta, regs, vector_path{});
  ops::binary_impl::apply(ops::add_op{}, regs, ta, tf_, vector_path{});
  auto regs2 = cute::make_tensor<float>(cute::make_layout(cute::make_shape(Int<4>{}, Int<16>{})));
  ops::unary_impl::apply(ops::silu_op{}, ta, regs2);
  ops::binary_impl::apply(ops::add_op{}, regs2, ta, ts);
  same("unary into registers, binary of registers and gmem");
  ops::fill_impl::apply(tf_, 0.1f, vector_path{});
  ops::fill_impl::apply(ts, 0.1f);
  same("fill");
}

TEST(VectorPath, EveryBodyMatchesTheScalarPathBitForBit) {
  tftest::Random rnd;
  SCOPED_TRACE(rnd.trace());
  for (int offset : {0, 1, 4, 8}) {  // 16-byte aligned for every type at 0 and 8, f32 at 4
    SCOPED_TRACE(offset);
    check_apply_matches_scalar<bf16>(rnd, offset);
    check_apply_matches_scalar<half>(rnd, offset);
    check_apply_matches_scalar<float>(rnd, offset);
  }
}

TEST(VectorPath, PackingRoundsToNearestEven) {
  // Halfway cases, NaN and infinities survive the pair conversions as the scalar ones round them.
  float const nan = std::numeric_limits<float>::quiet_NaN();
  float const inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {1.0f + 1.0f / 256,
                          1.0f + 3.0f / 256,
                          -1.0f - 1.0f / 256,
                          65504.0f,
                          70000.0f,
                          nan,
                          inf,
                          -inf,
                          1e-40f,
                          -0.0f,
                          3.14159f,
                          2.5e-8f,
                          0.33333334f,
                          -7.75f,
                          1024.5f,
                          0.0f};
  Buffer<float> x(16);
  Buffer<bf16> b(16);
  Buffer<half> h(16);
  std::copy(v.begin(), v.end(), x.base);
  auto l = cute::make_layout(cute::make_shape(Int<16>{}));
  auto id = [](float f) { return f; };
  ASSERT_TRUE(elementwise_groups(id, b.gmem(l), x.gmem(l)));
  ASSERT_TRUE(elementwise_groups(id, h.gmem(l), x.gmem(l)));
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(bits16(b.base[i]), bits16(bf16(v[i]))) << v[i];
    EXPECT_EQ(bits16(h.base[i]), bits16(half(v[i]))) << v[i];
  }
}

TEST(VectorPath, SmallSourcesInMemoryAreStagedForTheReduce) {
  // The reduce's load through the vector path folds the same values in the same order.
  tftest::Random rnd;
  SCOPED_TRACE(rnd.trace());
  Buffer<bf16> x(64);
  auto xv = narrow<bf16>(rnd.floats(64));
  std::copy(xv.begin(), xv.end(), x.base);
  auto src = x.gmem(cute::make_layout(cute::make_shape(Int<4>{}, Int<16>{}),
                                      cute::make_stride(Int<16>{}, Int<1>{})));
  std::vector<float> fast(4), slow(4);
  auto regs = cute::make_tensor<float>(cute::make_layout(src.shape()));
  ops::unary_impl::apply(ops::identity_op{}, src, regs, vector_path{});
  ops::reduce<ops::sum_op, cute::seq<1>>(
      regs, cute::make_tensor(fast.data(), cute::make_shape(Int<4>{})));
  ops::reduce<ops::sum_op, cute::seq<1>>(
      src, cute::make_tensor(slow.data(), cute::make_shape(Int<4>{})));
  EXPECT_EQ(fast, slow);
}

}  // namespace

// The reduce family's tier trait: which instances must exchange partial results, derived at
// compile time from the (src, dst) shard layouts (spec 3, "Runtime-owned dispatch"; spec 3.5).
//
// Per mesh axis m, the pair (src attr, dst attr) decides what happens along m:
//   (S<k>, S<k'>)  k kept; k' is k's position in dst        nothing: each instance owns its rows
//   (S<k>, B)      k reduced                                 exchange partial results along m
//   (S<k>, P<X>)   k reduced                                 nothing: dst stays partial along m
//   (P<X>, B)                                                exchange: complete the partial value
//   (P<X>, P<Y>), (B, B)                                     nothing
// Anything else (a split of a kept axis turned into a broadcast, a broadcast turned into a
// partial, Dynamic) is refused at compile time. P<X> means the full value is the X-combination
// of the instances' values, so X's combine must be the Op's (sum_op for sum and mean; a mean
// left partial holds contributions already divided by the global count).
//
// Exchange axes of extent 1 are no exchange at all. An exchange axis on the cta level is refused
// ("a reduction whose reduced axis crosses CTA boundaries is not supported"). On the thread level
// an axis is a lane axis when its instances lie in one warp at power-of-two lane distances, a
// warp axis when its stride is a whole number of warps, and both when it runs through whole warps
// at a stride that divides 32 (one axis of 256 threads: shuffles within each warp, then across the
// 8 warps). The tier follows:
//   no exchange -> plain;  lane axes only -> intra_warp;  warp axes only -> cross_warp;
//   both -> intra_cta.
// Plain operands (no ShardLayout) always take the plain tier: each thread reduces what it holds.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/operand.h>
#include <tilefoundry/runtime/common/ops/reduce_ops.h>

namespace tilefoundry {
namespace ops {
namespace detail {

enum class reduce_tier { plain, intra_warp, cross_warp, intra_cta };

template <class Axes>
struct axes_list {
  static_assert(sizeof(Axes) == 0,
                "ops::reduce: Axes is cute::seq<...> or a cute::tuple of cute::Int");
};
template <int... I>
struct axes_list<std::integer_sequence<int, I...>> {
  static constexpr cute::array<int, sizeof...(I)> value{{I...}};
};
template <class... I>
struct axes_list<cute::tuple<I...>> {
  static constexpr cute::array<int, sizeof...(I)> value{{static_cast<int>(I::value)...}};
};
template <auto N>
struct axes_list<cute::C<N>> {
  static constexpr cute::array<int, 1> value{{static_cast<int>(N)}};
};

// Reduced and kept modes of a rank-R operand, both in increasing order.
template <int R, class Axes>
struct axis_split {
  static constexpr auto list = axes_list<Axes>::value;
  static constexpr int normalized(int a) { return a < 0 ? a + R : a; }
  static constexpr bool valid() {
    for (std::size_t i = 0; i < list.size(); ++i) {
      int const a = normalized(list[i]);
      if (a < 0 || a >= R) return false;
      for (std::size_t k = 0; k < i; ++k)
        if (normalized(list[k]) == a) return false;
    }
    return true;
  }
  static_assert(valid(), "ops::reduce: Axes out of range or repeated");
  static constexpr bool is_reduced(int a) {
    for (std::size_t i = 0; i < list.size(); ++i)
      if (normalized(list[i]) == a) return true;
    return false;
  }
  static constexpr int n_reduced = static_cast<int>(list.size());
  static constexpr int n_kept = R - n_reduced;
  static constexpr int nth(bool reduced, int n) {
    for (int a = 0; a < R; ++a)
      if (is_reduced(a) == reduced && n-- == 0) return a;
    return -1;
  }
  // Position of kept axis a among the kept axes.
  static constexpr int kept_position(int a) {
    int p = 0;
    for (int b = 0; b < a; ++b) p += is_reduced(b) ? 0 : 1;
    return p;
  }
  template <std::size_t... I>
  static auto kept_seq_of(std::index_sequence<I...>)
      -> std::integer_sequence<int, nth(false, I)...>;
  template <std::size_t... I>
  static auto reduced_seq_of(std::index_sequence<I...>)
      -> std::integer_sequence<int, nth(true, I)...>;
  using kept = decltype(kept_seq_of(std::make_index_sequence<n_kept>{}));
  using reduced = decltype(reduced_seq_of(std::make_index_sequence<n_reduced>{}));
};

enum class axis_role {
  none,
  exchange,
  dynamic,
  kept_split_lost,
  reduced_split_kept,
  split_mismatch,
  partial_to_split,
  broadcast_changed,
  partial_combine_mismatch,
  partial_of_mean,
};

// Shard attribute, reduced to plain numbers so constexpr code can reason about it.
struct attr_info {
  int split = -1;  // canonical axis for S<k>
  bool broadcast = false;
  bool partial = false;
  int partial_kind = -1;  // combine_kind of P's tag
  bool partial_mean = false;
  bool dynamic = false;
};

template <class A>
constexpr attr_info info_of() {
  attr_info i;
  i.split = split_axis<A>::value;
  i.broadcast = is_broadcast_v<A>;
  i.dynamic = is_dynamic_v<A>;
  if constexpr (is_partial_v<A>) {
    using R = typename partial_reduction<A>::type;
    i.partial = true;
    i.partial_kind = static_cast<int>(reduce_traits<R>::kind);
    i.partial_mean = std::is_same_v<R, mean_op>;
  }
  return i;
}

template <class Attrs, std::size_t... I>
constexpr cute::array<attr_info, sizeof...(I)> infos_of(std::index_sequence<I...>) {
  return {{info_of<cute::remove_cvref_t<cute::tuple_element_t<I, Attrs>>>()...}};
}

template <class Split, bool KeepDim>
constexpr axis_role role_of(attr_info s, attr_info d, int op_kind) {
  if (s.dynamic || d.dynamic) return axis_role::dynamic;
  if (s.partial_mean || d.partial_mean) return axis_role::partial_of_mean;
  if ((s.partial && s.partial_kind != op_kind) || (d.partial && d.partial_kind != op_kind))
    return axis_role::partial_combine_mismatch;
  if (s.split >= 0) {
    bool const reduced = Split::is_reduced(s.split);
    if (!reduced) {
      if (d.split < 0) return axis_role::kept_split_lost;
      int const expect = KeepDim ? s.split : Split::kept_position(s.split);
      return d.split == expect ? axis_role::none : axis_role::split_mismatch;
    }
    if (d.split >= 0) return axis_role::reduced_split_kept;
    return d.broadcast ? axis_role::exchange : axis_role::none;
  }
  if (s.partial) {
    if (d.split >= 0) return axis_role::partial_to_split;
    return d.broadcast ? axis_role::exchange : axis_role::none;
  }
  // s is a broadcast: the value is the same everywhere along m and must stay so.
  return d.broadcast ? axis_role::none : axis_role::broadcast_changed;
}

template <class X>
constexpr long static_or_minus_one() {
  if constexpr (cute::is_static<X>::value) {
    return static_cast<long>(X::value);
  } else {
    return -1;
  }
}

// Static extent and level-relative stride of every mesh axis (-1 where not static).
template <class MeshT, std::size_t... M>
constexpr cute::array<long, sizeof...(M)> mesh_extents(std::index_sequence<M...>) {
  using S = typename MeshT::shape_type;
  return {{static_or_minus_one<cute::remove_cvref_t<cute::tuple_element_t<M, S>>>()...}};
}

template <class MeshT, int L>
constexpr long level_unit() {
  constexpr int b = MeshT::plan.bound[L], e = MeshT::plan.bound[L + 1];
  using U = decltype(group_unit<b, e>(typename MeshT::shape_type{}, typename MeshT::stride_type{},
                                      no_stride_yet{}));
  return static_or_minus_one<U>();
}

template <class MeshT, std::size_t... L>
constexpr cute::array<long, sizeof...(L)> level_units(std::index_sequence<L...>) {
  return {{level_unit<MeshT, static_cast<int>(L)>()...}};
}

template <class MeshT, std::size_t... M>
constexpr cute::array<long, sizeof...(M)> mesh_strides(std::index_sequence<M...>) {
  using D = typename MeshT::stride_type;
  return {{static_or_minus_one<cute::remove_cvref_t<cute::tuple_element_t<M, D>>>()...}};
}

enum class exchange_error { none, crosses_cta, dynamic_geometry, straddles_warp, lane_not_pow2 };

struct exchange_axis {
  int mesh_axis = -1;
  long stride = 0;  // in threads
  long extent = 1;
};

constexpr bool is_pow2(long x) { return x > 0 && (x & (x - 1)) == 0; }

template <class Op, class Axes, class Src, class Dst>
struct reduce_plan {
  static_assert(sizeof(Src) == 0,
                "ops::reduce: src and dst are both distributed (ShardTensors, or tensors whose "
                "layout is a ShardLayout) over one Mesh type, or both plain CuTe tensors");
};

// Plain operands: the thread reduces what it holds.
template <class Op, class Axes, class Src, class Dst>
struct plain_reduce_plan {
  using src_view = decltype(view_of(std::declval<Src const&>()));
  using dst_view = decltype(view_of(std::declval<Dst&>()));
  static constexpr int rank =
      cute::tuple_size<decltype(cute::wrap(std::declval<src_view>().shape()))>::value;
  using split = axis_split<rank, Axes>;
  static constexpr int dst_rank =
      cute::tuple_size<decltype(cute::wrap(std::declval<dst_view>().shape()))>::value;
  static_assert(dst_rank == rank || dst_rank == split::n_kept ||
                    (split::n_kept == 0 && dst_rank == 1),
                "ops::reduce: dst keeps the reduced modes as extent 1, or drops them");
  static constexpr bool keepdim = dst_rank == rank;
  static constexpr reduce_tier tier = reduce_tier::plain;
  static constexpr int thread_count =
      static_cast<int>(static_count<dependent_level<TopologyScope::thread, Src>>());
  static constexpr int n_lane_masks = 0;
  static constexpr int n_warp_axes = 0;
  static constexpr int n_dst_broadcast = 0;
  static constexpr int peer_count = 1;
  template <int I>
  static constexpr int dst_broadcast_axis = -1;
};

// Distributed operands: the plan reads only their shard layouts.
template <class Op, class Axes, class SLay, class SAttrs, class MeshT, class SBound, class DLay,
          class DAttrs, class DBound>
struct reduce_plan<Op, Axes, ShardLayout<SLay, SAttrs, MeshT, SBound>,
                   ShardLayout<DLay, DAttrs, MeshT, DBound>> {
  static_assert(std::is_same_v<DBound, no_bound>,
                "ops::reduce: a reduction's destination is not padded (no bound)");
  static constexpr int rank = cute::tuple_size<decltype(cute::wrap(SLay{}.shape()))>::value;
  static constexpr int dst_rank = cute::tuple_size<decltype(cute::wrap(DLay{}.shape()))>::value;
  using split = axis_split<rank, Axes>;
  static_assert(dst_rank == rank || dst_rank == split::n_kept ||
                    (split::n_kept == 0 && dst_rank == 1),
                "ops::reduce: dst keeps the reduced modes as extent 1, or drops them");
  static constexpr bool keepdim = dst_rank == rank;
  static constexpr int M = MeshT::rank;
  static_assert(int(cute::tuple_size<SAttrs>::value) == M &&
                    int(cute::tuple_size<DAttrs>::value) == M,
                "ops::reduce: one shard attribute per mesh axis");

  static constexpr auto src_info = infos_of<SAttrs>(std::make_index_sequence<M>{});
  static constexpr auto dst_info = infos_of<DAttrs>(std::make_index_sequence<M>{});
  static constexpr int op_kind = static_cast<int>(reduce_traits<Op>::kind);

  static constexpr cute::array<axis_role, M> roles = [] {
    cute::array<axis_role, M> r{};
    for (int m = 0; m < M; ++m) r[m] = role_of<split, keepdim>(src_info[m], dst_info[m], op_kind);
    return r;
  }();
  static constexpr bool any_role(axis_role x) {
    for (int m = 0; m < M; ++m)
      if (roles[m] == x) return true;
    return false;
  }
  static_assert(!any_role(axis_role::dynamic),
                "ops::reduce: a Dynamic shard attribute must be resolved first");
  static_assert(!any_role(axis_role::partial_of_mean),
                "ops::reduce: write a partial mean as P<sum_op> of contributions");
  static_assert(
      !any_role(axis_role::partial_combine_mismatch),
      "ops::reduce: a partial's reduction must combine like Op (P<sum_op> for sum and mean)");
  static_assert(!any_role(axis_role::kept_split_lost),
                "ops::reduce: src splits a kept axis along a mesh axis where dst does not");
  static_assert(!any_role(axis_role::split_mismatch),
                "ops::reduce: src and dst split different axes along one mesh axis");
  static_assert(!any_role(axis_role::reduced_split_kept),
                "ops::reduce: dst cannot be split along a mesh axis that splits a reduced axis");
  static_assert(!any_role(axis_role::partial_to_split),
                "ops::reduce: a partial src cannot become a split dst");
  static_assert(!any_role(axis_role::broadcast_changed),
                "ops::reduce: a broadcast src stays broadcast in dst");

  static constexpr auto extents = mesh_extents<MeshT>(std::make_index_sequence<M>{});
  static constexpr auto strides = mesh_strides<MeshT>(std::make_index_sequence<M>{});
  static constexpr auto units = level_units<MeshT>(std::make_index_sequence<MeshT::levels>{});

  struct exchange_set {
    exchange_error error = exchange_error::none;
    int n_lane_masks = 0;
    cute::array<int, 5> lane_masks{};
    int n_warp_axes = 0;
    cute::array<exchange_axis, M> warp_axes{};
  };

  static constexpr exchange_set exchanges = [] {
    exchange_set x;
    for (int m = 0; m < M; ++m) {
      if (roles[m] != axis_role::exchange || extents[m] == 1) continue;
      int const level = MeshT::level_of_axis(m);
      if (MeshT::topology_list[level] != TopologyScope::thread) {
        x.error = exchange_error::crosses_cta;
        return x;
      }
      if (extents[m] < 0 || strides[m] < 0 || units[level] <= 0) {
        x.error = exchange_error::dynamic_geometry;
        return x;
      }
      long const d = strides[m] / units[level];
      long const e = extents[m];
      if (d * e <= 32 && 32 % (d * e) == 0) {
        if (!is_pow2(e)) {
          x.error = exchange_error::lane_not_pow2;
          return x;
        }
        for (long b = 1; b < e; b <<= 1) x.lane_masks[x.n_lane_masks++] = static_cast<int>(d * b);
      } else if (d % 32 == 0) {
        x.warp_axes[x.n_warp_axes++] = exchange_axis{m, d, e};
      } else if (32 % d == 0 && (d * e) % 32 == 0) {
        // Spans whole warps (256 threads as one axis): lanes within each warp, then the warps.
        for (long b = 1; b < 32 / d; b <<= 1) {
          x.lane_masks[x.n_lane_masks++] = static_cast<int>(d * b);
        }
        x.warp_axes[x.n_warp_axes++] = exchange_axis{m, 32, d * e / 32};
      } else {
        x.error = exchange_error::straddles_warp;
        return x;
      }
    }
    return x;
  }();
  static_assert(
      exchanges.error != exchange_error::crosses_cta,
      "ops::reduce: a reduction whose reduced axis crosses CTA boundaries is not supported");
  static_assert(exchanges.error != exchange_error::dynamic_geometry,
                "ops::reduce: mesh axes reduced across threads need static extents and strides");
  static_assert(exchanges.error != exchange_error::straddles_warp,
                "ops::reduce: a mesh axis reduced across threads must lie within a warp or step by "
                "whole warps");
  static_assert(exchanges.error != exchange_error::lane_not_pow2,
                "ops::reduce: a mesh axis reduced within a warp needs a power-of-two extent");

  // Threads per CTA: the declared thread level (TILEFOUNDRY_STATIC_PROGRAM_SHAPE), else, when the
  // level is launch-provided, the product of the mesh's thread axes (static extents only). The
  // mesh rule gives a launch-provided level every axis left to it, so those axes cover the
  // launched block; generated code launches exactly that many threads.
  static constexpr long mesh_threads = [] {
    long n = 1;
    for (int m = 0; m < M; ++m) {
      if (MeshT::topology_list[MeshT::level_of_axis(m)] != TopologyScope::thread) continue;
      if (extents[m] < 0) return -1L;
      n *= extents[m];
    }
    return n;
  }();
  static constexpr int thread_count =
      static_cast<int>(static_count<dependent_level<TopologyScope::thread, MeshT>>() >= 0
                           ? static_count<dependent_level<TopologyScope::thread, MeshT>>()
                           : mesh_threads);
  static constexpr int n_lane_masks = exchanges.n_lane_masks;
  static constexpr auto lane_masks = exchanges.lane_masks;
  static constexpr int n_warp_axes = exchanges.n_warp_axes;
  static constexpr auto warp_axes = exchanges.warp_axes;
  static constexpr reduce_tier tier = n_lane_masks > 0 ? (n_warp_axes > 0 ? reduce_tier::intra_cta
                                                                          : reduce_tier::intra_warp)
                                                       : (n_warp_axes > 0 ? reduce_tier::cross_warp
                                                                          : reduce_tier::plain);

  // Mesh axes along which dst is a broadcast: in shared storage only their first instance writes.
  static constexpr auto dst_broadcast = [] {
    std::pair<int, cute::array<int, M>> r{};
    for (int m = 0; m < M; ++m)
      if (dst_info[m].broadcast) r.second[r.first++] = m;
    return r;
  }();
  static constexpr int n_dst_broadcast = dst_broadcast.first;
  static constexpr auto dst_broadcast_axes = dst_broadcast.second;

  // Scalar views of the tables above: device code reads only these.
  template <int K>
  static constexpr int lane_mask = lane_masks[K];
  template <int A>
  static constexpr int warp_stride = static_cast<int>(warp_axes[A].stride);
  template <int A>
  static constexpr int warp_extent = static_cast<int>(warp_axes[A].extent);
  template <int I>
  static constexpr int dst_broadcast_axis = dst_broadcast_axes[I];
  static constexpr int peer_count = [] {
    int n = 1;
    for (int a = 0; a < n_warp_axes; ++a) n *= static_cast<int>(warp_axes[a].extent);
    return n;
  }();
  // Thread offset of the p-th instance along the warp axes, from coordinate 0 on all of them.
  template <int P>
  static constexpr int peer_offset = [] {
    int offset = 0, p = P;
    for (int a = 0; a < n_warp_axes; ++a) {
      int const e = static_cast<int>(warp_axes[a].extent);
      offset += (p % e) * static_cast<int>(warp_axes[a].stride);
      p /= e;
    }
    return offset;
  }();
};

// What the plan of a distributed operand is keyed on: its shard layout. A plain operand beside a
// distributed one stays itself, which no specialisation matches (refused above).
template <class T, bool = is_distributed_v<T>>
struct plan_key {
  using type = cute::remove_cvref_t<T>;
};
template <class T>
struct plan_key<T, true> {
  using type = shard_layout_t<T>;
};

template <class Op, class Axes, class Src, class Dst>
using reduce_plan_t = std::conditional_t<
    is_distributed_v<Src> || is_distributed_v<Dst>,
    reduce_plan<Op, Axes, typename plan_key<Src>::type, typename plan_key<Dst>::type>,
    plain_reduce_plan<Op, Axes, Src, Dst>>;

}  // namespace detail
}  // namespace ops
}  // namespace tilefoundry

// ops::reduce on the CUDA target. The tier comes from the operand shard layouts through
// reduce_plan (common/ops/reduce_plan.h); this file holds how each tier exchanges partials:
//   plain       each thread folds what it holds
//   intra_warp  + butterfly shuffles over the lane axes (no shared memory)
//   cross_warp  + partials through the shared-memory workspace, one slot per thread
//   intra_cta   + shuffles over the lane axes first, then the workspace across warps
// Every thread of the CTA must make the call (the exchanges are collective), as SPMD generated
// code does. The workspace (reduce_workspace.h) is either a shared-memory tensor of size(local
// dst) x threads-per-CTA accumulators (float for 16-bit and float data), exchanged through with
// two barriers and free again after the call, or a reduce_workspace over twice that, with one
// barrier per call. After its barrier every thread combines its peers' partials itself, in one
// fixed order, so every thread holds the same result bit for bit.
//
// A small static source in gmem or smem is first copied into registers through the 16-byte
// vector path (stage_in_registers), so a bf16 row is read 8 elements per load, not one.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/split_reduce.h>
#include <tilefoundry/runtime/common/ops/reduce_thread.h>
#include <tilefoundry/runtime/common/ops/reduce_workspace.h>
#include <tilefoundry/runtime/common/ops/unary_impl.h>
#include <tilefoundry/runtime/common/ops/vector_groups.h>

namespace tilefoundry {
namespace ops {
namespace detail {

template <class Op, class Plan, int K = 0, class Acc>
__device__ __forceinline__ Acc shuffle_lanes(Acc acc) {
  if constexpr (K < Plan::n_lane_masks) {
    constexpr int mask = Plan::template lane_mask<K>;
    acc = reduce_traits<Op>::combine(acc, __shfl_xor_sync(0xffffffffu, acc, mask));
    return shuffle_lanes<Op, Plan, K + 1>(acc);
  } else {
    return acc;
  }
}

// The thread at coordinate 0 on every warp axis of this thread's exchange group.
template <class Plan, int A = 0>
__device__ __forceinline__ int warp_group_base(int tid) {
  if constexpr (A < Plan::n_warp_axes) {
    constexpr int d = Plan::template warp_stride<A>;
    constexpr int e = Plan::template warp_extent<A>;
    return warp_group_base<Plan, A + 1>(tid) - ((tid / d) % e) * d;
  } else {
    return tid;
  }
}

template <class Op, class Plan, class Acc, class W, int... P>
__device__ __forceinline__ Acc combine_peers(W const& w, int slot,
                                             std::integer_sequence<int, P...>) {
  Acc acc = reduce_traits<Op>::template identity<Acc>();
  ((acc = reduce_traits<Op>::combine(acc, w(slot + Plan::template peer_offset<P>))), ...);
  return acc;
}

inline constexpr int kMaxStagedReduce = 64;  // elements per thread staged in registers

struct stage_in_registers {
  template <class View>
  __device__ __forceinline__ auto operator()(View const& v) const {
    using T = value_t<View>;
    using It = cute::remove_cvref_t<decltype(v.data())>;
    using Shape = cute::remove_cvref_t<decltype(v.shape())>;
    if constexpr (!cute::is_rmem<It>::value && cute::is_static<Shape>::value && is_packed_v<T>) {
      if constexpr (cute::size(Shape{}) <= kMaxStagedReduce) {
        auto r = cute::make_tensor<float>(cute::make_layout(Shape{}));
        unary_impl::apply(identity_op{}, v, r, vector_path{});
        return r;
      } else {
        return v;
      }
    } else {
      return v;
    }
  }
};

template <class Op, class Axes, class Src, class Dst>
__device__ void reduce_warp_tier(Src const& src, Dst&& dst) {
  using Plan = reduce_plan_t<Op, Axes, Src, Dst>;
  reduce_in_registers<Op, Axes>(src, dst, stage_in_registers{},
                                [](auto acc) { return shuffle_lanes<Op, Plan>(acc); });
}

// The shared-memory view a reduce exchanges through, and the offset of the slots it uses: the
// whole tensor (two barriers) or the half a reduce_workspace hands out (one barrier).
template <class Ws>
__device__ __forceinline__ auto exchange_storage(Ws& ws) {
  if constexpr (is_reduce_workspace_v<Ws>) {
    return view_of(ws.storage);
  } else {
    return view_of(ws);
  }
}

template <class Op, class Axes, class Src, class Dst, class Ws>
__device__ void reduce_smem_tier(Src const& src, Dst&& dst, Ws&& ws) {
  using Plan = reduce_plan_t<Op, Axes, Src, Dst>;
  static_assert(!std::is_same_v<cute::remove_cvref_t<Ws>, no_workspace>,
                "ops::reduce: this reduction crosses warps; pass a shared-memory workspace");
  constexpr bool double_buffered = is_reduce_workspace_v<Ws>;
  auto const view = view_of(src);
  auto const d = view_of(dst);
  auto const w = exchange_storage(ws);
  check_sizes<Plan, decltype(view), decltype(d)>();
  using Acc = compute_t<value_t<decltype(view)>>;
  using D = value_t<decltype(d)>;
  static_assert(cute::is_smem<cute::remove_cvref_t<decltype(w.data())>>::value,
                "ops::reduce: the workspace must be a shared-memory tensor (make_smem_ptr)");
  static_assert(std::is_same_v<value_t<decltype(w)>, Acc>,
                "ops::reduce: the workspace holds the accumulator type (float for 16-bit data)");
  constexpr int threads = Plan::thread_count;
  static_assert(threads > 0, "ops::reduce: a cross-warp reduction needs a static thread count");
  auto const dl = dst_kept_layout<Plan>(d);
  using Outputs = decltype(cute::size(dl));
  static_assert(cute::is_static<Outputs>::value,
                "ops::reduce: a cross-warp reduction needs a static local dst size");
  constexpr int n = Outputs::value;
  using WsSize = decltype(cute::size(w));
  if constexpr (cute::is_static<WsSize>::value) {
    static_assert(WsSize::value >= (double_buffered ? 2 : 1) * n * threads,
                  "ops::reduce: workspace smaller than size(local dst) x threads (twice that "
                  "for a reduce_workspace)");
  }
  auto const& s = stage_in_registers{}(view);
  auto const count = reduced_count_of<typename Plan::split>(src);
  bool const store =
      stores_result<Plan, decltype(d)>(dst, std::make_index_sequence<Plan::n_dst_broadcast>{});
  int const tid = program_id<TopologyScope::thread>();
  int offset = 0;
  if constexpr (double_buffered) {
    offset = ws.half * int(cute::size(w) / 2);
    ws.half ^= 1;
  }

  Acc part[n];
  CUTE_UNROLL
  for (int j = 0; j < n; ++j) {
    part[j] = shuffle_lanes<Op, Plan>(fold_local<Op, Acc, typename Plan::split>(s, j));
  }
  CUTE_UNROLL
  for (int j = 0; j < n; ++j) w(offset + j * threads + tid) = part[j];
  __syncthreads();
  int const base = offset + warp_group_base<Plan>(tid);
  CUTE_UNROLL
  for (int j = 0; j < n; ++j) {
    part[j] = combine_peers<Op, Plan, Acc>(w, j * threads + base,
                                           std::make_integer_sequence<int, Plan::peer_count>{});
  }
  if constexpr (!double_buffered) __syncthreads();
  if (store) {
    CUTE_UNROLL
    for (int j = 0; j < n; ++j) d.data()[dl(j)] = convert<D>(finish<Op>(part[j], count));
  }
}

}  // namespace detail

/**
 * @brief Reduce src into dst along Axes.
 * @tparam Op compile-time combine tag (sum_op, mean_op, max_op, min_op, absmax_op)
 * @tparam Axes compile-time reduced logical axes (cute::seq<...>)
 * @param src source operand; sharded operands carry ShardLayout
 * @param dst destination operand; sharded operands carry ShardLayout
 * @param ws optional shared-memory workspace; no_workspace keeps the reduce within one warp; a
 *        reduce_workspace (make_reduce_workspace) costs one barrier per call, a plain
 *        shared-memory tensor two
 */
template <class Op, class Axes, class Src, class Dst, class Ws = no_workspace>
__device__ void reduce(Src const& src, Dst&& dst, Ws&& ws = {}) {
  using Plan = detail::reduce_plan_t<Op, Axes, Src, Dst>;
  static_assert(!detail::is_reduce_workspace_v<Ws> || std::is_lvalue_reference_v<Ws>,
                "ops::reduce: pass a reduce_workspace as a named variable, so that the next "
                "reduce sees which half this one used");
  if constexpr (Plan::tier == detail::reduce_tier::plain) {
    detail::reduce_plain_tier<Op, Axes>(src, dst, detail::stage_in_registers{});
  } else if constexpr (Plan::tier == detail::reduce_tier::intra_warp) {
    detail::reduce_warp_tier<Op, Axes>(src, dst);
  } else {
    detail::reduce_smem_tier<Op, Axes>(src, dst, ws);
  }
}

/**
 * @brief The split form's first step: each row's part of one CTA's tile of rows too long for a CTA
 *        (the reductions fused after the matmul computing the tile), for every reduction given,
 *        in one pass over the tile (split_reduce.h).
 * @param tile the CTA's tile of the rows, M x T
 * @param col0 the tile's first column in the row (an arg-reduction's positions count from it)
 * @param parts part_of<Op>(values[, positions]) of each reduction
 */
template <class Tile, class... Parts>
__device__ void reduce_parts(Tile const& tile, int64_t col0, Parts const&... parts) {
  split_reduce::parts(tile, col0, parts...);
}

/**
 * @brief The split form's second step: each row's result of every reduction given, from every
 *        CTA's part of the row, in one pass over the parts (one CTA runs it).
 * @param count the rows' length (a mean divides by it)
 * @param merges merge_of<Op>(values[, positions], out) of each reduction, their parts S x M alike
 */
template <class... Merges>
__device__ void reduce_merges(int64_t count, Merges const&... merges) {
  split_reduce::merges(count, merges...);
}

}  // namespace ops
}  // namespace tilefoundry

// index_add_impl::apply: the body of ops::index_add, one row of torch.index_add's result: the row
// of x at position `at` along the indexed axis, plus alpha times every row of the source whose
// index names `at`, added in the index's order and rounded to the result's type after each add (as
// torch's index_add on the CPU adds one row at a time). Both targets' entries run it. Each output
// row gathers its own rows, so no two CTAs write one element and the sums do not depend on timing.
// The CTA's threads share the columns.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/numeric.h>
#include <tilefoundry/runtime/common/topology.h>

#include <cstdint>

namespace tilefoundry {
namespace ops {
namespace index_add_impl {

/// out(d) = x(d) + alpha * src(i, d) over every i < size<0>(src) with index(i) == at, in order, for
/// every d < size(out). An index outside [0, extent) stops the kernel (detail::index_in; the CPU
/// entry refuses it before).
template <class X, class Src, class Index, class Alpha, class Out>
TILEFOUNDRY_DEVICE void apply(X const& x, Src const& src, Index const& index, Alpha alpha,
                              Out&& out, int64_t at, int64_t extent) {
  using T = cute::remove_cvref_t<decltype(out(0))>;
  using C = detail::compute_t<T>;
  int64_t const rows = int64_t(cute::size<0>(src));
  int64_t const cols = int64_t(cute::size(out));
  int64_t const threads =
      int64_t(program_dim<detail::dependent_level<TopologyScope::thread, Out>>());
  int64_t const first = int64_t(program_id<detail::dependent_level<TopologyScope::thread, Out>>());
  C const a = detail::convert<C>(alpha);
  // The thread's columns start as x's; the index is read once, and each source row it names added
  // into them (the same adds, in the same order, as column by column: the index read once, not once
  // a column).
  for (int64_t d = first; d < cols; d += threads) out(d) = detail::convert<T>(x(d));
  for (int64_t i = 0; i < rows; ++i) {
    int64_t const p =
        detail::index_in(int64_t(index(i)), extent, "index", "positions along the indexed axis");
    if (p != at) continue;
    for (int64_t d = first; d < cols; d += threads) {
      out(d) =
          detail::convert<T>(detail::to_compute(T(out(d))) + a * detail::to_compute(src(i, d)));
    }
  }
}

}  // namespace index_add_impl
}  // namespace ops
}  // namespace tilefoundry

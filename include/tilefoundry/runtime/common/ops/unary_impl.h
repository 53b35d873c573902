// unary_impl::Unary<Op>: the one elementwise skeleton every unary-family op runs through, and
// unary_impl::apply, the body both targets' ops::unary (and the CPU target's ops::copy) run.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/fast_path.h>
#include <tilefoundry/runtime/common/ops/operand.h>
#include <tilefoundry/runtime/common/ops/packed.h>
#include <tilefoundry/runtime/common/ops/unary_ops.h>

namespace tilefoundry {
namespace ops {
namespace unary_impl {

// The elementwise function: op on the compute type (float for 16-bit storage).
template <class Op>
struct on_compute {
  Op const& op;
  template <class X>
  TILEFOUNDRY_DEVICE auto operator()(X const& x) const {
    return op(detail::to_compute(x));
  }
};

template <class Op>
struct Unary {
  // src and dst are views of equal size; elements pair up by their 1-D (colexicographic) index.
  template <class Src, class Dst>
  static TILEFOUNDRY_DEVICE void run(Op const& op, Src const& src, Dst const& dst) {
    using D = detail::value_t<Dst>;
    static_assert(!std::is_const_v<std::remove_reference_t<decltype(*dst.data())>>,
                  "ops::unary: the destination is read-only");
    constexpr bool counted = std::is_base_of_v<copy_n_op, Op>;
    if constexpr (cute::is_static<decltype(cute::size(src))>::value &&
                  cute::is_static<decltype(cute::size(dst))>::value) {
      static_assert(decltype(cute::size(src))::value == decltype(cute::size(dst))::value,
                    "ops::unary: source and destination sizes differ");
    }
    on_compute<Op> const f{op};
    int const n = static_cast<int>(cute::size(dst));
    if constexpr (counted) {
      CUTE_UNROLL
      for (int i = 0; i < n; ++i) {
        if (i >= op.n) break;
        dst(i) = detail::convert<D>(f(src(i)));
      }
    } else {
      detail::store_converted<D>(
          n, [&](int i) -> decltype(auto) { return dst(i); }, [&](int i) { return f(src(i)); });
    }
  }
};

// The entry's operands may be distributed; the skeleton reads views. A counted copy (copy_n_op)
// stops part way, so it never takes the fast path.
template <class Op, class Src, class Dst, class Fast = detail::no_fast_path>
TILEFOUNDRY_DEVICE void apply(Op const& op, Src const& src, Dst&& dst, Fast const& fast = {}) {
  auto const s = detail::view_of(src);
  auto const d = detail::view_of(dst);
  if constexpr (!std::is_base_of_v<copy_n_op, Op>) {
    if (fast(on_compute<Op>{op}, d, s)) return;
  }
  Unary<Op>::run(op, s, d);
}

}  // namespace unary_impl
}  // namespace ops
}  // namespace tilefoundry

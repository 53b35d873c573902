// tilefoundry::copy (spec 2.8): the full tensor between a distributed tensor (a ShardTensor, or a
// cute::Tensor whose layout is a ShardLayout) and a plain one. "Full" means the whole engine, not
// this instance's local() view; elements pair up by their 1-D index and convert to the
// destination's element type.
//
// tilefoundry::copy is a function object, not a set of function templates, so that
// argument-dependent lookup never finds it: an unqualified copy(a, b) on ShardTensors under
// `using namespace tilefoundry::ops` means ops::copy, which copies this instance's local views,
// and an overload found through the arguments' namespace would silently copy whole tensors
// instead (it is the better match for a ShardTensor). Called as tilefoundry::copy(...), or
// unqualified under `using namespace tilefoundry`, it is exactly the spec's entry; with both
// namespaces open, an unqualified copy is ambiguous and does not compile.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/distributed.h>
#include <tilefoundry/runtime/common/numeric.h>

namespace tilefoundry {
namespace detail {

template <class S, class D>
CUTE_HOST_DEVICE void copy_full(S const& src, D&& dst) {
  using SizeS = decltype(cute::size(src));
  using SizeD = decltype(cute::size(dst));
  if constexpr (cute::is_static<SizeS>::value && cute::is_static<SizeD>::value) {
    static_assert(SizeS::value == SizeD::value, "tilefoundry::copy: sizes differ");
  }
  using V = value_t<D>;
  for (int i = 0; i < int(cute::size(dst)); ++i) dst(i) = convert<V>(src(i));
}

struct whole_tensor_copy {
  /**
   * @brief Copy the full tensor, shard -> plain, plain -> shard (or shard -> shard).
   * @param src the source: a ShardTensor, a distributed cute tensor or a plain cute tensor
   * @param dst the destination, likewise; at least one of the two is distributed
   */
  template <class Src, class Dst>
  CUTE_HOST_DEVICE void operator()(Src const& src, Dst&& dst) const {
    static_assert(is_distributed_v<Src> || is_distributed_v<Dst>,
                  "tilefoundry::copy copies a whole distributed tensor (a ShardTensor, or a "
                  "tensor whose layout is a ShardLayout) to or from a plain one; between two "
                  "plain tensors call ops::copy or cute::copy");
    copy_full(whole_of(src), whole_of(dst));
  }
};

}  // namespace detail

/// The full-tensor copy between a distributed tensor and a plain one (spec 2.8).
TILEFOUNDRY_GLOBAL_CONSTANT detail::whole_tensor_copy copy{};

}  // namespace tilefoundry

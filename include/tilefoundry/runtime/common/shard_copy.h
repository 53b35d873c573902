// tilefoundry::copy (spec 2.8): the full tensor between a ShardTensor and a plain tensor. "Full"
// means the shard tensor's whole engine, not this instance's local() view; elements pair up by
// their 1-D index and convert to the destination's element type.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/numeric.h>
#include <tilefoundry/runtime/common/shard_tensor.h>

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

}  // namespace detail

/**
 * @brief Copy the full tensor, shard -> plain.
 * @param src the shard-tensor source
 * @param dst the plain destination tensor
 */
template <class T, class GL, class SL, class DT, class = std::enable_if_t<!is_shard_tensor_v<DT>>>
CUTE_HOST_DEVICE void copy(ShardTensor<T, GL, SL> const& src, DT&& dst) {
  detail::copy_full(src.engine, dst);
}

/**
 * @brief Copy the full tensor, plain -> shard.
 * @param src the plain source tensor
 * @param dst the shard-tensor destination
 */
template <class ST, class T, class GL, class SL, class = std::enable_if_t<!is_shard_tensor_v<ST>>>
CUTE_HOST_DEVICE void copy(ST const& src, ShardTensor<T, GL, SL>& dst) {
  detail::copy_full(src, dst.engine);
}

/// Shard -> shard, so that two shard tensors are not an ambiguous call.
template <class T, class GL, class SL, class U, class GM, class SM>
CUTE_HOST_DEVICE void copy(ShardTensor<T, GL, SL> const& src, ShardTensor<U, GM, SM>& dst) {
  detail::copy_full(src.engine, dst.engine);
}

}  // namespace tilefoundry

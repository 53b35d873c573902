// How an op entry reads its operands: a distributed tensor (a ShardTensor, or a cute::Tensor whose
// layout is a ShardLayout) through the view this instance owns (local()), a plain CuTe tensor as
// a non-owning view of itself. Views keep the iterator, so the residency tag (gmem / smem / rmem)
// survives into the op.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/distributed.h>
#include <tilefoundry/runtime/common/local.h>
#include <tilefoundry/runtime/common/numeric.h>

namespace tilefoundry {
namespace ops {
namespace detail {

// The ops' internals build on the runtime's own (shard traits, mesh plans, conversions).
using namespace ::tilefoundry::detail;

template <class T>
CUTE_HOST_DEVICE auto view_of(T&& t) {
  if constexpr (is_distributed_v<T>) {
    return local(t);
  } else {
    static_assert(cute::is_tensor<cute::remove_cvref_t<T>>::value,
                  "tilefoundry::ops: operands are CuTe tensors or ShardTensors");
    return cute::make_tensor(t.data(), t.layout());
  }
}

template <class T>
constexpr bool is_tensor_operand_v =
    is_distributed_v<T> || cute::is_tensor<cute::remove_cvref_t<T>>::value;

}  // namespace detail
}  // namespace ops
}  // namespace tilefoundry

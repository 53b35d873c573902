// Shorthands generated code declares its buffers with: a ShardTensor over memory that exists (a
// parameter in gmem, a CTA's smem, a host scratch array), and a ShardTensor owning the registers of
// one instance's part. Both are views in the spec's sense (spec 3: CUTE_HOST_DEVICE).
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/local.h>
#include <tilefoundry/runtime/common/shard_tensor.h>

namespace tilefoundry {

/// A ShardTensor viewing the memory at `iterator` (make_gmem_ptr(p), make_smem_ptr(p), or a plain
/// pointer to host scratch) through the shard layout `sl`: its canonical layout addresses the
/// memory, local() picks this instance's part.
template <class Iterator, class SL>
CUTE_HOST_DEVICE auto make_shard_view(Iterator iterator, SL const& sl) {
  static_assert(is_shard_layout<SL>::value, "make_shard_view: sl must be a ShardLayout");
  return make_shard_tensor(cute::make_tensor(iterator, sl.layout), sl.layout, sl);
}

/// A ShardTensor whose engine is a register array holding this instance's part of `sl`: the
/// split modes of an rmem shard layout have stride 0, so every instance stores its part at the
/// same local offsets. The local shape must be static (registers have a size known at compile time).
template <class T, class SL>
CUTE_HOST_DEVICE auto make_rmem_shard_tensor(SL const& sl) {
  static_assert(is_shard_layout<SL>::value, "make_rmem_shard_tensor: sl must be a ShardLayout");
  auto const local = cute::make_layout(shard_layout_local_shape(sl), cute::wrap(sl.layout.stride()));
  static_assert(cute::is_static<decltype(local)>::value,
                "make_rmem_shard_tensor: a register tensor needs a static local layout");
  return make_shard_tensor(cute::make_tensor<T>(local), sl.layout, sl);
}

}  // namespace tilefoundry

// What has distributed semantics: a ShardTensor (spec 2.6), or a cute::Tensor whose layout is a
// ShardLayout (spec 2.9). Both are read through the same accessors (the shard layout, the base
// iterator this instance holds, the whole tensor), so that local(), shard_partition, the ops and
// tilefoundry::copy take either, and treat them alike.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/local.h>
#include <tilefoundry/runtime/common/shard_layout.h>
#include <tilefoundry/runtime/common/shard_tensor.h>

namespace tilefoundry {

template <class T>
struct is_distributed_tensor : std::false_type {};
template <class E, class GL, class SL>
struct is_distributed_tensor<ShardTensor<E, GL, SL>> : std::true_type {};
template <class E, class L, class A, class M, class B>
struct is_distributed_tensor<cute::Tensor<E, ShardLayout<L, A, M, B>>> : std::true_type {};

/// A ShardTensor, or a cute::Tensor whose layout is a ShardLayout.
template <class T>
constexpr bool is_distributed_v = is_distributed_tensor<cute::remove_cvref_t<T>>::value;

/// A view whose layout is a ShardLayout (spec 2.9), spelled like cute::make_tensor: iterator is
/// what the current instance holds (make_gmem_ptr / make_smem_ptr tag its residency), sl the
/// canonical layout over it.
template <class Iterator, class L, class A, class M, class B>
CUTE_HOST_DEVICE auto make_tensor(Iterator const& iterator, ShardLayout<L, A, M, B> const& sl) {
  return cute::Tensor<cute::ViewEngine<Iterator>, ShardLayout<L, A, M, B>>{{iterator}, sl};
}

/// A register tensor whose layout is a ShardLayout: each instance owns the storage its local view
/// addresses (a split mode of a register tensor has stride 0), so the canonical layout may keep a
/// launch-provided extent on a split mode. A bounded layout's storage holds its padding too. The
/// storage is zeroed where it lives: built as a temporary and copied into the tensor, a CPU
/// kernel's 4096-float row buffer cost a 16 KiB memset and a 16 KiB memcpy a call (a bf16 softmax
/// over 2048 x 4096 rows on two AVX2 cores: 9.7-10.2 ms with them, 7.7-8.1 without).
template <class T, class L, class A, class M, class B>
CUTE_HOST_DEVICE auto make_tensor(ShardLayout<L, A, M, B> const& sl) {
  using Local = decltype(cute::make_layout(shard_layout_local_shape(sl), sl.layout.stride()));
  static_assert(cute::is_static<Local>::value,
                "make_tensor<T>(ShardLayout): a register tensor needs a static local layout");
  constexpr int kSize = decltype(cute::cosize(Local{}))::value;
  cute::Tensor<cute::ArrayEngine<T, kSize>, ShardLayout<L, A, M, B>> t;  // storage as yet unset
  cute::get<0>(t.rep_) = sl;  // the layout: CuTe's own tensor keeps it in rep_ beside the engine
  auto const data = t.data();
  for (int i = 0; i < kSize; ++i) data[i] = T{};
  return t;
}

namespace detail {

/// The ShardLayout that describes how t is spread over its mesh.
template <class T>
CUTE_HOST_DEVICE decltype(auto) shard_layout_of(T const& t) {
  static_assert(is_distributed_v<T>, "shard_layout_of: t has no ShardLayout");
  if constexpr (is_shard_tensor_v<T>) {
    return (t.shard_layout);
  } else {
    return t.layout();
  }
}

template <class T>
using shard_layout_t = cute::remove_cvref_t<decltype(shard_layout_of(std::declval<T const&>()))>;

/// The iterator the current instance holds (residency kept); writable when t is.
template <class T>
CUTE_HOST_DEVICE auto base_of(T&& t) {
  if constexpr (is_shard_tensor_v<T>) {
    return t.engine.data();
  } else {
    return t.data();
  }
}

/// The full tensor, not one instance's view: a ShardTensor's engine, or a distributed cute
/// tensor's base iterator under its canonical layout. A plain tensor is its own full tensor.
template <class T>
CUTE_HOST_DEVICE decltype(auto) whole_of(T&& t) {
  if constexpr (is_shard_tensor_v<T>) {
    return (t.engine);
  } else if constexpr (is_distributed_v<T>) {
    return cute::make_tensor(t.data(), t.layout().layout);
  } else {
    return cute::make_tensor(t.data(), t.layout());
  }
}

}  // namespace detail
}  // namespace tilefoundry

// ShardTensor (spec 2.6, 2.7): a CuTe tensor or view paired with its runtime shard layout.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/shard_layout.h>

namespace tilefoundry {

/**
 * @brief A CuTe tensor/view paired with its runtime shard layout.
 */
template <class Engine_, class GlobalLayout_, class ShardLayout_>
struct ShardTensor {
  // Checked on the type itself, not only in make_shard_tensor, so that spelling the aggregate out
  // (ShardTensor<float*, L, SL>{...}) is refused too (spec 2.6): a bare pointer carries no
  // residency, and local() and tilefoundry::copy dispatch on the engine's.
  static_assert(!std::is_pointer_v<std::remove_cv_t<std::remove_reference_t<Engine_>>>,
                "ShardTensor: the engine is a CuTe tensor or view, never a raw pointer; wrap it "
                "with cute::make_tensor(make_gmem_ptr / make_smem_ptr, layout)");
  static_assert(std::is_pointer_v<std::remove_cv_t<std::remove_reference_t<Engine_>>> ||
                    cute::is_tensor<cute::remove_cvref_t<Engine_>>::value,
                "ShardTensor: the engine must be a CuTe tensor or view");

  using engine_type = Engine_;
  using global_layout_type = GlobalLayout_;
  using shard_layout_type = ShardLayout_;

  Engine_ engine;             ///< CuTe tensor/view (gmem/smem/rmem); raw pointer rejected
  ShardLayout_ shard_layout;  ///< runtime shard-layout value (dynamic dims carry real extents)

  // Residency is lost here on purpose (spec 2.6): residency-aware code uses local() instead.
  CUTE_HOST_DEVICE auto data() { return cute::raw_pointer_cast(engine.data()); }
  CUTE_HOST_DEVICE auto data() const { return cute::raw_pointer_cast(engine.data()); }

  // shard_partition (spec 3.3) reads the distribution through layout().
  CUTE_HOST_DEVICE ShardLayout_ const& layout() const { return shard_layout; }
};

template <class T>
struct is_shard_tensor : std::false_type {};
template <class E, class GL, class SL>
struct is_shard_tensor<ShardTensor<E, GL, SL>> : std::true_type {};
template <class T>
constexpr bool is_shard_tensor_v = is_shard_tensor<cute::remove_cvref_t<T>>::value;

/**
 * @brief Factory: bind a global layout and a shard layout onto a CuTe tensor.
 * @param tensor a CuTe tensor / view (raw pointers rejected at compile time)
 * @param global_layout the global layout to bind
 * @param shard_layout the shard layout to bind
 */
template <class T, class GL, class SL>
CUTE_HOST_DEVICE auto make_shard_tensor(T const& tensor, GL global_layout, SL shard_layout)
    -> ShardTensor<T, GL, SL> {
  static_assert(!std::is_pointer_v<T>,
                "make_shard_tensor: raw pointer refused; wrap it in a CuTe tensor whose "
                "iterator carries its residency (make_gmem_ptr / make_smem_ptr)");
  static_assert(cute::is_tensor<T>::value, "make_shard_tensor: the engine must be a CuTe tensor");
  static_assert(is_shard_layout<SL>::value,
                "make_shard_tensor: shard_layout must be a ShardLayout");
  (void)global_layout;
  return ShardTensor<T, GL, SL>{tensor, shard_layout};
}

}  // namespace tilefoundry

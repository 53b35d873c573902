// The shared-memory workspace a reduce exchanges partial results through when they cross warps
// (spec 3.5's ws). Two kinds are accepted:
//   - a shared-memory tensor of accumulators (size(local dst) x threads-per-CTA of them): the
//     reduce writes each thread's partial, waits at a barrier, reads its peers' partials, and
//     waits at a second barrier before it returns, so that the next reduce may overwrite them;
//   - a reduce_workspace, made by make_reduce_workspace from a shared-memory tensor twice that
//     size: one barrier per reduce. The workspace has two halves and every reduce that uses it
//     takes the half the previous one did not, flipping a per-thread index kept in the
//     workspace object. A reduce's reads (in half h, after its barrier) come before the thread
//     reaches the next reduce's barrier; the next write to half h comes after that barrier,
//     so every read of a partial precedes its overwrite without a second barrier. All threads
//     make every reduce call (the exchanges are collective), so their indices agree.
// The workspace object is per thread and must be a named variable (an lvalue) that every reduce
// sharing the storage is passed, so that the flips are seen by the next call. Shared memory that
// is also used for anything else needs a barrier (ops::sync) between the two uses, as always.
#pragma once

#include <tilefoundry/runtime/common/config.h>

namespace tilefoundry {
namespace ops {

template <class Storage>
struct reduce_workspace {
  Storage storage;  ///< a shared-memory tensor of accumulators, two halves
  int half = 0;     ///< the half the next reduce uses (per thread)
};

/// A double-buffered reduce workspace over smem: a cute tensor of 2 x size(local dst) x
/// threads-per-CTA accumulators (float for 16-bit and float data) in shared memory.
template <class Storage>
TILEFOUNDRY_DEVICE auto make_reduce_workspace(Storage const& smem) {
  static_assert(cute::is_smem<cute::remove_cvref_t<decltype(smem.data())>>::value,
                "make_reduce_workspace: the storage must be a shared-memory tensor "
                "(cute::make_smem_ptr)");
  return reduce_workspace<Storage>{smem, 0};
}

namespace detail {

template <class W>
struct is_reduce_workspace : std::false_type {};
template <class S>
struct is_reduce_workspace<reduce_workspace<S>> : std::true_type {};
template <class W>
constexpr bool is_reduce_workspace_v = is_reduce_workspace<cute::remove_cvref_t<W>>::value;

}  // namespace detail
}  // namespace ops
}  // namespace tilefoundry

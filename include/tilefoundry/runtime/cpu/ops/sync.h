// ops::sync on the CPU target: a CTA is one host thread running one loop iteration, so every
// barrier inside a CTA has nothing to wait for. A grid barrier would need all loop iterations to
// be co-resident, which a parallel loop does not promise, so it is refused at compile time.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/sync_kind.h>

namespace tilefoundry {
namespace ops {

template <SyncKind Kind, int Base = 0, int Count = 0, unsigned Mask = 0u, int BarId = 0>
inline void sync(unsigned int* grid_bar = nullptr) {
  static_assert(Kind != SyncKind::grid,
                "ops::sync<grid>: the CPU target runs CTAs as loop iterations, which are not "
                "co-resident; a grid barrier cannot be honoured");
  (void)grid_bar;
}

}  // namespace ops
}  // namespace tilefoundry

// Barrier kinds of ops::sync (spec 3.4).
#pragma once

#include <tilefoundry/runtime/common/config.h>

namespace tilefoundry {
namespace ops {

enum class SyncKind {
  cta,          // every thread of the CTA (__syncthreads)
  warp,         // every lane of the calling warp (__syncwarp with a full mask)
  warp_masked,  // the lanes named by Mask (__syncwarp(Mask)); other lanes pass through
  named,        // threads [Base, Base + Count) on hardware barrier BarId; others pass through
  grid,         // every thread of every CTA of the launch; needs co-resident CTAs
};

}  // namespace ops
}  // namespace tilefoundry

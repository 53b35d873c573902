// The CPU target's runtime surface: the same public entries as the CUDA target, run by host
// code. Reached only through tilefoundry/runtime.h.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/cute_algorithms.h>
#include <tilefoundry/runtime/common/topology.h>
#include <tilefoundry/runtime/cpu/program.h>
#include <tilefoundry/runtime/common/numeric.h>
#include <tilefoundry/runtime/common/shard_attr.h>
#include <tilefoundry/runtime/common/shard_layout.h>
#include <tilefoundry/runtime/common/mesh.h>
#include <tilefoundry/runtime/common/shard_tensor.h>
#include <tilefoundry/runtime/common/distributed.h>
#include <tilefoundry/runtime/common/local.h>
#include <tilefoundry/runtime/common/shard_copy.h>
#include <tilefoundry/runtime/cpu/scratch.h>
#include <tilefoundry/runtime/cpu/ops/fill.h>
#include <tilefoundry/runtime/cpu/ops/copy.h>
#include <tilefoundry/runtime/cpu/ops/unary.h>
#include <tilefoundry/runtime/cpu/ops/binary.h>
#include <tilefoundry/runtime/cpu/ops/ternary.h>
#include <tilefoundry/runtime/cpu/ops/reduce.h>
#include <tilefoundry/runtime/cpu/ops/fold.h>
#include <tilefoundry/runtime/cpu/ops/arg_reduce.h>
#include <tilefoundry/runtime/cpu/ops/iota.h>
#include <tilefoundry/runtime/cpu/ops/topk.h>
#include <tilefoundry/runtime/cpu/ops/sync.h>
#include <tilefoundry/runtime/cpu/ops/copy_async.h>
#include <tilefoundry/runtime/common/ops/scalar.h>
#include <tilefoundry/runtime/cpu/ops/matmul.h>
#include <tilefoundry/runtime/cpu/ops/rope.h>
#include <tilefoundry/runtime/cpu/ops/reduce_axis.h>
#include <tilefoundry/runtime/cpu/ops/index_add.h>
#include <tilefoundry/runtime/cpu/ops/attention.h>

// The CUDA target's runtime surface. Reached only through tilefoundry/runtime.h.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/cute_algorithms.h>
#include <tilefoundry/runtime/common/topology.h>
#include <tilefoundry/runtime/cuda/program.cuh>
#include <tilefoundry/runtime/common/numeric.h>
#include <tilefoundry/runtime/common/shard_attr.h>
#include <tilefoundry/runtime/common/shard_layout.h>
#include <tilefoundry/runtime/common/mesh.h>
#include <tilefoundry/runtime/common/shard_tensor.h>
#include <tilefoundry/runtime/common/distributed.h>
#include <tilefoundry/runtime/common/local.h>
#include <tilefoundry/runtime/common/shard_copy.h>
#include <tilefoundry/runtime/cuda/ops/fill.cuh>
#include <tilefoundry/runtime/cuda/ops/copy.cuh>
#include <tilefoundry/runtime/cuda/ops/unary.cuh>
#include <tilefoundry/runtime/cuda/ops/binary.cuh>
#include <tilefoundry/runtime/cuda/ops/ternary.cuh>
#include <tilefoundry/runtime/cuda/ops/reduce.cuh>
#include <tilefoundry/runtime/cuda/ops/arg_reduce.cuh>
#include <tilefoundry/runtime/cuda/ops/topk.cuh>
#include <tilefoundry/runtime/cuda/ops/sync.cuh>
#include <tilefoundry/runtime/cuda/ops/copy_async.cuh>
#include <tilefoundry/runtime/cuda/ops/matmul.cuh>
#include <tilefoundry/runtime/cuda/ops/rope.cuh>
#include <tilefoundry/runtime/cuda/ops/reduce_axis.cuh>

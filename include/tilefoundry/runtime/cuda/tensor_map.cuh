// A tensor map: the descriptor through which the Hopper copy engine (TMA) reads a 2-D operand,
// rows of `depth` elements `stride` elements apart, a box of `box_rows` x `box_depth` elements at a
// time into shared memory in the 128-byte swizzle wgmma reads (cuda/ops/matmul_gmma.cuh).
//
// The host entry builds it (make_tensor_map, through the driver's cuTensorMapEncodeTiled, found at
// run time through the CUDA runtime: no driver library is linked) and passes it to the kernel as a
// __grid_constant__ parameter, so a CUDA graph captured once replays it as it was. A map that the
// operand cannot have (an element type other than bf16 or f16, a start not 16-byte aligned, a row
// stride not a multiple of 16 bytes, a driver without the call) is made with ok == 0: the kernel
// then reads the operand through another tier, never through the map.
#pragma once

#include <tilefoundry/runtime/common/config.h>

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cute/numeric/numeric_types.hpp>

#include <cstdint>
#include <type_traits>

namespace tilefoundry {
namespace ops {

/// A tensor map over an operand's rows, with what the kernel needs to find its own tile in it.
struct tensor_map {
  CUtensorMap map;   // the descriptor (64-byte aligned, opaque)
  void const* base;  // the element at row 0, column 0 of the map
  int64_t rows;      // rows of the map (the copy engine fills zeros past them)
  int64_t depth;     // elements a row (zeros past them)
  int64_t stride;    // elements between rows
  // Rows of a box (one copy): the kernel reads through the map only where they are the ones it
  // expects.
  int64_t box_rows;
  int64_t ok;  // 1 where the map was made; 0 where the operand allows none
};

namespace tensor_map_detail {

/// The driver's cuTensorMapEncodeTiled (its CUDA 12.0 signature).
using Encode = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, cuuint64_t const*,
                            cuuint64_t const*, cuuint32_t const*, cuuint32_t const*,
                            CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
                            CUtensorMapFloatOOBfill);

/// The driver's cuTensorMapEncodeTiled, or null where the driver has none.
inline Encode encode_tiled() {
  static Encode const fn = [] {
    void* found = nullptr;
    cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &found, 12000, cudaEnableDefault,
                                         &status) != cudaSuccess ||
        status != cudaDriverEntryPointSuccess) {
      cudaGetLastError();  // the query's error is an answer: the kernel takes another tier
      return static_cast<Encode>(nullptr);
    }
    return reinterpret_cast<Encode>(found);
  }();
  return fn;
}

}  // namespace tensor_map_detail

/// The map of `rows` rows of `depth` elements of type E from `base`, rows `stride` elements apart,
/// read a box of `box_rows` rows of `box_depth` elements (128 bytes) at a time; ok == 0 where the
/// operand or the driver allows none.
template <class E>
inline tensor_map make_tensor_map(E const* base, int64_t rows, int64_t depth, int64_t stride,
                                  int box_rows, int box_depth) {
  tensor_map m{};
  m.base = base;
  m.rows = rows;
  m.depth = depth;
  m.stride = stride;
  m.box_rows = box_rows;
  m.ok = 0;
  constexpr bool bf16 = std::is_same_v<E, cute::bfloat16_t>;
  constexpr bool f16 = std::is_same_v<E, cute::half_t>;
  if constexpr (bf16 || f16) {
    auto const encode = tensor_map_detail::encode_tiled();
    int64_t const row_bytes = stride * int64_t(sizeof(E));
    bool const fits = rows > 0 && depth > 0 && rows < (int64_t(1) << 31) &&
                      depth < (int64_t(1) << 31) && row_bytes % 16 == 0 &&
                      row_bytes < (int64_t(1) << 40) &&
                      reinterpret_cast<uintptr_t>(base) % 16 == 0 &&
                      box_depth * int64_t(sizeof(E)) == 128 && box_rows > 0 && box_rows <= 256;
    if (encode == nullptr || !fits) return m;
    cuuint64_t const dims[2] = {cuuint64_t(depth), cuuint64_t(rows)};
    cuuint64_t const strides[1] = {cuuint64_t(row_bytes)};
    cuuint32_t const box[2] = {cuuint32_t(box_depth), cuuint32_t(box_rows)};
    cuuint32_t const steps[2] = {1, 1};
    CUresult const r =
        encode(&m.map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2,
               const_cast<E*>(base), dims, strides, box, steps, CU_TENSOR_MAP_INTERLEAVE_NONE,
               CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    m.ok = r == CUDA_SUCCESS ? 1 : 0;
  }
  return m;
}

}  // namespace ops
}  // namespace tilefoundry

// Two kernels that tests/gpu/check_sass.sh must reject, proving that the SASS check of the row
// kernels can fail: one whose bf16 strips are too short for a 16-byte access (12 bytes: 2-byte
// loads and stores), one that moves 16 bytes at a time but keeps a dynamically indexed array in
// local memory (LDL / STL).
#include <tilefoundry/runtime.h>

using cute::Int;
using bf16 = cutlass::bfloat16_t;

__global__ void control_scalar(bf16 const* x, bf16* y) {
  int const t = int(threadIdx.x) * 6;
  tilefoundry::ops::unary(
      tilefoundry::ops::cast_op{},
      cute::make_tensor(cute::make_gmem_ptr(x + t), cute::make_shape(Int<6>{})),
      cute::make_tensor(cute::make_gmem_ptr(y + t), cute::make_shape(Int<6>{})));
}

__global__ void control_local(bf16 const* x, bf16* y, int k) {
  int const t = int(threadIdx.x) * 8;
  float spill[32];
  for (int i = 0; i < 32; ++i) spill[i] = 0.0f;
  for (int i = 0; i < k; ++i) spill[(i * 5 + k) % 32] += float(x[(t + i) % 1024]);
  auto regs = cute::make_tensor<float>(cute::make_shape(Int<8>{}));
  tilefoundry::ops::copy(cute::make_tensor(cute::make_gmem_ptr(x + t), cute::make_shape(Int<8>{})),
                         regs);
  regs(0) += spill[(threadIdx.x * 7 + k) % 32];
  tilefoundry::ops::copy(regs,
                         cute::make_tensor(cute::make_gmem_ptr(y + t), cute::make_shape(Int<8>{})));
}
